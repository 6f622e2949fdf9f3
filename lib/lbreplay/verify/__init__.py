"""``lbreplay verify``: the differential check of the kernel against Pulsar's real classes (issue 16).

The oracle (``tests/pulsar_oracle``, a small Java program built by Maven against
``org.apache.pulsar:pulsar-broker:<version>``) answers ``decide`` requests with Pulsar's own strategy objects;
this module generates seeded random snapshots and multi-tick sequences per strategy, asks the oracle and the kernel
(through ``decide``'s own request parsing, :class:`lbreplay.decide.DecideRequest`) and compares the answers exactly:
unloads (broker, bundle), split candidates (bundle, broker), placements (the broker, or membership of Pulsar's own
set of equally good brokers where Pulsar picks with ``ThreadLocalRandom``), and the strategies' shared figures
(EWMA maps, hit counters) to 1e-12 relative. No Spark.

What the oracle runs per request line (see ``Oracle.java``): one leader refresh
(``onActiveBrokersChange`` on both strategies, as ``ModularLoadManagerImpl.cleanupDeadBrokersData``), then
``shed`` = ``findBundlesForUnloading`` after ``doLoadShedding``'s grace-period prune; ``assign`` =
``selectBroker`` over every broker of the snapshot; ``split`` = ``BundleSplitterTask.findBundlesToSplit``;
``selectBrokerForAssignment`` (the ``PlacementPipeline`` cases) = ``ModularLoadManagerImpl.selectBrokerForAssignment``
with namespace isolation policies, anti-affinity groups and failure domains, against ``decide``'s own ``assign``.
``doLoadShedding`` (the ``LoadSheddingDestination`` cases) = the plan, then per bundle the jar's own unload checks and
(3.0+) the destination ``ModularLoadManagerImpl.selectBroker``, against ``decide``'s own ``shed``.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from lbreplay.errors import UsageError
from lbreplay.kernel.version_profile import line_of, profile_for
from lbreplay.verify.cases import IMPL, NOW, STRATEGIES, Case, Generator
from lbreplay.verify.kernel_answer import compare, kernel_answer
from lbreplay.verify.oracle_process import Oracle, OracleError, build_oracle

__all__ = ["IMPL", "NOT_IN_LINE", "NOW", "PULSAR_LINES", "STRATEGIES", "Case", "Generator", "Oracle", "OracleError",
           "build_oracle", "compare", "kernel_answer", "line_strategies", "run_case", "run_cases", "verify", "verify_command"]

# Pulsar line -> (newest jar checked, lbreplay profile name, JDK major the jar needs). The jar is the line's newest
# pulsar-broker on Maven Central whose dependency tree resolves there (docs/how-we-know.md).
PULSAR_LINES: dict[str, tuple[str, str, int]] = {
    # 5.0.1's POMs name a parent (org.apache.pulsar:pulsar:5.0.1) and modules (pulsar-common, ...) that Maven
    # Central does not serve; 5.0.0-M1 is the newest 5.0 release whose tree resolves.
    "5.0": ("5.0.0-M1", "5.0", 17),
    # 4.2.x jars are Java 21 class files (a JDK >= 21 is picked for building and running the oracle).
    "4.2": ("4.2.4", "4.2", 21),
    "4.0": ("4.0.7", "4.0", 17),
    "3.3": ("3.3.6", "3.3", 17),
    "3.0": ("3.0.7", "3.0", 17),
    "2.11": ("2.11.0", "2.11", 17),
    "2.10": ("2.10.5", "2.10", 17),
}
NOT_IN_LINE = "not in this line"


def line_strategies(line: str) -> tuple[str, ...]:
    """The strategies the line's jar has (AvgShedder since 3.3, the extensible TransferShedder, its split strategy
    and RoundRobinBrokerSelector since 3.0, LeastResourceUsageWithWeight since 2.11)."""
    prof = profile_for(PULSAR_LINES[line][1])
    return tuple(s for s in STRATEGIES if (s != "AvgShedder" or prof.avg_shedder_available)
                 and (s not in ("TransferShedder", "DefaultNamespaceBundleSplitStrategy")
                      or prof.transfer_shedder_available)
                 and s not in prof.absent_strategies)


# ------------------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------------------
def _first_diffs(case: Case, java_answers: Iterator[dict[str, Any]]) -> list[str]:
    """The differences of the case's first disagreeing step (the oracle's answers, one per step, in order)."""
    state: dict[str, Any] | None = None
    for i, req in enumerate(case.steps):
        java = next(java_answers)
        kernel, state = kernel_answer(req, state)
        diffs = compare(case.strategy, java, kernel)
        if diffs:
            return [f"step {i}: {d}" for d in diffs]
    return []


def run_case(oracle: Oracle, case: Case, case_id: str) -> list[str]:
    """Run a case's steps through both sides, one request at a time; the differences of the first disagreeing
    step (no step after it is asked)."""
    return _first_diffs(case, (oracle.ask({**req, "sequence": case_id}) for req in case.steps))


def run_cases(oracle: Oracle, numbered: Iterable[tuple[str, Case]], chunk: int = 64) -> Iterator[list[str]]:
    """:func:`run_case` for each (case id, case), pipelined (``Oracle.ask_many``): the oracle's JVM answers the
    next requests while the kernel answers this one. Cases are taken ``chunk`` at a time."""
    source = iter(numbered)
    while batch := list(itertools.islice(source, chunk)):
        answers = oracle.ask_many({**req, "sequence": case_id} for case_id, case in batch for req in case.steps)
        for _, case in batch:
            own = itertools.islice(answers, len(case.steps))
            yield _first_diffs(case, own)
            for _ in own:  # the steps after a disagreeing one were asked too: their answers are read
                pass
        for _ in answers:  # the writer's end
            pass


def cases(seed: int, strategy: str, count: int, profile: str) -> Iterator[Case]:
    gen = Generator(seed * 1_000_003 + STRATEGIES.index(strategy), profile)
    for _ in range(count):
        yield gen.case(strategy)


def verify(version: str, count: int, seed: int, strategies: tuple[str, ...] = STRATEGIES,
           emit: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``count`` cases per strategy; one result dict per strategy."""
    line = line_of(version) if line_of(version) in PULSAR_LINES else ".".join(version.split(".")[:2])
    if line not in PULSAR_LINES:
        raise UsageError(f"--pulsar-version: unsupported {version!r}; supported lines: {', '.join(PULSAR_LINES)}")
    jar, profile, java_major = PULSAR_LINES[line]
    if version.count(".") == 2:
        jar = version
    results = []
    available = line_strategies(line)
    with Oracle(jar, java_major, extensible="TransferShedder" in available) as oracle:
        for strategy in strategies:
            if strategy not in available:
                res = {"pulsarVersion": jar, "profile": profile, "strategy": strategy, "cases": 0,
                       "status": NOT_IN_LINE}
                results.append(res)
                if emit:
                    emit(res)
                continue
            agree = 0
            examples: list[dict[str, Any]] = []
            numbered = ((f"{strategy}-{seed}-{k}", case) for k, case in enumerate(cases(seed, strategy, count, profile)))
            for k, diffs in enumerate(run_cases(oracle, numbered)):
                if diffs:
                    if len(examples) < 5:
                        examples.append({"case": k, "diffs": diffs[:3]})
                else:
                    agree += 1
            res = {"pulsarVersion": jar, "profile": profile, "strategy": strategy, "cases": count,
                   "agree": agree, "agreement": agree / count if count else 1.0, "examples": examples}
            results.append(res)
            if emit:
                emit(res)
    return results


def verify_command(version: str, count: int, seed: int) -> None:
    """``lbreplay verify``: one JSON line per strategy; exit 1 when any case disagrees."""
    if count < 1:
        raise UsageError(f"--cases: must be >= 1, got {count}")
    results = verify(version, count, seed, emit=lambda r: print(json.dumps(r), flush=True))
    if any(r.get("agree") != r["cases"] for r in results if r.get("status") != NOT_IN_LINE):
        sys.exit(1)
