"""Hostile-input corpus: each class through the real entry point it would reach (``lbreplay.cli:main``), with its
expected outcome asserted — exit 2 (usage) / 3 (invalid input) with one line naming the file / JSON path or
table / column / rule, or a documented repair (exit 0 and what was made of the input).

No case may end in a traceback as the user's only message (every failing case asserts a one-line ``lbreplay:``
reason and the absence of ``Traceback``), and no replay may produce decisions from data that failed validation.
The corpus is built from the checked-in Pulsar samples (``data/samples``) and the ``decide`` test cluster, mutated
per class. Classes that real Pulsar data legitimately shows (a bundle listed by two brokers in one tick while it
moves, overlapping / gapped ranges around splits, irregular report times) are accepted (DESIGN.md §4).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.hostile.harness import REPO, Outcome, cli, on_lake
from tests.test_decide import cluster as decide_cluster
from tests.test_decide import r as bundle_name
from tests.test_decide import stats

MODULAR = REPO / "data" / "samples" / "modular-3brokers"
EXTENSIBLE = REPO / "data" / "samples" / "extensible-3brokers"
BROKERS = Path("loadbalance") / "brokers"


def refused(res: Outcome, code: int, pattern: str) -> None:
    """Exit ``code`` with exactly one ``lbreplay:`` line matching ``pattern`` as the last stderr line, no traceback."""
    assert res.code == code, (res.code, res.err[-3000:])
    assert "Traceback" not in res.err, res.err[-3000:]
    assert res.last.startswith("lbreplay: "), res.err[-2000:]
    assert re.search(pattern, res.last), res.last


# ------------------------------------------------------------------------------------------------- decide
def _decide(request: dict[str, Any] | str, *args: str) -> Outcome:
    text = request if isinstance(request, str) else json.dumps(request)
    return cli(None, "decide", "--request", "-", *args, stdin=text)


def _broker_local(req: dict[str, Any], b: str = "b1:8080") -> dict[str, Any]:
    return req["loadData"]["brokers"][b]["localData"]


def test_decide_truncated_json() -> None:
    refused(_decide(json.dumps(decide_cluster())[:180]), 2, r"\$: malformed JSON at line 1 column \d+")


def test_decide_non_utf8_file(tmp_path: Path) -> None:
    f = tmp_path / "request with space.json"
    f.write_bytes(json.dumps(decide_cluster()).encode().replace(b'"b2:8080"', b'"b2\xff:8080"'))
    refused(cli(None, "decide", "--request", str(f)), 2, r"request with space\.json.* is not UTF-8 text")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_decide_non_finite_usage(literal: str) -> None:
    text = json.dumps(decide_cluster()).replace('"usage": 90', f'"usage": {literal}', 1)
    refused(_decide(text), 3, r'\$\.loadData\.brokers\["b1:8080"\]\.localData\.cpu\.usage: must be a finite number')


def test_decide_negative_rate() -> None:
    req = decide_cluster()
    _broker_local(req)["lastStats"][bundle_name(0)]["msgRateIn"] = -1
    refused(_decide(req), 3, r'lastStats\["t/ns/0x00000000_0x10000000"\]\.msgRateIn: must be >= 0, got -1')


def test_decide_1e308_usage_and_rate_stay_finite_json() -> None:
    """1e308 is finite: accepted. The overloaded broker sheds its largest bundle, and the answer stays strict
    JSON (no Infinity/NaN tokens) even where the arithmetic on it overflows."""
    req = decide_cluster()
    _broker_local(req)["cpu"]["usage"] = 1e308
    req["loadData"]["bundleData"][bundle_name(0)]["shortTermData"]["msgThroughputIn"] = 1e308
    res = _decide(req)
    assert res.code == 0, res.err
    out = json.loads(res.out, parse_constant=lambda c: pytest.fail(f"non-JSON number {c}"))
    assert [(u["broker"], u["bundle"]) for u in out["unload"]][:1] == [("b1:8080", bundle_name(0))]


def test_decide_limit_zero_counts_as_zero_percent() -> None:
    """Documented repair, as Pulsar: ResourceUsage.percentUsage() is 0 when the limit is 0, so b1's 90 % CPU on a
    0 limit counts 0 % and nothing is shed (b2 20 %, b3 10 %: no broker above the average + threshold)."""
    req = decide_cluster()
    _broker_local(req)["cpu"]["limit"] = 0
    res = _decide(req)
    assert res.code == 0, res.err
    assert json.loads(res.out)["unload"] == []


def test_decide_zero_and_one_broker() -> None:
    """0 brokers and 1 broker: nothing to balance; Pulsar skips shedding (no candidates / nowhere to go)."""
    req = decide_cluster()
    req["loadData"] = {"brokers": {}, "bundleData": {}}
    res = _decide(req)
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert (out["unload"], out["split"], out["assign"], out["skip"]) == ([], [], [], "NoBrokers")
    req = decide_cluster()
    for b in ("b2:8080", "b3:8080"):
        del req["loadData"]["brokers"][b]
    res = _decide(req)
    assert res.code == 0, res.err
    assert json.loads(res.out)["unload"] == []


def test_decide_100k_topics_in_one_bundle() -> None:
    """A bundle with 100,000 topics (> loadBalancerNamespaceBundleMaxTopics 1000): decided, and split."""
    req = decide_cluster()
    _broker_local(req)["lastStats"][bundle_name(0)]["topics"] = 100_000
    req["loadData"]["bundleData"][bundle_name(0)]["topics"] = 100_000
    req["actions"] = ["split"]
    res = _decide(req)
    assert res.code == 0, res.err
    assert bundle_name(0) in [s["bundle"] for s in json.loads(res.out)["split"]]


@pytest.mark.parametrize(("config", "pattern"), [
    ({"loadBalancerLoadSheddingStrategy": "org.example.NoSuchShedder"}, r"unsupported strategy 'org\.example\.NoSuchShedder'"),
    ({"loadBalancerBrokerOverloadedThresholdPercentage": "high"}, r"\$\.config\.loadBalancerBrokerOverloadedThresholdPercentage: expected a number"),
    ({"noSuchKey": 1}, r"\$\.config\.noSuchKey: unknown config key"),
])
def test_decide_bad_config(config: dict[str, Any], pattern: str) -> None:
    req = decide_cluster()
    req["config"] = config
    refused(_decide(req), 2, pattern)


@pytest.mark.parametrize(("line", "key", "strategy"), [
    ("2.11", "loadBalancerLoadPlacementStrategy", "RoundRobinBrokerSelector"),
    ("2.10", "loadBalancerLoadPlacementStrategy", "RoundRobinBrokerSelector"),
    ("2.10", "loadBalancerLoadPlacementStrategy", "LeastResourceUsageWithWeight"),
    ("3.0", "loadBalancerLoadSheddingStrategy", "AvgShedder"),
])
def test_decide_refuses_a_strategy_absent_from_the_line(line: str, key: str, strategy: str) -> None:
    """``ModularLoadManagerImpl.initialize`` creates the strategies by class name (``Reflections.createInstance``):
    a class the line's pulsar-broker jar lacks (VersionProfile.absent_strategies: RoundRobinBrokerSelector before
    3.0, LeastResourceUsageWithWeight before 2.11; AvgShedder before 3.3) cannot run there. decide refuses with
    exit 3 and one line naming the config key and the line; the same strategy on a line that has it decides."""
    req = decide_cluster()
    req["config"] = {"pulsarVersion": line, key: "org.apache.pulsar.broker.loadbalance.impl." + strategy}
    refused(_decide(req), 3, rf"\$\.config\.{key}: {strategy} does not exist in Pulsar {re.escape(line)} ")
    req["config"]["pulsarVersion"] = "3.3"
    assert _decide(req).code == 0


def test_decide_bundle_listed_by_two_brokers_is_accepted() -> None:
    req = decide_cluster()
    _broker_local(req, "b2:8080")["lastStats"][bundle_name(0)] = stats(40e6)
    assert _decide(req).code == 0


# ------------------------------------------------------------------------------------------------- config files
def _yaml(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(p)


@pytest.mark.parametrize(("name", "text", "pattern"), [
    ("unknown key.yaml", "pulsar:\n  loadBalancerNoSuchKey: 3\n", r"pulsar\.loadBalancerNoSuchKey: unknown config key"),
    ("wrong-type.yaml", "pulsar:\n  loadBalancerBrokerThresholdShedderPercentage: ten\n",
     r"pulsar\.loadBalancerBrokerThresholdShedderPercentage: expected a number, got 'ten'"),
    ("no-class.yaml", "pulsar:\n  loadBalancerLoadSheddingStrategy: org.example.Missing\n",
     r"pulsar\.loadBalancerLoadSheddingStrategy: unsupported strategy 'org\.example\.Missing'"),
    ("broken.yaml", "pulsar:\n  a: [1, 2\n", r"broken\.yaml: line \d+ column \d+: not valid YAML"),
    ("latin1.yaml", b"name: caf\xe9\npulsar: {}\n", r"latin1\.yaml: not UTF-8 text"),
    ("list.yaml", "pulsar:\n  - a\n", r"list\.yaml: pulsar: expected a mapping"),
    ("replay-opt.yaml", "replay:\n  speed: 3\n", r"replay\.speed: unknown replay option"),
])
def test_replay_config_file_errors(tmp_path: Path, name: str, text: str, pattern: str) -> None:
    res = cli(None, "replay", "--cluster", "c", "--config", _yaml(tmp_path, name, text), "--lake", str(tmp_path / "l"))
    refused(res, 2, pattern)
    assert not (tmp_path / "l").exists()  # refused before Spark: nothing written


@pytest.mark.parametrize(("sets", "pattern"), [
    (["loadBalancerSheddingEnabled"], r"--set 'loadBalancerSheddingEnabled': expected key=value"),
    (["noSuchKey=1"], r"pulsar\.noSuchKey: unknown config key"),
    (["loadBalancerSheddingEnabled=perhaps"], r"pulsar\.loadBalancerSheddingEnabled: expected a boolean"),
    (["replay.seed=abc"], r"--set replay\.seed: expected an integer"),
    (["replay.bogus=1"], r"--set replay\.bogus: unknown replay option"),
])
def test_set_errors(tmp_path: Path, sets: list[str], pattern: str) -> None:
    args = [a for s in sets for a in ("--set", s)]
    refused(cli(None, "replay", "--cluster", "c", *args, "--lake", str(tmp_path / "l")), 2, pattern)


def test_broker_conf_duplicates_comments_and_types(tmp_path: Path) -> None:
    """Documented repair (java.util.Properties): comments (# and !) skipped, the last of duplicate keys wins,
    keys lbreplay does not model ignored, values typed like the defaults (runs.config stores 85, not "85")."""
    from lbreplay.replay.run_config import resolve_run_config

    conf = tmp_path / "my broker.conf"
    conf.write_text("# comment\n! another\nclusterName=prod\nloadBalancerBrokerOverloadedThresholdPercentage=80\n"
                    "loadBalancerBrokerOverloadedThresholdPercentage = 85\nloadBalancerSheddingEnabled:false\n"
                    "loadBalancerHistoryResourcePercentage=0.5\n", encoding="utf-8")
    pulsar, _ = resolve_run_config(None, str(conf), [])
    assert pulsar == {"loadBalancerBrokerOverloadedThresholdPercentage": 85, "loadBalancerSheddingEnabled": False,
                      "loadBalancerHistoryResourcePercentage": 0.5}
    bad = tmp_path / "bad.conf"
    bad.write_text("loadBalancerBrokerOverloadedThresholdPercentage=lots\n", encoding="utf-8")
    refused(cli(None, "replay", "--cluster", "c", "--broker-conf", str(bad), "--lake", str(tmp_path / "l")), 2,
            r"--broker-conf .*bad\.conf\.loadBalancerBrokerOverloadedThresholdPercentage: expected a number")


@pytest.mark.parametrize(("grid", "pattern"), [
    ("grid: {}\n", r"a sweep needs a non-empty grid"),
    ("grid:\n  loadBalancerBrokerThresholdShedderPercentage: []\n", r"grid\.loadBalancerBrokerThresholdShedderPercentage: expected a non-empty list"),
    ("grid:\n  loadBalancerBrokerThresholdShedderPercentage: [%s]\n  loadBalancerHistoryResourcePercentage: [%s]\n"
     % (", ".join(str(i) for i in range(1, 101)), ", ".join(f"0.{i:02d}" for i in range(100))),
     r"grid: 10000 points .* exceed the limit of 1000 runs per sweep"),
])
def test_sweep_grid_of_0_and_10000_points(tmp_path: Path, grid: str, pattern: str) -> None:
    res = cli(None, "sweep", "--cluster", "c", "--grid", _yaml(tmp_path, "grid.yaml", grid), "--run-id-prefix", "p",
              "--lake", str(tmp_path / "l"))
    refused(res, 2, pattern)


# ------------------------------------------------------------------------------------------------- dumps (Spark)
def _copy(tmp_path: Path, name: str, src: Path = MODULAR) -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")


def _report(root: Path, broker: str, stamp: str) -> Path:
    return root / BROKERS / broker / f"{stamp}.json"


def _ingest(spark: Any, lake: str, src: Path, cluster: str) -> Outcome:
    return cli(spark, "ingest", "--source", str(src), "--cluster", cluster, "--lake", lake)


def _validate(spark: Any, lake: str, cluster: str) -> Outcome:
    return cli(spark, "validate", "--cluster", cluster, "--lake", lake)


def test_ingest_truncated_dump(spark: Any, lake: str, tmp_path: Path) -> None:
    src = _copy(tmp_path, "dumps with spaces")
    f = _report(src, "broker-2_8080", "20230802T120117Z")
    f.write_text(f.read_text()[:300])
    refused(_ingest(spark, lake, src, "h-trunc"), 3, re.escape(str(f)) + r": \$: invalid JSON at line")


def test_ingest_non_utf8_dump(spark: Any, lake: str, tmp_path: Path) -> None:
    src = _copy(tmp_path, "latin1")
    f = _report(src, "broker-1_8080", "20230802T120105Z")
    f.write_bytes(f.read_bytes().replace(b'"brokerVersionString": "', b'"brokerVersionString": "caf\xe9 '))
    refused(_ingest(spark, lake, src, "h-latin1"), 3, re.escape(str(f)) + r": cannot read: .*can't decode byte 0xe9")


def test_ingest_collect_record_with_a_broken_leader_record(spark: Any, lake: str, tmp_path: Path) -> None:
    """collect's record (collect/metadata-versions.jsonl): a torn line (a collector killed mid-write) is skipped as
    collect's own reader skips it; a /loadbalance/leader record whose ctime is not epoch ms is refused, naming the
    file, the line and the field (it would time the leader's shedding)."""
    src = _copy(tmp_path, "record")
    record = src / "collect" / "metadata-versions.jsonl"
    record.parent.mkdir(parents=True)
    good = {"event": "version", "path": "/loadbalance/leader", "ctime": 1690977600000, "version": 0,
            "data": {"brokerId": "broker-1:8080"}}
    record.write_text(json.dumps(good) + "\n" + json.dumps({**good, "ctime": "yesterday"}) + "\n" + '{"event": "ver',
                      encoding="utf-8")
    refused(_ingest(spark, lake, src, "h-leader"), 3,
            re.escape(str(record)) + r": line 2: \$\.ctime: expected the znode's creation time in epoch ms, got 'yesterday'")


def test_ingest_mixed_modular_and_extensible_tree(spark: Any, lake: str, tmp_path: Path) -> None:
    src = tmp_path / "mixed"
    shutil.copytree(MODULAR, src / "modular")
    shutil.copytree(EXTENSIBLE, src / "extensible")
    refused(_ingest(spark, lake, src, "h-mixed"), 3,
            r"mixes the modular load manager's reports \(.*modular/.*\.json\) and the extensible one's "
            r"\(.*extensible/.*\.json\); .* ingest each tree as its own --cluster")


def test_ingest_no_broker_at_all(spark: Any, lake: str, tmp_path: Path) -> None:
    """0 brokers: an empty dump tree."""
    (tmp_path / "empty" / "loadbalance").mkdir(parents=True)
    refused(_ingest(spark, lake, tmp_path / "empty", "h-empty"), 3, r"empty: no \*\.json dump files found")


# ------------------------------------------------------------ ingested classes, validated together per outcome
# The classes below are ingested each as its own cluster and validated by one ``lbreplay validate`` of every
# cluster of their lake (one lake per expected outcome): the outcome is read per cluster from the command's output
# and from ``validation_runs`` (status, failed and warned rules per cluster and table), which also checks that a
# validation of several clusters attributes each rule to the cluster whose rows fail it.
Mutation = Callable[[Path], None]


@dataclass
class Validated:
    """One lake of mutated sample copies, each ingested as the cluster it is named after, and one validation."""

    lake: str
    ingests: dict[str, Outcome]
    validation: Outcome
    statuses: dict[str, dict[str, dict[str, Any]]]  # cluster -> table -> validation_runs row

    def rules(self, cluster: str, kind: str) -> dict[str, list[str]]:
        """``failed`` / ``warned`` rules per table of ``cluster`` (tables without any left out)."""
        assert self.ingests[cluster].code == 0, self.ingests[cluster].err[-3000:]
        return {t: list(r[f"{kind}_rules"]) for t, r in self.statuses[cluster].items() if r[f"{kind}_rules"]}

    def accepted(self, cluster: str) -> dict[str, list[str]]:
        """Assert ``cluster`` passed validation; its warned rules per table."""
        assert self.validation.code == 0, self.validation.err[-3000:]
        assert self.validation.out.startswith("validation passed: cluster "), self.validation.out
        assert cluster in self.validation.out.split()[3].split(","), self.validation.out
        assert {r["status"] for r in self.statuses[cluster].values()} == {"passed"}, self.statuses[cluster]
        assert self.rules(cluster, "failed") == {}
        return self.rules(cluster, "warned")

    def rows(self, spark: Any, table: str, cluster: str) -> Any:
        return spark.read.format("delta").load(f"{self.lake}/{table}").where(f"cluster = '{cluster}'")


def _validated(spark: Any, work: Path, cases: dict[str, Mutation]) -> Validated:
    lake = str(work / "lake")
    ingests = {}
    with on_lake(spark, lake):
        for cluster, mutate in cases.items():
            src = _copy(work, f"{cluster} dump")
            mutate(src)
            ingests[cluster] = _ingest(spark, lake, src, cluster)
        validation = cli(spark, "validate", "--lake", lake)
    statuses: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in cases}
    for r in spark.read.format("delta").load(f"{lake}/validation_runs").collect():
        statuses[r["cluster"]][r["table_name"]] = r.asDict()
    return Validated(lake, ingests, validation, statuses)


def _non_finite_negative_zero_limit(src: Path) -> None:
    """NaN / Infinity (JSON literals Jackson writes for doubles), a negative rate, a CPU limit of 0 and a 1e308
    memory usage (beyond Float.MAX_VALUE, Pulsar's percentUsage() float cast makes it Infinity)."""
    f = _report(src, "broker-1_8080", "20230802T120005Z")
    doc = json.loads(f.read_text())
    bundle = sorted(doc["lastStats"])[0]
    doc["lastStats"][bundle]["msgThroughputIn"] = float("nan")
    doc["lastStats"][bundle]["msgRateOut"] = -3.0
    doc["msgThroughputOut"] = float("inf")
    doc["cpu"]["limit"] = 0.0
    doc["memory"]["usage"] = 1e308
    f.write_text(json.dumps(doc))  # Python writes NaN / Infinity like Jackson does
    assert "NaN" in f.read_text() and "Infinity" in f.read_text()


def _duplicate_minute(src: Path) -> None:
    """The same report twice (same broker, same lastUpdate: one version dumped twice)."""
    b1 = src / BROKERS / "broker-1_8080"
    shutil.copy(b1 / "20230802T120105Z.json", b1 / "20230802T120142Z.json")


@pytest.fixture(scope="module")
def rejected(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Validated:
    return _validated(spark, tmp_path_factory.mktemp("rejected"),
                      {"h-nan": _non_finite_negative_zero_limit, "h-dup": _duplicate_minute})


def test_non_finite_negative_and_zero_limit_values_fail_validation_and_block_replay(
    spark: Any, rejected: Validated
) -> None:
    """Ingest keeps the rows as reported, validate exits 3 naming each rule and column with sample rows, and a
    replay of the cluster is refused (exit 3) without writing any decision."""
    val = rejected.validation
    refused(val, 3, r"validation failed: cluster h-dup,h-nan: \d rule\(s\) failed: .*broker_load\.finite")
    for line in ("table=bundle_load column=msg_throughput_in rule=finite failing=1",
                 "table=bundle_load column=msg_rate_out rule=non_negative failing=1",
                 "table=broker_load column=msg_throughput_out rule=finite failing=1",
                 "table=broker_load column=cpu_limit rule=limit_positive failing=1",
                 "table=broker_load column=memory_usage rule=float_range failing=1"):
        assert line in val.err
    bundle = rejected.rows(spark, "bundle_load", "h-nan").where("isnan(msg_throughput_in)").first()["bundle"]
    assert f'"bundle":"{bundle}"' in val.err  # a sample row
    assert rejected.rules("h-nan", "failed") == {"broker_load": ["finite", "float_range", "limit_positive"],
                                                "bundle_load": ["finite", "non_negative"]}
    lake = rejected.lake
    with on_lake(spark, lake):
        rep = cli(spark, "replay", "--cluster", "h-nan", "--lake", lake, "--run-id", "h-nan-run", "--quiet")
    refused(rep, 3, r"h-nan.*failed validation")
    for table in ("runs", "decisions"):
        if (Path(lake) / table / "_delta_log").is_dir():
            assert spark.read.format("delta").load(f"{lake}/{table}").where("run_id = 'h-nan-run'").count() == 0


def test_duplicate_minute_fails_unique_key(rejected: Validated) -> None:
    """unique_key names the key and the rows, for the cluster that has them only: the report's broker_load row and
    its lastStats' bundle_load rows, each twice."""
    refused(rejected.validation, 3, r"broker_load\.unique_key")
    assert "table=broker_load column=cluster,ts,broker rule=unique_key failing=2" in rejected.validation.err
    assert rejected.rules("h-dup", "failed") == {"broker_load": ["unique_key"], "bundle_load": ["unique_key"]}


def _huge_rates(src: Path) -> None:
    _edit(_report(src, "broker-3_8080", "20230802T120033Z"),
          lambda d: d["lastStats"][sorted(d["lastStats"])[0]].update(msgThroughputIn=1e308, msgRateIn=1e308))


def _two_versions_in_a_minute(src: Path) -> None:
    b1 = src / BROKERS / "broker-1_8080"
    shutil.copy(b1 / "20230802T120105Z.json", b1 / "20230802T120142Z.json")
    _edit(b1 / "20230802T120142Z.json", lambda d: d.update(lastUpdate=d["lastUpdate"] + 37_000))


def _clock_an_hour_back(src: Path) -> None:
    _edit(_report(src, "broker-2_8080", "20230802T120217Z"), lambda d: d.update(lastUpdate=d["lastUpdate"] - 3_600_000))


def _returning_under_a_new_port(src: Path) -> None:
    """broker-3 vanishes after 12:00 and returns at 12:02 as broker-3:8081 (at 12:01 nobody reports its bundles: a
    gap, warned, legal while they wait for a new owner)."""
    b3 = src / BROKERS / "broker-3_8080"
    (b3 / "20230802T120133Z.json").unlink()
    new = src / BROKERS / "broker-3_8081"
    new.mkdir()
    shutil.move(str(b3 / "20230802T120233Z.json"), new / "20230802T120233Z.json")
    _edit(new / "20230802T120233Z.json", lambda d: d.update(webServiceUrl="http://broker-3:8081"))


def _moving_bundle(src: Path) -> tuple[str, dict[str, Any]]:
    """The bundle that moves (broker-1's first at 12:01) and its stats."""
    stats = json.loads(_report(src, "broker-1_8080", "20230802T120105Z").read_text())["lastStats"]
    name = sorted(stats)[0]
    return name, stats[name]


def _two_owners_and_a_child(src: Path) -> None:
    """The moving bundle listed by its old and its new owner in one tick, and a child of it next to its parent."""
    moving, stats = _moving_bundle(src)
    _edit(_report(src, "broker-2_8080", "20230802T120117Z"), lambda d: d["lastStats"].update({moving: stats}))
    ns, _, rng = moving.rpartition("/")
    lo = int(rng.split("_")[0], 16)
    half = f"{ns}/0x{lo:08x}_0x{lo + 0x08000000:08x}"
    _edit(_report(src, "broker-3_8080", "20230802T120133Z"), lambda d: d["lastStats"].update({half: stats}))


def _unicode_and_v1_namespaces(src: Path) -> None:
    def add(d: dict[str, Any]) -> None:
        st = d["lastStats"][sorted(d["lastStats"])[0]]
        d["lastStats"]["tënant-ü/ns-日本/0x00000000_0xffffffff"] = st
        d["lastStats"]["prop/cl/ns/0x00000000_0xffffffff"] = st
    for stamp in ("20230802T120005Z", "20230802T120105Z", "20230802T120205Z"):
        _edit(_report(src, "broker-1_8080", stamp), add)


@pytest.fixture(scope="module")
def accepted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Validated:
    return _validated(spark, tmp_path_factory.mktemp("accepted"), {
        "h-huge": _huge_rates, "h-two": _two_versions_in_a_minute, "h-clock": _clock_an_hour_back,
        "h-port": _returning_under_a_new_port, "h-owners": _two_owners_and_a_child, "h-uni": _unicode_and_v1_namespaces,
    })


def test_1e308_rates_are_finite_and_accepted(accepted: Validated) -> None:
    """Rates are doubles in Pulsar (NamespaceBundleStats): 1e308 is a legal, finite value."""
    assert accepted.accepted("h-huge") == {}


def test_two_versions_of_a_report_in_one_minute_are_accepted(spark: Any, accepted: Validated) -> None:
    """Accepted: each version at its own time. Two versions of one broker's report in one minute are what a healthy
    Pulsar writes (a 10 % change triggers a write before the minute is over): both are kept as two rows at their own
    lastUpdate (12:01:05.217 and 12:01:42.217), and validation passes with no warning (the minute's range check
    reads each broker's latest version, so the earlier version's bundles do not count as overlapping)."""
    assert accepted.accepted("h-two") == {}
    rows = accepted.rows(spark, "broker_load", "h-two").where("broker = 'broker-1:8080' AND minute(ts) = 1") \
        .orderBy("ts").collect()
    assert [(r["ts"].second, r["ts"].microsecond // 1000) for r in rows] == [(5, 217), (42, 217)]
    assert accepted.rows(spark, "broker_load", "h-two").count() == 10


def test_clock_going_backwards_is_accepted_at_the_snapshot_time(spark: Any, accepted: Validated) -> None:
    """Accepted as reported: a report's snapshot time is its lastUpdate (the broker's clock, as the leader reads it;
    the file name only when lastUpdate is missing), so a clock that jumps back an hour puts that report at the
    earlier minute, where it is the only broker reporting (the tick's other brokers count as not alive)."""
    accepted.accepted("h-clock")
    rows = accepted.rows(spark, "broker_load", "h-clock").where("broker = 'broker-2:8080'").orderBy("ts").collect()
    assert [(r["ts"].hour, r["ts"].minute) for r in rows] == [(11, 2), (12, 0), (12, 1)]
    alone = accepted.rows(spark, "broker_load", "h-clock").where("hour(ts) = 11").select("broker").collect()
    assert [r["broker"] for r in alone] == ["broker-2:8080"]


def test_broker_returning_under_a_new_port(spark: Any, accepted: Validated) -> None:
    """Two brokers for Pulsar (the id is host:port); accepted, each alive only where it reported."""
    assert accepted.accepted("h-port") == {"bundle_load": ["ranges_tile_namespace"]}  # the 12:01 gap
    seen = {(r["ts"].minute, r["broker"]) for r in accepted.rows(spark, "broker_load", "h-port").collect()}
    assert (0, "broker-3:8080") in seen and (2, "broker-3:8081") in seen and (2, "broker-3:8080") not in seen


def test_bundle_listed_by_two_brokers_and_overlapping_ranges_are_accepted(spark: Any, accepted: Validated) -> None:
    """While a bundle moves, its old and new owner both list it in one tick; around a split a parent and its
    children overlap: legal in Pulsar's data (DESIGN.md §4), accepted with the tiling warning."""
    assert accepted.accepted("h-owners") == {"bundle_load": ["ranges_tile_namespace"]}
    assert "warning: table=bundle_load column=range_lower,range_upper rule=ranges_tile_namespace" \
        in accepted.validation.err
    moving, _ = _moving_bundle(MODULAR)
    assert accepted.rows(spark, "bundle_load", "h-owners").where(f"bundle = '{moving}' AND minute(ts) = 1").count() == 2


def test_unicode_and_legacy_slash_namespaces(spark: Any, accepted: Validated) -> None:
    """Unicode tenant / namespace names and a v1 namespace (property/cluster/ns, i.e. a '/' inside the namespace)
    are accepted; the namespace column keeps everything before the range."""
    accepted.accepted("h-uni")
    got = {r["namespace"] for r in accepted.rows(spark, "bundle_load", "h-uni").collect()}
    assert {"tënant-ü/ns-日本", "prop/cl/ns"} <= got


def test_one_broker_only(spark: Any, lake: str, tmp_path: Path) -> None:
    src = _copy(tmp_path, "onebroker")
    for b in ("broker-2_8080", "broker-3_8080"):
        shutil.rmtree(src / BROKERS / b)
    shutil.rmtree(src / "loadbalance" / "broker-time-average")
    res = _ingest(spark, lake, src, "h-one")
    assert res.code == 0, res.err
    assert "broker_load=3" in res.out


def test_replay_of_a_cluster_with_no_rows(spark: Any, lake: str, tmp_path: Path) -> None:
    """Empty tables: nothing was ingested for the cluster. A usage error before Spark reads a table
    (``lake.presence``: an unknown cluster exits 2 naming the known ones)."""
    refused(cli(spark, "replay", "--cluster", "h-nothing", "--lake", lake, "--quiet"), 2,
            r"unknown cluster 'h-nothing' in .*; known clusters: ")


# ------------------------------------------------------------------------- a replayable cluster, damaged lakes
@pytest.fixture(scope="module")
def good_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A lake holding the validated modular sample as cluster ``s`` (its own lake: the cases below damage copies)."""
    lake = str(tmp_path_factory.mktemp("damaged") / "good lake")
    with on_lake(spark, lake):
        assert _ingest(spark, lake, MODULAR, "s").code == 0
        assert _validate(spark, lake, "s").code == 0
    return lake


def test_window_with_no_ticks(spark: Any, good_lake: str) -> None:
    with on_lake(spark, good_lake):
        res = cli(spark, "replay", "--cluster", "s", "--from", "2030-01-01", "--to", "2030-01-02", "--lake", good_lake,
                  "--run-id", "h-window", "--quiet")
    refused(res, 2, r"--from.*--to|no tick")


def test_broker_conf_replay_records_typed_numbers(spark: Any, good_lake: str, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("loadBalancerBrokerThresholdShedderPercentage=5\nloadBalancerBrokerThresholdShedderPercentage=7\n"
                    "# loadBalancerSheddingEnabled=false\n", encoding="utf-8")
    lake = good_lake
    with on_lake(spark, lake):
        res = cli(spark, "replay", "--cluster", "s", "--broker-conf", str(conf), "--run-id", "h-conf", "--lake", lake,
                  "--quiet")
    assert res.code == 0, res.err[-3000:]
    row = spark.read.format("delta").load(f"{lake}/runs").where("run_id = 'h-conf'").first()
    # the line the run used is recorded: the sample's brokers report 3.1.0, a line lbreplay does not model, so the
    # replay runs on 3.0 (the newest modelled line before it) and says so
    assert json.loads(row["config"]) == {"loadBalancerBrokerThresholdShedderPercentage": 7, "pulsarVersion": "3.0"}
    assert json.loads(row["replay_options"])["pulsarLine"]["source"] == "recording"
    assert "replaying as Pulsar 3.0" in res.err
    assert row["status"] == "succeeded"


def _damaged(spark: Any, good: str, tmp_path: Path, damage: Callable[[Path], None]) -> tuple[Outcome, Outcome]:
    lake = tmp_path / "damaged lake"
    # without the tick-stream cache, so the replay reads the damaged tables (from the cache it would replay the
    # validated Delta versions as they were before the damage, unchanged)
    shutil.copytree(good, lake, ignore=shutil.ignore_patterns("_replay_cache"))
    damage(lake)
    with on_lake(spark, str(lake)):
        val = _validate(spark, str(lake), "s")
        rep = cli(spark, "replay", "--cluster", "s", "--run-id", "d", "--lake", str(lake), "--quiet")
    if (lake / "decisions" / "_delta_log").is_dir():
        assert spark.read.format("delta").load(str(lake / "decisions")).where("run_id = 'd'").count() == 0
    return val, rep


def _data_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts)


def test_deleted_parquet_file(spark: Any, good_lake: str, tmp_path: Path) -> None:
    val, rep = _damaged(spark, good_lake, tmp_path, lambda lake: _data_files(lake / "bundle_load")[0].unlink())
    refused(val, 3, r"table bundle_load: a data file is missing or corrupt: bundle_load/.*part-.*; restore the file")
    refused(rep, 3, r"table bundle_load: a data file is missing or corrupt")


def test_corrupted_parquet_file(spark: Any, good_lake: str, tmp_path: Path) -> None:
    def damage(lake: Path) -> None:
        f = _data_files(lake / "broker_load")[0]
        f.write_bytes(b"PAR1" + b"\x00garbage" * 50)
    val, rep = _damaged(spark, good_lake, tmp_path, damage)
    refused(val, 3, r"table broker_load: a data file is missing or corrupt: broker_load/.*part-")
    refused(rep, 3, r"table broker_load: a data file is missing or corrupt")


def test_corrupt_delta_log_entry(spark: Any, good_lake: str, tmp_path: Path) -> None:
    def damage(lake: Path) -> None:
        last = sorted((lake / "broker_load" / "_delta_log").glob("*.json"))[-1]
        last.write_text(last.read_text()[: len(last.read_text()) // 2])
    val, rep = _damaged(spark, good_lake, tmp_path, damage)
    refused(val, 3, r"table broker_load: its Delta log entry is missing or corrupt: broker_load/_delta_log/")
    refused(rep, 3, r"broker_load")


@pytest.mark.parametrize("drift", ["extra", "missing", "retyped"])
def test_schema_drift(spark: Any, good_lake: str, tmp_path: Path, drift: str) -> None:
    """A Delta table whose schema drifted from DESIGN.md §4 (a column added, dropped or retyped by hand)."""
    def damage(lake: Path) -> None:
        path = str(lake / "broker_load")
        df = spark.read.format("delta").load(path)
        if drift == "extra":
            from pyspark.sql import functions as F

            df = df.withColumn("surprise", F.lit(1))
        elif drift == "missing":
            df = df.drop("cpu_usage")
        else:
            df = df.withColumn("num_topics", df["num_topics"].cast("string"))
        df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    val, rep = _damaged(spark, good_lake, tmp_path, damage)
    if drift == "extra":  # documented repair: extra columns are ignored (readers select the contract's columns)
        assert val.code == 0, val.err[-2000:]
        assert rep.code == 0, rep.err[-2000:]
        return
    problem = {"missing": "column cpu_usage is missing", "retyped": "column num_topics is string, expected bigint"}
    refused(val, 3, rf"table broker_load: schema drifted from the contract: {problem[drift]}")
    # the replay refuses the table: its drifted version never passed validation (validation_problems checks the
    # schema of every table changed since its validation before fingerprinting it)
    refused(rep, 3, rf"table broker_load: schema drifted from the contract: {problem[drift]}")
