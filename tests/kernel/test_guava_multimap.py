"""lbreplay.kernel.guava_multimap against Guava's own ArrayListMultimap, and doLoadShedding walking a plan in its order.

``ModularLoadManagerImpl.doLoadShedding`` walks ``findBundlesForUnloading``'s multimap with ``asMap().forEach``:
OverloadShedder / ThresholdShedder / UniformLoadShedder return their ``selectedBundlesCache`` field (cleared each
call, its ``HashMap`` table kept), AvgShedder a fresh ``ArrayListMultimap.create()``. Random histories of runs
(puts of broker ids, some sharing a bin, and bundle names) go through tests/kernel/java/GuavaMultimapOrder.java on
the Guava jars the Pulsar lines depend on (31.0.1-jre: 2.11.0, a table of 32; 32.0.0-jre: 2.10.5 and 33.6.0-jre:
5.0.0-M1, a table of 16), taken from the local Maven repository (resolved with mvn when absent); the walk must be
equal.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.guava_multimap import SelectedBundlesCache, as_map, initial_table, plan_order
from lbreplay.kernel.java_hash_map import hash_map_hash
from lbreplay.kernel.least_long_term_message_rate import LeastLongTermMessageRate
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.modular_load_manager import do_load_shedding, restore_component
from lbreplay.kernel.overload_shedder import OverloadShedder
from lbreplay.kernel.placement import LeaderState
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.strategy import Unload
from lbreplay.kernel.threshold_shedder import ThresholdShedder
from tests.kernel.jdk_process import JAVA_DIR, JdkProcess
from tests.kernel.jdk_process import hex_key as _hex
from tests.kernel.jdk_process import unhex_key as _unhex
from tests.kernel.placement_fixtures import Br, Bu, World, conf
from tests.kernel.test_java_hash_map import BROKERS, BUNDLES, SAME_BIN_HM

# Guava version -> a Pulsar line whose jar depends on it
GUAVA_LINES = {"31.0.1-jre": "2.11", "32.0.0-jre": "2.10", "33.6.0-jre": "5.0"}
M2 = Path.home() / ".m2" / "repository" / "com" / "google" / "guava" / "guava"
KEYS = BROKERS[:30] + SAME_BIN_HM[:12]
FULL = "0x00000000_0xffffffff"
NOW = 1_700_000_000_000
Run = tuple[bool, list[tuple[str, str]]]  # (fresh multimap?, puts)


class Guava(JdkProcess):
    """One ``java GuavaMultimapOrder`` over one Guava jar; ``line``: the Pulsar line that depends on it."""

    def __init__(self, classes: Path, jar: Path, line: str) -> None:
        self.line = line
        self.proc = subprocess.Popen(["java", "-Xshare:auto", "-cp", f"{classes}:{jar}", "GuavaMultimapOrder"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="ascii")

    def walk(self, fresh: bool, puts: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
        line = self.ask("\t".join(["N" if fresh else "K"] + [f"{_hex(k)}:{_hex(v)}" for k, v in puts]))
        out = []
        for entry in line.split(" ") if line else []:
            key, _, values = entry.partition("=")
            out.append((_unhex(key), [_unhex(v) for v in values.split(",")]))
        return out


@pytest.fixture(scope="module", params=sorted(GUAVA_LINES))
def guava(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guava]:
    jar = M2 / request.param / f"guava-{request.param}.jar"
    if not jar.exists() and shutil.which("mvn") is not None:  # a fresh machine: resolve it from Maven Central
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact=com.google.guava:guava:{request.param}",
                            "-Dtransitive=false"], check=False, stdout=subprocess.DEVNULL, timeout=300)
    if shutil.which("javac") is None or not jar.exists():
        pytest.skip(f"javac or guava-{request.param}.jar (local Maven repository, mvn) missing")
    classes = tmp_path_factory.mktemp("guava")
    subprocess.run(["javac", "-cp", str(jar), "-d", str(classes), str(JAVA_DIR / "GuavaMultimapOrder.java")],
                   check=True)
    process = Guava(classes, jar, GUAVA_LINES[request.param])
    yield process
    process.close()


RUNS = st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(BUNDLES)),
                                                  max_size=45)), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(RUNS)
def test_walk_is_guavas_own(guava: Guava, runs: list[Run]) -> None:
    """Runs on one kept multimap (``clear()`` each run, its state round-tripped between runs) and fresh ones
    (``create()``) walk as Guava's ``asMap().forEach`` with the same history."""
    assert guava.ask("R") == ""  # a new strategy instance
    state: dict[str, object] = {}
    for fresh, puts in runs:
        expected = guava.walk(fresh, puts)
        if fresh:
            assert as_map(puts, initial_table(guava.line))[0] == expected
        else:
            cache = SelectedBundlesCache()
            cache.set_state(state)
            assert cache.walk(puts, guava.line) == expected
            state = cache.get_state()


def test_initial_table_per_line_and_kept_table() -> None:
    assert [initial_table(v) for v in ("2.9", "2.10", "2.11", "3.0", "3.3", "4.0", "4.x", "4.2", "5.0")] == [
        32, 16, 32, 16, 16, 16, 16, 16, 16]
    a, b = "broker-0.pulsar.svc.cluster.local:8080", "broker-12.pulsar.svc.cluster.local:8080"
    assert hash_map_hash(a) & 15 == hash_map_hash(b) & 15 and hash_map_hash(a) & 31 < hash_map_hash(b) & 31
    cache = SelectedBundlesCache()
    assert [k for k, _ in cache.walk([(b, "x"), (a, "y")], "4.0")] == [b, a]  # one bin of 16: put order
    assert cache.get_state() == {}
    cache.walk([(k, "x") for k in BROKERS[:13]], "4.0")  # 13 keys > 0.75 x 16: the table doubles, and stays
    assert cache.get_state() == {"table": 32}
    assert [k for k, _ in cache.walk([(b, "x"), (a, "y")], "4.0")] == [a, b]  # bins of 32
    fresh = plan_order(object(), [(b, "x"), (a, "y")], "4.0")  # AvgShedder: create() each call
    assert [k for k, _ in fresh] == [b, a]


@pytest.mark.parametrize("bad", [{"table": 24}, {"table": 8}, {"table": "32"}, {"table": True}, [32]])
def test_invalid_table_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        SelectedBundlesCache().set_state(bad)
    with pytest.raises(UsageError):
        restore_component(ThresholdShedder(), {"class": "ThresholdShedder", "state": {"selectedBundlesCache": bad}},
                          "ThresholdShedder", "shedding")


@pytest.mark.parametrize("cls", [OverloadShedder, ThresholdShedder])
def test_state_round_trip(cls: type[OverloadShedder] | type[ThresholdShedder]) -> None:
    s = cls()
    assert "selectedBundlesCache" not in s.get_state()
    s.selected_bundles_cache.table = 64
    t = cls()
    t.set_state(s.get_state())
    assert t.selected_bundles_cache.table == 64 and t.get_state()["selectedBundlesCache"] == {"table": 64}


class PlanShedder(OverloadShedder):
    """An OverloadShedder (its ``selectedBundlesCache`` kept) returning a fixed plan."""

    def __init__(self, plan: list[tuple[str, str]]) -> None:
        super().__init__()
        self.plan = plan

    def find_bundles_for_unloading(self, ld: LoadData, c: PulsarConfig) -> list[Unload]:
        return [Unload(b, u, "fake") for b, u in self.plan]


def test_do_load_shedding_walks_the_multimap_order() -> None:
    """2.10 (no destination, no policies check): every planned bundle is unloaded, brokers in the multimap's
    ``HashMap`` order (a:8080, c:8080, b:8080 in bins 8, 12, 14 of 16), not sorted, bundles as put."""
    w = World(brokers={"a:8080": Br(usage=90), "b:8080": Br(usage=90), "c:8080": Br(usage=90)},
              bundles={f"t/{n}/{FULL}": Bu(owner=o, long_rate=(1, 1))
                       for n, o in (("b1", "b:8080"), ("b2", "b:8080"), ("c1", "c:8080"), ("a1", "a:8080"))})
    ld = w.build()
    plan = [("b:8080", f"t/b2/{FULL}"), ("c:8080", f"t/c1/{FULL}"), ("b:8080", f"t/b1/{FULL}"),
            ("a:8080", f"t/a1/{FULL}")]
    out = do_load_shedding(ld, conf(pulsarVersion="2.10"), PlanShedder(plan), LeastLongTermMessageRate(),
                           LeaderState.from_load_data(ld), NamespacePolicies(), np.random.default_rng(0), NOW)
    assert [(u.broker, u.bundle) for u in out] == [("a:8080", f"t/a1/{FULL}"), ("c:8080", f"t/c1/{FULL}"),
                                                   ("b:8080", f"t/b2/{FULL}"), ("b:8080", f"t/b1/{FULL}")]
