"""The leader's real decisions, from its log, and their comparison with an audit's decisions.

``ModularLoadManagerImpl`` logs each decision of a shedding or split cycle at INFO:

* ``doLoadShedding``: ``[ThresholdShedder] Unloading bundle: <bundle> from broker <broker> to dest broker <dest>``
  (the strategy's simple class name in brackets);
* ``checkNamespaceBundleSplit``: ``Load-manager splitting bundle <bundle> and unloading <true|false>``, then
  ``Successfully split namespace bundle <bundle>`` or ``Failed to split namespace bundle <bundle>`` (e.g. a
  second check on the same, not yet refreshed, load data retries a bundle already split: the admin call is
  refused with "Invalid upper boundary"). A split attempt that failed is kept with ``outcome="failed"`` and is
  not a decision the comparison counts.

``ExtensibleLoadManagerImpl`` (PIP-192):

* ``UnloadScheduler.execute`` (the leader): ``[TransferShedder] Unloading bundle: Unload[sourceBroker=<broker>,
  serviceUnit=<bundle>, destBroker=Optional[<dest>], force=false]`` (``Optional.empty``: an unload without a
  transfer);
* ``SplitManager.waitAsync`` (the owner broker): ``Published the bundle split event for bundle:<bundle>``, then
  ``Completed the bundle split event for bundle:<bundle>``, or ``Timed out while waiting for the bundle split
  event: <bundle>`` / ``Failed the bundle split event for bundle:<bundle>``.

Lines may carry a prefix (e.g. the broker id the log came from) before the log4j timestamp; a ``host:port`` prefix
names the broker that logged the line (an extensible split's owner). A decision's tick is
its time truncated to the minute (UTC): the comparison matches the leader's and the audit's decisions per minute
(the audit decides at the exact times of the report versions ``ingest`` keeps, the leader logs a few ms later).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TS = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})[,.](\d{3})(Z|[+-]\d{2}:?\d{2})?")
_UNLOAD = re.compile(r"\[(?P<strategy>\w+)\] Unloading bundle: (?P<bundle>\S+) from broker (?P<source>\S+) "
                     r"to dest broker (?P<target>\S+)")
_SPLIT = re.compile(r"Load-manager splitting bundle (?P<bundle>\S+) and unloading (?P<unload>\w+)")
_SPLIT_OUTCOME = re.compile(r"(?P<outcome>Successfully|Failed to) split namespace bundle (?P<bundle>\S+)")
_TRANSFER = re.compile(r"\[(?P<strategy>\w+)\] Unloading bundle: Unload\[sourceBroker=(?P<source>[^,\]]+), "
                       r"serviceUnit=(?P<bundle>[^,\]]+), destBroker=Optional(?:\[(?P<target>[^\]]*)\]|\.empty)")
_SPLIT_EVENT = re.compile(r"Published the bundle split event for bundle:(?P<bundle>[^\s.]+(?:\.[^\s.]+)*?)\. ")
_SPLIT_EVENT_OUTCOME = re.compile(r"(?P<outcome>Completed the bundle split event for bundle:|Timed out while waiting "
                                  r"for the bundle split event: |Failed the bundle split event for bundle:)"
                                  r"(?P<bundle>[^\s,]+)")
_PREFIX_BROKER = re.compile(r"^\s*(?P<broker>[\w.-]+:\d+)\s+\d{4}-")


@dataclass(frozen=True)
class Decision:
    """One UNLOAD or SPLIT: when (epoch ms), what, from which broker (SPLIT: the owner, when known)."""

    at_ms: int
    action: str
    bundle: str
    source: str | None
    target: str | None = None
    strategy: str | None = None
    line: str = field(default="", compare=False)
    outcome: str | None = field(default=None, compare=False)  # SPLIT: "succeeded" | "failed" | None (not logged)

    @property
    def tick_ms(self) -> int:
        return self.at_ms // 60_000 * 60_000

    def key(self) -> tuple[str, str, str | None]:
        return self.action, self.bundle, self.source


def _epoch_ms(m: re.Match[str]) -> int:
    date, clock, millis, zone = m.groups()
    text = f"{date}T{clock}.{millis}"
    if zone and zone != "Z":
        zone = zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
        dt = datetime.fromisoformat(text + zone)
    else:
        dt = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)  # exact (a float product can land 1 ms short)


def parse_leader_log(lines: Iterable[str], attempts: bool = False) -> list[Decision]:
    """Every UNLOAD / SPLIT decision in time order (lines without a log4j timestamp are skipped); a SPLIT's
    ``outcome`` is taken from the next success / failure line for that bundle. Failed split attempts are left out
    unless ``attempts``."""
    out: list[Decision] = []
    for line in lines:
        m_ts = _TS.search(line)
        if not m_ts:
            continue
        at = _epoch_ms(m_ts)
        m = _TRANSFER.search(line)
        if m:
            out.append(Decision(at, "UNLOAD", m.group("bundle"), m.group("source"), m.group("target") or None,
                                m.group("strategy"), line.rstrip("\n")))
            continue
        m = _SPLIT_EVENT.search(line)
        if m:
            p = _PREFIX_BROKER.match(line)
            out.append(Decision(at, "SPLIT", m.group("bundle"), p.group("broker") if p else None, None, None,
                                line.rstrip("\n")))
            continue
        m = _SPLIT_EVENT_OUTCOME.search(line)
        if m:
            _set_outcome(out, m.group("bundle"), m.group("outcome").startswith("Completed"))
            continue
        m = _UNLOAD.search(line)
        if m:
            target = m.group("target")
            out.append(Decision(at, "UNLOAD", m.group("bundle"), m.group("source"),
                                None if target in ("null", "") else target, m.group("strategy"), line.rstrip("\n")))
            continue
        m = _SPLIT.search(line)
        if m:
            out.append(Decision(at, "SPLIT", m.group("bundle"), None, None, None, line.rstrip("\n")))
            continue
        m = _SPLIT_OUTCOME.search(line)
        if m:
            _set_outcome(out, m.group("bundle"), m.group("outcome") == "Successfully")
    out = [d for d in out if attempts or d.outcome != "failed"]
    return sorted(out, key=lambda d: (d.at_ms, d.action, d.bundle))


def _set_outcome(out: list[Decision], bundle: str, succeeded: bool) -> None:
    """The latest SPLIT of ``bundle`` without an outcome gets this one."""
    pending = [i for i, d in enumerate(out) if d.action == "SPLIT" and d.bundle == bundle and d.outcome is None]
    if pending:
        d = out[pending[-1]]
        out[pending[-1]] = Decision(d.at_ms, d.action, d.bundle, d.source, d.target, d.strategy, d.line,
                                    "succeeded" if succeeded else "failed")


_SHEDDER_LINE = re.compile(r"\[pulsar-load-manager-[\w-]*\] \w+ +org\.apache\.pulsar\.broker\.loadbalance\.(impl\."
                           r"(ThresholdShedder|OverloadShedder|UniformLoadShedder|AvgShedder|ModularLoadManagerImpl)"
                           r"|extensions\.scheduler\.(TransferShedder|UnloadScheduler))\b")


def shedding_runs(lines: Iterable[str], gap_ms: int = 5_000) -> list[int]:
    """When the leader's ``LoadSheddingTask`` (extensible: ``UnloadScheduler``) ran (epoch ms of each run's first
    line): the lines its shedding strategy or ``doLoadShedding`` logs on the load manager's executor thread
    (``pulsar-load-manager-*``; a strategy logs each broker it looks at under DEBUG; ``UnloadScheduler`` logs each
    run's decision result), one run per burst of lines ``gap_ms`` apart."""
    times = sorted(_epoch_ms(m) for line in lines if _SHEDDER_LINE.search(line) and (m := _TS.search(line)))
    runs: list[int] = []
    last = 0
    for t in times:
        if not runs or t - last > gap_ms:
            runs.append(t)
        last = t
    return runs


_NOT_OVERLOADED = re.compile(r"ThresholdShedder - \[(?P<broker>[^\]]+)\] broker is not overloaded, ignoring at this point "
                             r"\((?P<usage>[^)]*)\)")
_PERCENT = re.compile(r"(\w+): (-?[\d.]+|NaN|-?Infinity)%")


def shedding_views(lines: Iterable[str]) -> list[tuple[int, str, dict[str, str]]]:
    """What ThresholdShedder read at each run (DEBUG): per broker it did not find overloaded, the held report's
    ``LocalBrokerData.printResourceUsage()`` (each resource's ``percentUsage()``, ``%.2f``): (time, broker,
    {resource: printed percent})."""
    out = []
    for line in lines:
        m, m_ts = _NOT_OVERLOADED.search(line), _TS.search(line)
        if m and m_ts:
            out.append((_epoch_ms(m_ts), m.group("broker"), dict(_PERCENT.findall(m.group("usage")))))
    return out


_LOAD_STATS = re.compile(r"TransferShedder - brokers' load stats:sum:(?P<sum>[-\d.]+), sqSum:(?P<sqSum>[-\d.]+), "
                         r"avg:(?P<avg>[-\d.]+), std:(?P<std>[-\d.NaN]+), totalBrokers:(?P<n>\d+), "
                         r"brokersSortedByLoad:\[(?P<brokers>[^\]]*)\]$")


def transfer_views(lines: Iterable[str]) -> list[tuple[int, dict[str, str], list[str]]]:
    """What TransferShedder read at each run (``loadBalancerDebugModeEnabled``): its ``LoadStats`` of the held
    BrokerLoadData's ``weightedMaxEMA`` (``%.2f``) and the brokers sorted by it: (time, {sum, sqSum, avg, std},
    brokers). The same line with ``after offload`` (logged per planned transfer) is left out."""
    out = []
    for line in lines:
        m, m_ts = _LOAD_STATS.search(line.rstrip()), _TS.search(line)
        if m and m_ts:
            brokers = [b.strip() for b in m.group("brokers").split(",") if b.strip()]
            out.append((_epoch_ms(m_ts), {k: m.group(k) for k in ("sum", "sqSum", "avg", "std")}, brokers))
    return out


@dataclass
class Comparison:
    """Per tick, the leader's decisions matched to the audit's (same action, bundle, source broker)."""

    matched: list[tuple[Decision, Decision]]
    leader_only: list[Decision]
    audit_only: list[Decision]
    near: list[tuple[Decision, Decision]]  # same decision, a different tick (listed also as leader/audit-only)

    @property
    def agreement(self) -> float:
        total = len(self.matched) + len(self.leader_only)
        return len(self.matched) / total if total else 1.0

    def summary(self) -> str:
        total = len(self.matched) + len(self.leader_only)
        return (f"matched {len(self.matched)}/{total} of the leader's decisions ({100 * self.agreement:.0f} %), "
                f"{len(self.leader_only)} the audit missed, {len(self.audit_only)} the leader never made")


SAME_RUN_MS = 30_000  # a leader's run logs its decisions seconds after the audit's tick (split calls, lag)


def _same_run(audit: Decision, leader: Decision) -> bool:
    """The same run: the leader's line within 30 s of the audit's tick, whichever minute each falls in (a split
    check whose split calls take seconds logs its later splits seconds after the report's tick, maybe in the next
    minute; an extensible owner's SplitScheduler runs seconds off the leader's minute; runs are a minute apart)."""
    return abs(audit.at_ms - leader.at_ms) < SAME_RUN_MS


def compare(leader: list[Decision], audit: list[Decision], actions: tuple[str, ...] = ("UNLOAD", "SPLIT"),
            near_ticks: int = 2) -> Comparison:
    """Match per tick (:func:`_same_run`) on (action, bundle, source); a SPLIT whose source the log does not name
    matches on bundle."""
    lead = [d for d in leader if d.action in actions]
    aud = [d for d in audit if d.action in actions]
    left = list(aud)
    matched, leader_only = [], []
    for d in lead:
        same = [a for a in left if a.action == d.action and a.bundle == d.bundle
                and (d.source is None or a.source == d.source) and _same_run(a, d)]
        hit = min(same, key=lambda a: abs(a.at_ms - d.at_ms)) if same else None
        if hit is None:
            leader_only.append(d)
        else:
            left.remove(hit)
            matched.append((d, hit))
    near = []
    for d in leader_only:
        a = next((a for a in left if a.action == d.action and a.bundle == d.bundle
                  and (d.source is None or a.source == d.source)
                  and abs(a.tick_ms - d.tick_ms) <= near_ticks * 60_000), None)
        if a is not None:
            near.append((d, a))
    return Comparison(matched, leader_only, left, near)
