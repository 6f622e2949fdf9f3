"""``lbreplay validate``: Great Expectations suites on ingested samples, corrupted copies and generator-style
tables; quarantine; validation status for replays."""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import datetime
from pathlib import Path

import pytest

from lbreplay.errors import InvalidInputError
from lbreplay.lake import delta_log, dump_rows, expectations, storage, tables
from lbreplay.lake import ingest as ing
from lbreplay.lake import validation as val

REPO = Path(__file__).resolve().parents[2]
MODULAR = REPO / "data" / "samples" / "modular-3brokers"
EXTENSIBLE = REPO / "data" / "samples" / "extensible-3brokers"
LINE = re.compile(r"^table=(\S+) column=(\S+) rule=(\S+) failing=(\d+)$")


def _rows(spark, lake: str, table: str, cluster: str):
    from pyspark.sql import functions as F

    return spark.read.format("delta").load(f"{lake}/{table}").where(F.col("cluster") == cluster)


def _statuses(report: val.ValidationReport) -> dict[str, tuple[str, int]]:
    return {s.table: (s.status, s.row_count) for s in report.statuses}


# ----------------------------------------------------------------------------------------------------------------
# pure


def test_rule_catalogue() -> None:
    """Every validated table has a suite with key rules; the bundle-name regex accepts Pulsar's
    ``String.format("0x%08x_0x%08x")`` names (NamespaceBundle) and rejects upper-case or short hex."""
    assert set(expectations.SUITES) == {t.name for t in expectations.VALIDATED_TABLES}
    for table in expectations.VALIDATED_TABLES:
        rules = expectations.SUITES[table.name]
        assert any(r.kind == "unique" and r.columns == table.key for r in rules), table.name
        assert {r.columns[0] for r in rules if r.name == "key_not_null"} >= set(table.key)
    ok = re.compile(expectations.BUNDLE_NAME_REGEX)
    assert ok.match("my-tenant/my-namespace/0x4ccccccb_0x66666664")
    assert ok.match("prop/cluster/ns/0x00000000_0xffffffff")  # v1 namespace
    assert not ok.match("my-tenant/my-namespace/0x4CCCCCCB_0x66666664")
    assert not ok.match("my-tenant/my-namespace/0x4cccccc_0x66666664")
    assert not ok.match("my-namespace/0x00000000_0xffffffff")
    bl = {(r.name, r.columns[0], r.severity) for r in expectations.SUITES["broker_load"] if r.name == "limit_positive"}
    assert ("limit_positive", "cpu_limit", "error") in bl and ("limit_positive", "bandwidth_in_limit", "warning") in bl


# ----------------------------------------------------------------------------------------------------------------
# Spark + Great Expectations


def test_modular_sample_passes_and_status_tracks_changes(spark, lake) -> None:
    """Issue 'done when': ingest of data/samples/modular-3brokers then validate passes; the status is recorded per
    (cluster, table, Delta version); a later change to the data makes the input unvalidated again."""
    ing.ingest(spark, lake, MODULAR, "val_mod")
    assert not val.is_validated(spark, lake, "val_mod")
    report = val.validate(spark, lake, "val_mod")
    assert report.passed, report.details()
    assert report.failures == [] and report.warnings == []
    assert _statuses(report) == {
        "broker_load": ("passed", 9),
        "bundle_load": ("passed", 25),
        "bundle_data": ("passed", 9),
        "broker_time_average": ("passed", 3),
    }
    assert _rows(spark, lake, "quarantine", "val_mod").count() == 0
    runs = _rows(spark, lake, "validation_runs", "val_mod").where("table_name = 'bundle_load'").collect()
    assert len(runs) == 1 and runs[0]["status"] == "passed" and runs[0]["row_count"] == 25
    assert runs[0]["delta_version"] == delta_log.delta_version(spark, lake, tables.BUNDLE_LOAD)
    assert val.is_validated(spark, lake, "val_mod", tables=["broker_load", "bundle_load"])
    assert not val.is_validated(spark, lake, "val_mod", tables=["top_bundles_load_data"])  # required but empty

    spark.sql(f"DELETE FROM delta.`{lake}/broker_load` WHERE cluster = 'val_mod' AND broker = 'broker-3:8080'")
    problems = val.validation_problems(spark, lake, "val_mod")
    validated = runs_version(spark, lake, "val_mod")
    assert problems == [f"broker_load: changed since validation (validated Delta version {validated})"]
    with pytest.raises(InvalidInputError, match="run: lbreplay validate --cluster val_mod") as err:
        val.require_validated(spark, lake, "val_mod")
    assert err.value.exit_code == 3


def test_commits_of_other_clusters_leave_a_validation_standing(spark, lake) -> None:
    """A commit that only touches another cluster's partitions keeps a cluster validated without a fingerprint
    scan (read from the Delta log's add/remove actions); a commit touching the cluster does not."""
    ing.ingest(spark, lake, MODULAR, "val_ua")
    assert val.validate(spark, lake, "val_ua").passed
    v0 = delta_log.delta_version(spark, lake, tables.BROKER_LOAD)
    ing.ingest(spark, lake, MODULAR, "val_ub")
    v1 = delta_log.delta_version(spark, lake, tables.BROKER_LOAD)
    assert v1 > v0
    assert delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_ua", v0, v1)
    assert not delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_ub", v0, v1)
    assert val.validation_problems(spark, lake, "val_ua") == []
    # since the table's creation (-1): a cluster that never had a file in it has no rows, read from the log; one
    # ingested but never validated is refused, table by table
    assert delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_never", -1, v1)
    assert not delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_ub", -1, v1)
    assert val.validation_problems(spark, lake, "val_never") == ["no input rows"]
    assert "broker_load: not validated" in val.validation_problems(spark, lake, "val_ub")
    spark.sql(f"DELETE FROM delta.`{lake}/broker_load` WHERE cluster = 'val_ua' AND broker = 'broker-3:8080'")
    v2 = delta_log.delta_version(spark, lake, tables.BROKER_LOAD)
    assert not delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_ua", v0, v2)
    assert delta_log.cluster_untouched(spark, lake, tables.BROKER_LOAD, "val_ub", v1, v2)
    assert val.validation_problems(spark, lake, "val_ua") == [
        f"broker_load: changed since validation (validated Delta version {runs_version(spark, lake, 'val_ua')})"]


def runs_version(spark, lake: str, cluster: str) -> int:
    return _rows(spark, lake, "validation_runs", cluster).where("table_name = 'broker_load'").first()["delta_version"]


def _corrupt_copy(dst: Path) -> None:
    """The modular sample with three corruptions: a negative bundle msgRateIn (broker-2, 12:00), an overlapping range
    (broker-3 reports my-tenant/my-namespace/0xb0000000_0xffffffff at 12:01, overlapping broker-1's
    0x80000000_0xc0000000) and a duplicate broker row (broker-1's 12:02 report dumped twice)."""
    shutil.copytree(MODULAR, dst)
    brokers = dst / "loadbalance" / "brokers"
    f = brokers / "broker-2_8080" / "20230802T120017Z.json"
    doc = json.loads(f.read_text())
    doc["lastStats"]["my-tenant/my-namespace/0x40000000_0x80000000"]["msgRateIn"] = -5.0
    f.write_text(json.dumps(doc))
    f = brokers / "broker-3_8080" / "20230802T120133Z.json"
    doc = json.loads(f.read_text())
    doc["lastStats"]["my-tenant/my-namespace/0xb0000000_0xffffffff"] = doc["lastStats"].pop(
        "my-tenant/my-namespace/0xc0000000_0xffffffff"
    )
    f.write_text(json.dumps(doc))
    b1 = brokers / "broker-1_8080"
    shutil.copy(b1 / "20230802T120205Z.json", b1 / "20230802T120205Z-again.json")


def _cli(monkeypatch, spark, *args: str) -> int:
    """Run ``lbreplay`` in-process (the test session is reused) and return its exit code."""
    from lbreplay import cli

    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    monkeypatch.setattr(sys, "argv", ["lbreplay", *args])
    try:
        cli.main()
        return 0
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)


@pytest.fixture(scope="module")
def corrupt_ingested(spark, lake, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The corrupted copy ingested once as cluster ``val_bad`` (exit 0: ingest keeps the rows as reported); both
    forms of the test below validate the same ingested rows."""
    src = tmp_path_factory.mktemp("corrupt") / "corrupt"
    _corrupt_copy(src)
    with pytest.MonkeyPatch.context() as mp:
        code = _cli(mp, spark, "ingest", "--source", str(src), "--cluster", "val_bad", "--lake", lake,
                    "--master", "local[2]")
    assert code == 0
    return "val_bad"


@pytest.mark.parametrize("large_from", [None, 0], ids=["per-row-forms", "cheap-summary-paths"])
def test_corrupted_copy_exits_3_naming_each_rule(spark, lake, monkeypatch, capsys, corrupt_ingested: str,
                                                 large_from: int | None) -> None:
    """Issue 'done when': a corrupted copy exits 3 naming each rule, with the failing rows in quarantine; the same
    counts, samples and quarantine whether the tables take the per-row forms or (``storage.LARGE_SCAN_BYTES`` = 0)
    the cheap-summary paths of large tables (distinct values, the tiling pre-check, the sorted duplicate probe).

    Expected counts, derived by hand from the corruption:
    - bundle_load non_negative on msg_rate_in: the one negative row;
    - broker_load unique_key: broker-1 twice at 12:02 -> 2 rows (GE counts every row of a duplicated key);
    - bundle_load unique_key (cluster, ts, broker, bundle): broker-1's 4 bundles twice at 12:02 -> 8 rows;
    - bundle_load ranges_tile_namespace, a warning (DESIGN.md §4: real dumps overlap and gap): 12:01 my-tenant/my-namespace 0xb0000000 < 0xc0000000 (1 row) + at 12:02 the
      second copy of 0x00000000_0x40000000 and 0x80000000_0xc0000000 (my-namespace) and of 0x00000000_0x20000000
      and 0x20000000_0x40000000 (public/default) start inside the first copy (4 rows) = 5.
    """
    if large_from is not None:
        monkeypatch.setattr(storage, "LARGE_SCAN_BYTES", large_from)
    lake_args = ("--lake", lake, "--master", "local[2]")
    capsys.readouterr()
    assert _cli(monkeypatch, spark, "validate", "--cluster", "val_bad", *lake_args) == 3
    err = capsys.readouterr().err
    lines = {m.groups() for m in map(LINE.match, err.splitlines()) if m}
    assert lines == {
        ("bundle_load", "msg_rate_in", "non_negative", "1"),
        ("broker_load", "cluster,ts,broker", "unique_key", "2"),
        ("bundle_load", "cluster,ts,broker,bundle", "unique_key", "8"),
    }
    assert "warning: table=bundle_load column=range_lower,range_upper rule=ranges_tile_namespace failing=5" in err
    assert '"msg_rate_in":-5.0' in err and "overlap: starts at 0xb0000000 inside a range ending at 0xc0000000" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("lbreplay: validation failed: cluster val_bad: 3 rule(s) failed")
    for rule in ("broker_load.unique_key", "bundle_load.non_negative", "bundle_load.unique_key"):
        assert rule in last
    assert "ranges_tile_namespace" not in last

    q = _rows(spark, lake, "quarantine", "val_bad")
    grouped = q.groupBy("table_name", "rule", "column_name").count().collect()
    counts = {(r["table_name"], r["rule"], r["column_name"]): r["count"] for r in grouped}
    assert counts == {(t, r, c): int(n) for t, c, r, n in lines}
    neg = q.where("rule = 'non_negative'").first()
    row = json.loads(neg["row_json"])
    assert (row["broker"], row["msg_rate_in"]) == ("broker-2:8080", -5.0)
    assert row["bundle"] == "my-tenant/my-namespace/0x40000000_0x80000000"
    statuses = {r["table_name"]: r["status"] for r in _rows(spark, lake, "validation_runs", "val_bad").collect()}
    assert statuses == {
        "broker_load": "failed",
        "bundle_load": "failed",
        "bundle_data": "passed",
        "broker_time_average": "passed",
    }
    with pytest.raises(InvalidInputError, match="bundle_load: failed validation"):
        val.require_validated(spark, lake, "val_bad")
    # validating again in the same session reuses its Great Expectations context (new asset and suite names per
    # run) and finds the same failures
    gx = val._GX.of(spark)
    runs_before = gx.runs
    assert _cli(monkeypatch, spark, "validate", "--cluster", "val_bad", *lake_args) == 3
    again = {m.groups() for m in map(LINE.match, capsys.readouterr().err.splitlines()) if m}
    assert again == lines
    assert val._GX.of(spark) is gx and gx.runs == runs_before + 2  # broker_load's and bundle_load's suites


def test_generator_style_tables(spark, lake) -> None:
    """Tables written in the generator's shape (tables.py schemas, incl. topic_load and namespace_policy): each
    planted defect fails exactly its rule; a bandwidth limit of 0 is only a warning (Pulsar counts it as 0 %)."""
    from lbreplay.lake.tables import BROKER_LOAD, BUNDLE_LOAD, NAMESPACE_POLICY, TOPIC_LOAD, replace_partitions

    ts = datetime(2024, 1, 1, 0, 0)
    res = {f"{r}_usage": 10.0 for r in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")}
    res.update({k.replace("usage", "limit"): 100.0 for k in res})
    brokers = [
        {"cluster": "gen_bad", "ts": ts, "broker": "b1:8080", **res, "bandwidth_in_limit": 0.0, "msg_rate_in": 5.0},
        {"cluster": "gen_bad", "ts": ts, "broker": "b2:8080", **res, "msg_rate_in": 7.0},
    ]

    def bundle(name: str, broker: str, thr: float) -> dict:
        ns, lo, hi = dump_rows.split_bundle(name)
        return {"cluster": "gen_bad", "ts": ts, "broker": broker, "bundle": name, "namespace": ns, "range_lower": lo,
                "range_upper": hi, "msg_rate_in": 1.0, "msg_throughput_in": thr, "topics": 1}

    bundles = [
        bundle("t/n/0x00000000_0x80000000", "b1:8080", float("nan")),  # finite
        bundle("t/n/0x80000000_0xc0000000", "b3:8080", 10.0),  # dead broker; and no bundle up to 0xffffffff
        bundle("t/m/0x00000000_0xffffffff", "b2:8080", 10.0),
    ]
    topics = [
        {"cluster": "gen_bad", "ts": ts, "topic": "persistent://t/n/a", "namespace": "t/n", "msg_rate_in": 1.0},
        {"cluster": "gen_bad", "ts": ts, "topic": "t/n/b", "namespace": "t/n", "msg_rate_in": 1.0},
    ]
    policies = [
        {"cluster": "gen_bad", "namespace": "t/n", "num_bundles": 2,
         "initial_boundaries": ["0x00000000", "0x80000000", "0xffffffff"]},
        {"cluster": "gen_bad", "namespace": "t/m", "num_bundles": 3,
         "initial_boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"]},
    ]
    for table, rows in ((BROKER_LOAD, brokers), (BUNDLE_LOAD, bundles), (TOPIC_LOAD, topics), (NAMESPACE_POLICY, policies)):
        replace_partitions(spark, lake, table, ing.rows_frame(spark, table, rows), "cluster = 'gen_bad'")

    report = val.validate(spark, lake, "gen_bad")
    assert not report.passed
    got = {(r.table, r.rule, r.column, r.failing) for r in report.failures}
    assert got == {
        ("bundle_load", "finite", "msg_throughput_in", 1),
        ("bundle_load", "reporting_broker_alive", "broker", 1),
        ("topic_load", "topic_name_format", "topic", 1),
        ("namespace_policy", "boundaries_well_formed", "initial_boundaries", 1),
    }
    warnings = {(r.table, r.rule, r.column, r.failing) for r in report.warnings}
    assert warnings == {("broker_load", "limit_positive", "bandwidth_in_limit", 1),
                        ("bundle_load", "ranges_tile_namespace", "range_lower,range_upper", 1)}
    tiling = next(r for r in report.warnings if r.rule == "ranges_tile_namespace")
    assert tiling.samples[0].endswith("<- gap: the last range ends at 0xc0000000, not 0xffffffff")
    boundaries = next(r for r in report.failures if r.rule == "boundaries_well_formed")
    assert boundaries.samples[0].endswith("<- boundaries are not strictly increasing")
    status = {s.table: (s.status, s.warned_rules, s.failing_rows) for s in report.statuses}
    assert status == {
        "broker_load": ("passed", ["limit_positive"], 0),
        "bundle_load": ("failed", ["ranges_tile_namespace"], 2),  # 2 failing checks on 2 distinct rows
        "topic_load": ("failed", [], 1),
        "namespace_policy": ("failed", [], 1),
    }


def test_a_top_bundles_reporter_without_load_data_nearby_is_flagged(spark, lake, tmp_path: Path) -> None:
    """A broker publishes its TopBundlesLoadData on its own; its BrokerLoadData only on a 10 % change or every
    ``loadBalancerReportUpdateMaxIntervalMinutes`` (15 by default). A list 20 minutes after the broker's last
    BrokerLoadData is a healthy recording; a list from a broker with no BrokerLoadData within the hour is flagged,
    with its rows."""
    import shutil

    dump = tmp_path / "dump"
    shutil.copytree(EXTENSIBLE, dump)
    top = dump / "top-bundles-load-data"
    shutil.copy(top / "broker-1_8080" / "20230802T120200Z.json", top / "broker-1_8080" / "20230802T122200Z.json")
    (top / "ghost_8080").mkdir()
    shutil.copy(top / "broker-1_8080" / "20230802T120200Z.json", top / "ghost_8080" / "20230802T120200Z.json")
    listed = len(json.loads((top / "ghost_8080" / "20230802T120200Z.json").read_text())["topBundlesLoadData"])
    ing.ingest(spark, lake, dump, "val_ext_ghost")
    report = val.validate(spark, lake, "val_ext_ghost")
    assert [(r.table, r.rule, r.column) for r in report.failures] == [
        ("top_bundles_load_data", "reporting_broker_alive", "broker")]
    assert report.failures[0].failing == listed
    assert report.failures[0].samples and all('"broker":"ghost:8080"' in r for r in report.failures[0].samples)


def test_extensible_sample_passes(spark, lake) -> None:
    """The extensible sample (BrokerLoadData + TopBundlesLoadData) validates: every top-bundle reporter has a
    BrokerLoadData row in the same minute (TopBundlesLoadData at its file's 12:0m:00, BrokerLoadData at its own
    updatedAt a few seconds later: two reports, each at its own time)."""
    ing.ingest(spark, lake, EXTENSIBLE, "val_ext")
    report = val.validate(spark, lake, "val_ext")
    assert report.passed, report.details()
    assert _statuses(report) == {"broker_load_data_ext": ("passed", 9), "top_bundles_load_data": ("passed", 25),
                                 "top_bundles_publication": ("passed", 9)}  # 9 lists, no tombstone
    assert val.is_validated(spark, lake, "val_ext", tables=["broker_load_data_ext"])
    assert not val.is_validated(spark, lake, "val_ext", tables=["broker_load"])
