"""``lbreplay ingest``: parsing real Pulsar dump shapes (pure Python) and loading the checked-in samples (Spark)."""

from __future__ import annotations

import json
import math
import shutil
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.lake import dump_rows, dump_tree
from lbreplay.lake import ingest as ing
from tests.dump_days import shift_dumps

REPO = Path(__file__).resolve().parents[2]
MODULAR = REPO / "data" / "samples" / "modular-3brokers"
EXTENSIBLE = REPO / "data" / "samples" / "extensible-3brokers"

# The LocalBrokerData sample of the Pulsar 3.1 docs, verbatim (PULSAR-LB-SPEC.md §1.2).
DOC_SAMPLE = {
    "webServiceUrl": "http://broker-1:8080",
    "pulsarServiceUrl": "pulsar://broker-1:6650",
    "persistentTopicsEnabled": True,
    "nonPersistentTopicsEnabled": True,
    "cpu": {"usage": 7.31, "limit": 800.0},
    "memory": {"usage": 124.0, "limit": 2096.0},
    "directMemory": {"usage": 36.0, "limit": 256.0},
    "bandwidthIn": {"usage": 0.83, "limit": 1.0e7},
    "bandwidthOut": {"usage": 0.71, "limit": 1.0e7},
    "msgThroughputIn": 0.0,
    "msgThroughputOut": 0.0,
    "msgRateIn": 0.0,
    "msgRateOut": 0.0,
    "lastUpdate": 1690979816792,
    "lastStats": {
        "my-tenant/my-namespace/0x4ccccccb_0x66666664": {
            "msgRateIn": 0.0,
            "msgThroughputIn": 0.0,
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
            "consumerCount": 2,
            "producerCount": 0,
            "topics": 1,
            "cacheSize": 0,
        }
    },
    "numTopics": 1,
    "numBundles": 1,
    "numConsumers": 2,
    "numProducers": 0,
    "bundles": ["my-tenant/my-namespace/0x4ccccccb_0x66666664"],
    "lastBundleGains": [],
    "lastBundleLosses": [],
    "brokerVersionString": "3.1.0-SNAPSHOT",
    "protocols": {},
    "advertisedListeners": {"internal": {"brokerServiceUrl": "pulsar://broker-1:6650"}},
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "startTimestamp": 1690940955211,
    "maxResourceUsage": 0.140625,
    "loadReportType": "LocalBrokerData",
}


def _write(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


EPOCH = _utc(1970, 1, 1)


# ----------------------------------------------------------------------------------------------------------------
# pure Python


def test_doc_sample_local_broker_data(tmp_path: Path) -> None:
    """PULSAR-LB-SPEC.md §1.2 sample: broker id from webServiceUrl, ts = lastUpdate 12:36:56.792 exactly (the
    report version's own time), the lastStats entry becomes a bundle_load row at the same ts with its range parsed
    from the name."""
    _write(tmp_path / "dump" / "report.json", DOC_SAMPLE)
    dump = ing.read_dumps(tmp_path / "dump", "c1")
    (row,) = dump.rows["broker_load"]
    assert row["broker"] == "broker-1:8080"
    assert row["ts"] == _utc(2023, 8, 2, 12, 36, 56, 792_000)
    assert row["last_update"] == row["ts"]
    assert (row["cpu_usage"], row["cpu_limit"]) == (7.31, 800.0)
    assert (row["bandwidth_out_usage"], row["bandwidth_out_limit"]) == (0.71, 1.0e7)
    assert (row["num_topics"], row["num_bundles"], row["num_consumers"], row["num_producers"]) == (1, 1, 2, 0)
    assert row["broker_version"] == "3.1.0-SNAPSHOT"
    assert row["load_manager_class_name"].endswith("ModularLoadManagerImpl")
    (b,) = dump.rows["bundle_load"]
    assert b["bundle"] == "my-tenant/my-namespace/0x4ccccccb_0x66666664"
    assert (b["namespace"], b["range_lower"], b["range_upper"]) == ("my-tenant/my-namespace", 0x4CCCCCCB, 0x66666664)
    assert (b["consumer_count"], b["producer_count"], b["topics"]) == (2, 0, 1)
    assert (b["broker"], b["ts"]) == ("broker-1:8080", row["ts"])


def test_detect_kind_by_pulsar_field_names() -> None:
    """Type detection by the fields Jackson writes (spec §1.2–§1.5, §7.1; TopBundlesLoadData.topBundlesLoadData)."""
    assert dump_tree.detect_kind(DOC_SAMPLE) == dump_tree.LOCAL_BROKER_DATA
    assert dump_tree.detect_kind({"lastStats": {}, "cpu": {}}) == dump_tree.LOCAL_BROKER_DATA  # pre-loadReportType dumps
    assert dump_tree.detect_kind({"shortTermData": {}, "longTermData": {}, "topics": 1}) == dump_tree.BUNDLE_DATA_KIND
    assert dump_tree.detect_kind({"shortTermMsgRateIn": 1.0, "longTermMsgRateIn": 1.0}) == dump_tree.TIME_AVERAGE_BROKER_DATA
    assert dump_tree.detect_kind({"cpu": {}, "weightedMaxEMA": 0.2, "updatedAt": 1}) == dump_tree.BROKER_LOAD_DATA
    assert dump_tree.detect_kind({"topBundlesLoadData": []}) == dump_tree.TOP_BUNDLES_KIND
    assert dump_tree.detect_kind({"foo": 1}) is None
    assert dump_tree.detect_kind([1, 2]) is None


@pytest.mark.parametrize(
    "name, ms",
    [
        ("20230802T120000Z", 1690977600000),
        ("2023-08-02T12:00:05Z", 1690977605000),
        ("2023-08-02T12-00-05.250Z", 1690977605250),
        ("20230802-120005", 1690977605000),
        ("snap_2023-08-02_12-00-05", 1690977605000),
        ("broker-1_8080__1690977605217", 1690977605217),
        ("load-1690977605", 1690977605000),
        ("0x40000000_0x80000000", None),
        ("broker-1_8080", None),
        ("20231345T990000Z", None),  # not a date
    ],
)
def test_timestamp_patterns(name: str, ms: int | None) -> None:
    """Documented file-name timestamp patterns (module docstring); 1690977600000 ms = 2023-08-02T12:00:00Z."""
    assert dump_tree.timestamp_from_name(name) == ms


def test_tick_is_the_exact_report_time() -> None:
    """The leader acts on report versions: 12:00:59.999, 12:00:00.000 and 12:00:00.001 are three ticks, each at its
    own millisecond (two versions of one broker's report written in one minute no longer collide)."""
    assert dump_tree.tick_of(1690977659999) == _utc(2023, 8, 2, 12, 0, 59, 999_000)
    assert dump_tree.tick_of(1690977600000) == _utc(2023, 8, 2, 12, 0)
    assert dump_tree.tick_of(1690977600001) == _utc(2023, 8, 2, 12, 0, 0, 1_000)
    assert dump_tree.tick_of(1690977660000) == _utc(2023, 8, 2, 12, 1)


@given(st.integers(min_value=1, max_value=253_402_300_799_999))  # to 9999-12-31T23:59:59.999Z
def test_tick_keeps_every_millisecond(ms: int) -> None:
    """Built from integer milliseconds, no float rounding: the tick is ``ms`` after the epoch, to the millisecond,
    and a whole number of milliseconds (Spark's microsecond timestamps store it exactly)."""
    t = dump_tree.tick_of(ms)
    assert (t - EPOCH) // timedelta(milliseconds=1) == ms
    assert t.microsecond % 1000 == 0 and t.tzinfo == timezone.utc


def test_names_from_paths_and_urls() -> None:
    """Broker id = host:port of the web service URL (the /loadbalance/brokers key); ``_`` stands for ``:`` in paths."""
    root = Path("/d/snap")
    assert dump_tree.broker_from_url("http://broker-1:8080") == "broker-1:8080"
    assert dump_tree.broker_from_url("https://b.example.com:8443/") == "b.example.com:8443"
    assert dump_tree.broker_from_path(Path("broker-load-data/broker-2_8080/20230802T120000Z.json"), root) == "broker-2:8080"
    assert dump_tree.broker_from_path(Path("x/broker-3_8080__1690977605217.json"), root) == "broker-3:8080"
    assert dump_tree.broker_from_path(Path("x/20230802T120000Z.json"), root) is None
    assert dump_tree.bundle_from_path(Path("bundle-data/20230802T120245Z/public/default/0x00000000_0x20000000.json")) == (
        "public/default/0x00000000_0x20000000"
    )
    # heartbeat namespaces (NamespaceService.getHeartbeatNamespace / V2): pulsar/<cluster>/<host:port>, pulsar/<host:port>
    assert dump_tree.bundle_from_path(Path("bundle-data/20230802T120245Z/pulsar/standalone/127.0.0.1_8080/"
                                     "0x00000000_0xffffffff.json")) == "pulsar/standalone/127.0.0.1:8080/0x00000000_0xffffffff"
    assert dump_tree.bundle_from_path(Path("bundle-data/20230802T120245Z/pulsar/broker-1_8080/0x00000000_0xffffffff.json")) == (
        "pulsar/broker-1:8080/0x00000000_0xffffffff"
    )
    assert dump_tree.bundle_from_path(Path("bundle-data/x/pulsar/system/0x00000000_0x40000000.json")) == (
        "pulsar/system/0x00000000_0x40000000"
    )
    assert dump_rows.split_bundle("a/b/0x00000000_0xffffffff") == ("a/b", 0, 0xFFFFFFFF)
    assert dump_rows.split_bundle("a/b/not-a-range") == ("a/b", None, None)


def test_read_modular_sample() -> None:
    """data/samples/modular-3brokers: 3 brokers x 3 reports, each at its own lastUpdate (broker-1 at :05.217,
    broker-2 at :17.903, broker-3 at :33.412 of 12:00, 12:01 and 12:02); bundles 3+3+2 in the 12:00 and 12:01
    reports, 4+2+3 at 12:02 (split of public/default/0x00000000_0x40000000); 9 BundleData and 3
    TimeAverageBrokerData written at 12:02:45 (their directory's stamp): 10 distinct times in all."""
    dump = ing.read_dumps(MODULAR, "c1")
    assert dump.files == 21
    assert dump.reports == {
        dump_tree.LOCAL_BROKER_DATA: 9,
        dump_tree.BUNDLE_DATA_KIND: 9,
        dump_tree.TIME_AVERAGE_BROKER_DATA: 3,
        dump_tree.BROKER_LOAD_DATA: 0,
        dump_tree.TOP_BUNDLES_KIND: 0,
    }
    assert {k: len(v) for k, v in dump.rows.items()} == {
        "broker_load": 9,
        "bundle_load": 25,
        "bundle_data": 9,
        "broker_time_average": 3,
        "broker_load_data_ext": 0,
        "top_bundles_load_data": 0,
        "top_bundles_publication": 0,
        "leader_election": 0,  # no collect record (collect/metadata-versions.jsonl) in the hand-made sample
        "shedding_run": 0,  # no leader log (leader-decisions.log) either
        "broker_departure": 0,
        "leader_placement": 0,
        "topic_load": 0,  # no topics polls (collect/admin) either
    }
    assert dump.ticks == 10
    assert sorted({r["broker"] for r in dump.rows["broker_load"]}) == ["broker-1:8080", "broker-2:8080", "broker-3:8080"]
    b2 = sorted(r["ts"] for r in dump.rows["broker_load"] if r["broker"] == "broker-2:8080")
    assert b2 == [_utc(2023, 8, 2, 12, m, 17, 903_000) for m in (0, 1, 2)]
    assert {(r["broker"], r["ts"]) for r in dump.rows["bundle_load"]} == {
        (r["broker"], r["ts"]) for r in dump.rows["broker_load"]}  # a report's lastStats share its time
    tad = {r["broker"]: r for r in dump.rows["broker_time_average"]}
    assert tad["broker-1:8080"]["ts"] == _utc(2023, 8, 2, 12, 2, 45)
    assert {r["ts"] for r in dump.rows["bundle_data"]} == {_utc(2023, 8, 2, 12, 2, 45)}
    bd = {r["bundle"]: r for r in dump.rows["bundle_data"]}
    child = bd["public/default/0x00000000_0x20000000"]
    assert (child["short_max_samples"], child["short_num_samples"], child["long_max_samples"]) == (10, 1, 1000)
    assert bd["my-tenant/my-namespace/0x00000000_0x40000000"]["long_num_samples"] == 3


def test_read_the_leaders_placement_lines(tmp_path: Path) -> None:
    """A dump whose leader log holds placement lines (``selectBroker``'s "N brokers being considered", DEBUG "Selected
    broker"): one leader_placement row each, in log order, lookups apart from the shedding run's own choice; they
    are no snapshot (``ticks`` unchanged); a lookup's line starts no shedding run (the load manager thread's does)."""
    dump = tmp_path / "dump"
    shutil.copytree(MODULAR, dump)
    impl = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
    (dump / "leader-decisions.log").write_text(
        f"broker-2:8080 2023-08-02T12:00:40,100+0000 [pulsar-2-1] INFO  {impl} - 3 brokers being considered for "
        "assignment of public/default/0x40000000_0x80000000\n"
        f"broker-2:8080 2023-08-02T12:00:40,101+0000 [pulsar-2-1] DEBUG {impl} - Selected broker Optional[broker-3:8080] "
        "from candidate brokers [broker-1:8080, broker-2:8080, broker-3:8080]\n"
        f"broker-2:8080 2023-08-02T12:00:40,101+0000 [pulsar-load-manager-1-1] INFO  {impl} - 2 brokers being considered "
        "for assignment of public/default/0x80000000_0xc0000000\n", encoding="utf-8")
    read = ing.read_dumps(dump, "c1")
    rows = read.rows["leader_placement"]
    assert [(r["ts"], r["seq"], r["broker"], r["thread"], r["bundle"], r["candidates"], r["selected"], r["lookup"])
            for r in rows] == [
        (_utc(2023, 8, 2, 12, 0, 40, 100_000), 0, "broker-2:8080", "pulsar-2-1", "public/default/0x40000000_0x80000000",
         3, "broker-3:8080", True),
        (_utc(2023, 8, 2, 12, 0, 40, 101_000), 1, "broker-2:8080", "pulsar-load-manager-1-1",
         "public/default/0x80000000_0xc0000000", 2, None, False)]
    assert read.ticks == 10
    assert [r["ts"] for r in read.rows["shedding_run"]] == [_utc(2023, 8, 2, 12, 0, 40, 101_000)]


def test_read_extensible_sample() -> None:
    """data/samples/extensible-3brokers: BrokerLoadData ts = its exact updatedAt (9 times), TopBundlesLoadData ts
    from the file name (12:00, 12:01, 12:02): 12 distinct times; broker ids from the host_port directories; list
    order kept."""
    dump = ing.read_dumps(EXTENSIBLE, "c1")
    assert len(dump.rows["broker_load_data_ext"]) == 9
    assert len(dump.rows["top_bundles_load_data"]) == 25
    assert dump.rows["broker_load"] == [] and dump.ticks == 12
    ext = dump.rows["broker_load_data_ext"]
    b2 = [r for r in ext if r["broker"] == "broker-2:8080" and r["ts"] == _utc(2023, 8, 2, 12, 1, 6, 903_000)]
    assert len(b2) == 1
    assert b2[0]["bundle_count"] == 2 and b2[0]["cpu_limit"] == 800.0
    assert b2[0]["updated_at"] == b2[0]["ts"]
    assert b2[0]["reported_at"] == _utc(2023, 8, 2, 12, 1, 7, 115_000)
    tops = dump.rows["top_bundles_load_data"]
    top = [r for r in tops if r["broker"] == "broker-1:8080" and r["ts"] == _utc(2023, 8, 2, 12, 0)]
    assert [r["position"] for r in top] == [0, 1, 2]
    assert top[0]["bundle"] == "public/default/0x00000000_0x40000000"  # the highest msgThroughputIn first


def test_map_file_keys_are_broker_ids(tmp_path: Path) -> None:
    """DESIGN.md §5 shape {"broker-1:8080": {BrokerLoadData}} in one file: the key names the broker."""
    bld = {
        **{r: {"usage": 1.0, "limit": 100.0} for r in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")},
        "msgThroughputIn": 1.0,
        "msgThroughputOut": 2.0,
        "msgRateIn": 3.0,
        "msgRateOut": 4.0,
        "bundleCount": 1,
        "weightedMaxEMA": 0.01,
        "updatedAt": 1690977605217,
    }
    _write(tmp_path / "d" / "all.json", {"broker-2:8080": bld, "broker-1:8080": {**bld, "updatedAt": 0}})
    with pytest.raises(InvalidInputError, match="no snapshot time"):  # updatedAt 0 and no time in the path
        ing.read_dumps(tmp_path / "d", "c1")
    _write(tmp_path / "d" / "all.json", {"broker-2:8080": bld, "broker-1:8080": {**bld, "updatedAt": 1690977665000}})
    rows = ing.read_dumps(tmp_path / "d", "c1").rows["broker_load_data_ext"]
    assert [(r["broker"], r["ts"]) for r in rows] == [
        ("broker-1:8080", _utc(2023, 8, 2, 12, 1, 5)),
        ("broker-2:8080", _utc(2023, 8, 2, 12, 0, 5, 217_000)),
    ]
    assert rows[0]["reported_at"] is None and rows[0]["msg_rate_out"] == 4.0


def test_totals_default_to_sums_and_bundle_stats_alias(tmp_path: Path) -> None:
    """LocalBrokerData totals absent -> sums over the stats (LocalBrokerData.updateBundleData); the older
    ``bundleStats`` alias of lastStats is read; NamespaceBundleStats counters default to 0; "NaN" strings parse."""
    doc = {k: v for k, v in DOC_SAMPLE.items() if k not in ("lastStats", "msgRateIn", "numTopics", "numBundles")}
    doc["bundleStats"] = {
        "t/n/0x00000000_0x80000000": {"msgRateIn": 10.5, "topics": 3},
        "t/n/0x80000000_0xffffffff": {"msgRateIn": 4.5, "topics": 2, "msgThroughputIn": "NaN"},
    }
    _write(tmp_path / "d" / "b.json", doc)
    dump = ing.read_dumps(tmp_path / "d", "c1")
    (row,) = dump.rows["broker_load"]
    assert (row["msg_rate_in"], row["num_topics"], row["num_bundles"]) == (15.0, 5, 2)
    b = {r["bundle"]: r for r in dump.rows["bundle_load"]}
    assert b["t/n/0x00000000_0x80000000"]["cache_size"] == 0
    assert math.isnan(b["t/n/0x80000000_0xffffffff"]["msg_throughput_in"])


@pytest.mark.parametrize(
    "mutate, where",
    [
        (lambda d: d.pop("cpu"), "$.cpu: required object is missing"),
        (lambda d: d["memory"].pop("limit"), "$.memory.limit: required number is missing"),
        (lambda d: d.update(lastUpdate="yesterday"), "$.lastUpdate: expected an integer"),
        (
            lambda d: d["lastStats"]["my-tenant/my-namespace/0x4ccccccb_0x66666664"].update(msgRateIn=[1]),
            '$.lastStats["my-tenant/my-namespace/0x4ccccccb_0x66666664"].msgRateIn: expected a number',
        ),
    ],
)
def test_missing_or_mistyped_fields_name_file_and_json_path(tmp_path: Path, mutate, where: str) -> None:
    """Bad structure is an InvalidInputError (exit 3) naming the file and the JSON path."""
    doc = json.loads(json.dumps(DOC_SAMPLE))
    mutate(doc)
    f = _write(tmp_path / "d" / "broker.json", doc)
    with pytest.raises(InvalidInputError) as err:
        ing.read_dumps(tmp_path / "d", "c1")
    assert err.value.exit_code == 3
    assert str(f) in str(err.value) and where in str(err.value)


def test_bad_files_are_errors(tmp_path: Path) -> None:
    """Invalid JSON, an unknown shape, the SimpleLoadManager's LoadReport, a file without time or broker id."""
    d = tmp_path / "d"
    f = _write(d / "a.json", '{"cpu": ')
    with pytest.raises(InvalidInputError, match=r"a\.json: \$: invalid JSON at line 1"):
        ing.read_dumps(d, "c1")
    _write(f, {"hello": "world"})
    with pytest.raises(InvalidInputError, match="not a recognised Pulsar load dump"):
        ing.read_dumps(d, "c1")
    _write(f, {"loadReportType": "LoadReport", "cpu": {}})
    with pytest.raises(InvalidInputError, match="unsupported load report type 'LoadReport'"):
        ing.read_dumps(d, "c1")
    tabd = {f"{t}Msg{k}": 1.0 for t in ("shortTerm", "longTerm") for k in ("RateIn", "RateOut", "ThroughputIn", "ThroughputOut")}
    f.unlink()
    f = _write(d / "broker-1_8080.json", tabd)
    with pytest.raises(InvalidInputError, match=r"broker-1_8080\.json: \$: no snapshot time"):
        ing.read_dumps(d, "c1")
    f.unlink()
    _write(d / "20230802T120000Z.json", tabd)
    with pytest.raises(InvalidInputError, match="no broker id"):
        ing.read_dumps(d, "c1")
    with pytest.raises(UsageError):
        ing.read_dumps(tmp_path / "missing", "c1")
    with pytest.raises(UsageError):
        ing.read_dumps(d, "bad'name")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInputError, match="no \\*.json dump files"):
        ing.read_dumps(empty, "c1")


# ----------------------------------------------------------------------------------------------------------------
# data-interval flags (--since / --until), pure Python


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-08-02", _utc(2023, 8, 2)),  # a date is its midnight UTC
        ("2023-08-02T12:00:00Z", _utc(2023, 8, 2, 12)),
        ("2023-08-02T00:00:00+00:00", _utc(2023, 8, 2)),  # Airflow's ``data_interval_start | ts``
        ("2023-08-02T14:30:00+02:00", _utc(2023, 8, 2, 12, 30)),  # offsets convert to UTC
        ("2023-08-02 12:00", _utc(2023, 8, 2, 12)),  # no offset means UTC
        ("20230802T120000Z", _utc(2023, 8, 2, 12)),
    ],
)
def test_window_bounds_are_iso_8601_utc(text: str, expected: datetime) -> None:
    """Issue 5 item 3: the DAG passes its data interval as ISO-8601 timestamps; dates and offsets are accepted."""
    from lbreplay.lake.window import parse_instant

    assert parse_instant(text, "--since") == expected


def test_window_empty_inverted_or_malformed_names_the_flag() -> None:
    """[since, until) must be non-empty: equal or inverted bounds, or a non-ISO value, are usage errors (exit 2)
    naming the flags; no flags at all means no window."""
    from lbreplay.lake.window import window_from_flags

    flags = ("--since", "--until")
    assert window_from_flags(None, None, flags) is None
    for since, until in (("2023-08-02", "2023-08-02T00:00:00Z"), ("2023-08-03", "2023-08-02")):
        with pytest.raises(UsageError, match=r"--until .* must be later than --since .*empty") as err:
            window_from_flags(since, until, flags)
        assert err.value.exit_code == 2
    with pytest.raises(UsageError, match="--since 'yesterday': expected an ISO-8601"):
        window_from_flags("yesterday", None, flags)


def test_window_predicate_bounds_ts_and_the_date_partitions() -> None:
    """The replaceWhere / read predicate: ts in [since, until) plus the UTC days it touches (an until at midnight
    excludes that day; one at noon includes it); an open side adds no bound."""
    from lbreplay.lake.window import window_from_flags

    day = window_from_flags("2023-08-02", "2023-08-03")
    assert day.predicate() == (
        "ts >= TIMESTAMP '2023-08-02T00:00:00Z' AND date >= DATE '2023-08-02' AND "
        "ts < TIMESTAMP '2023-08-03T00:00:00Z' AND date <= DATE '2023-08-02'"
    )
    noon = window_from_flags(None, "2023-08-03T12:00:00Z")
    assert noon.predicate() == "ts < TIMESTAMP '2023-08-03T12:00:00Z' AND date <= DATE '2023-08-03'"
    assert day.to_json() == {"from": "2023-08-02T00:00:00Z", "to": "2023-08-03T00:00:00Z"}
    assert day.contains(datetime(2023, 8, 2, 23, 59)) and not day.contains(_utc(2023, 8, 3))
    # epoch microseconds (the replay task's filter on topic_load's Parquet ts): 2023-08-02T00:00Z = 1690934400 s;
    # +02:00 midnight is 22:00Z the day before; a fraction of a second survives
    assert day.epoch_micros() == (1_690_934_400_000_000, 1_691_020_800_000_000)
    assert window_from_flags("2023-08-02T00:00:00.000250+02:00", None).epoch_micros() == (1_690_927_200_000_250, None)


def test_in_window_keeps_only_the_window_ticks() -> None:
    """Modular sample, window [12:01, 12:02): the three reports written in that minute (12:01:05.217, 12:01:17.903,
    12:01:33.412) — 3 LocalBrokerData rows and their 8 lastStats bundles (3+3+2); BundleData / TimeAverageBrokerData
    (written 12:02:45) are outside. A window before the sample is a usage error naming the flags."""
    from lbreplay.lake.window import window_from_flags

    dump = ing.read_dumps(MODULAR, "c1")
    kept = ing.in_window(dump, window_from_flags("2023-08-02T12:01:00Z", "2023-08-02T12:02:00Z",
                                                 ("--since", "--until")), MODULAR)
    assert {k: len(v) for k, v in kept.rows.items() if v} == {"broker_load": 3, "bundle_load": 8}
    assert {r["ts"] for rows in kept.rows.values() for r in rows} == {
        _utc(2023, 8, 2, 12, 1, 5, 217_000), _utc(2023, 8, 2, 12, 1, 17, 903_000), _utc(2023, 8, 2, 12, 1, 33, 412_000)}
    assert kept.outside == 9 + 25 + 9 + 3 - 11
    with pytest.raises(UsageError, match=r"--since/--until: no snapshot .* falls in \[2023-08-01T00:00:00Z"):
        ing.in_window(dump, window_from_flags("2023-08-01", "2023-08-02", ("--since", "--until")), MODULAR)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["ingest", "--source", str(MODULAR), "--cluster", "c1", "--since", "2023-08-03", "--until", "2023-08-02"],
         "--until"),
        (["replay", "--cluster", "c1", "--from", "2023-08-02", "--to", "2023-08-02"], "--to"),
        (["sweep", "--cluster", "c1", "--grid", "x.yaml", "--from", "not-a-time"], "--from"),
    ],
)
def test_cli_window_errors_exit_2_before_spark(argv: list[str], flag: str, tmp_path: Path) -> None:
    """DESIGN.md §3 exit codes: a bad window is a usage error (2) with a one-line reason naming the flag, reported
    before any Spark session starts (the lake stays untouched)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "lbreplay.cli", *argv, "--lake", str(tmp_path / "lake")],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("lbreplay: ") and flag in out.stderr
    assert not (tmp_path / "lake").exists()


# ----------------------------------------------------------------------------------------------------------------
# Spark


def test_ingest_modular_sample_into_lake(spark, lake) -> None:
    """The modular sample lands in broker_load / bundle_load / bundle_data / broker_time_average with the values of
    the JSON files (broker-1's report written 2023-08-02T12:00:05.217Z, cpu 398.47 of 800)."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    dump = ing.ingest(spark, lake, MODULAR, "ing_mod")
    assert dump.files == 21

    def table(name: str):
        return spark.read.format("delta").load(f"{lake}/{name}").where(F.col("cluster") == "ing_mod")

    bl = table("broker_load")
    assert bl.count() == 9
    # each report version at its own lastUpdate, to the millisecond
    assert [r[0] for r in bl.select("ts").distinct().orderBy("ts").collect()] == [
        datetime(2023, 8, 2, 12, m, s, us) for m in (0, 1, 2) for s, us in ((5, 217_000), (17, 903_000), (33, 412_000))
    ]
    got = bl.where("broker = 'broker-1:8080' AND ts = '2023-08-02 12:00:05.217'").select(
        "cpu_usage", "cpu_limit", "memory_limit", "num_bundles", "num_topics", "last_update", "date"
    )
    expected = spark.createDataFrame(
        [(398.47, 800.0, 2096.0, 3, 63, datetime(2023, 8, 2, 12, 0, 5, 217000), date(2023, 8, 2))],
        got.schema,
    )
    assert_df_equality(got, expected)

    bundles = table("bundle_load")
    assert bundles.count() == 25
    split = bundles.where("date_trunc('minute', ts) = '2023-08-02 12:02:00' AND namespace = 'public/default'").select(
        "broker", "range_lower", "range_upper"
    )
    assert sorted(tuple(r) for r in split.collect()) == [
        ("broker-1:8080", 0x00000000, 0x20000000),
        ("broker-1:8080", 0x20000000, 0x40000000),
        ("broker-2:8080", 0x40000000, 0x80000000),
        ("broker-3:8080", 0x80000000, 0xC0000000),  # moved from broker-2 at 12:01
        ("broker-3:8080", 0xC0000000, 0xFFFFFFFF),
    ]
    neg = bundles.where("bundle = 'my-tenant/my-namespace/0x40000000_0x80000000' AND ts = '2023-08-02 12:00:17.903'")
    got_neg = [tuple(r) for r in neg.select("broker", "msg_rate_in", "consumer_count").collect()]
    assert got_neg == [("broker-2:8080", 405.9, 7)]
    bd = table("bundle_data")
    assert bd.count() == 9
    # TimeAverageBrokerData.reset: broker-2's short-term rate = the sum over its 12:02 bundles' BundleData
    owned = bd.where(F.col("namespace").isin("my-tenant/my-namespace", "public/default"))
    owned = owned.where(F.col("range_lower") == 0x40000000)
    assert owned.count() == 2
    tabd = table("broker_time_average").where("broker = 'broker-2:8080'")
    tabd = tabd.select("short_msg_rate_in", "long_msg_rate_in").first()
    assert tabd[0] == pytest.approx(owned.agg(F.sum("short_msg_rate_in")).first()[0], abs=0.002) == pytest.approx(573.16)
    assert tabd[1] == pytest.approx(owned.agg(F.sum("long_msg_rate_in")).first()[0], abs=0.002)
    assert table("broker_load_data_ext").count() == 0


def test_reingest_replaces_the_cluster(spark, lake, tmp_path: Path) -> None:
    """Ingest replaces every ingest table for the cluster: loading the extensible sample over a modular ingest
    leaves no broker_load rows for it, 9 BrokerLoadData rows and 25 top-bundle rows; other clusters are untouched."""
    from pyspark.sql import functions as F

    src = tmp_path / "mod"
    shutil.copytree(MODULAR / "loadbalance" / "brokers" / "broker-1_8080", src)
    ing.ingest(spark, lake, src, "ing_re")
    ing.ingest(spark, lake, src, "ing_other")

    def n(name: str, cluster: str) -> int:
        return spark.read.format("delta").load(f"{lake}/{name}").where(F.col("cluster") == cluster).count()

    assert n("broker_load", "ing_re") == 3
    ing.ingest(spark, lake, EXTENSIBLE, "ing_re")
    assert n("broker_load", "ing_re") == 0 and n("bundle_load", "ing_re") == 0
    assert n("broker_load_data_ext", "ing_re") == 9 and n("top_bundles_load_data", "ing_re") == 25
    assert n("broker_load", "ing_other") == 3


def test_ingest_window_replaces_only_its_days(spark, lake, tmp_path: Path) -> None:
    """Issue 5 item 3 (idempotent daily tasks): a source holding two days of the modular sample, ingested one day
    at a time with --since/--until, keeps both days (9 broker rows, 25 bundle rows, 9 BundleData per day); re-ingesting
    day 1 from a smaller dump (broker-1 only) replaces day 1 and leaves day 2; a mid-day window replaces only its
    ticks (one broker's report at 12:01 of day 2). Each ingest is one commit per table."""
    from chispa import assert_df_equality
    from delta.tables import DeltaTable
    from lbreplay.lake.window import window_from_flags
    from pyspark.sql import functions as F

    cluster = "ing_win"
    both = tmp_path / "both"
    shutil.copytree(MODULAR, both)
    shift_dumps(MODULAR, both, 1)
    day1 = window_from_flags("2023-08-02", "2023-08-03", ("--since", "--until"))
    day2 = window_from_flags("2023-08-03T00:00:00Z", "2023-08-04T00:00:00Z", ("--since", "--until"))

    def per_day(name: str):
        df = spark.read.format("delta").load(f"{lake}/{name}").where(F.col("cluster") == cluster)
        return df.groupBy("date").agg(F.count(F.lit(1)).alias("n")).orderBy("date")

    def expect(rows: list[tuple[date, int]]):
        return spark.createDataFrame(rows, "date DATE, n BIGINT")

    def check(name: str, rows: list[tuple[date, int]]) -> None:
        assert_df_equality(per_day(name), expect(rows), ignore_nullable=True, ignore_metadata=True)

    ing.ingest(spark, lake, both, cluster, day1)
    check("broker_load", [(date(2023, 8, 2), 9)])
    version = DeltaTable.forPath(spark, f"{lake}/broker_load").history(1).first()["version"]
    ing.ingest(spark, lake, both, cluster, day2)
    check("broker_load", [(date(2023, 8, 2), 9), (date(2023, 8, 3), 9)])
    check("bundle_load", [(date(2023, 8, 2), 25), (date(2023, 8, 3), 25)])
    check("bundle_data", [(date(2023, 8, 2), 9), (date(2023, 8, 3), 9)])
    last = DeltaTable.forPath(spark, f"{lake}/broker_load").history(1).first()
    assert last["version"] == version + 1
    assert "ts" in last["operationParameters"]["predicate"] and "date" in last["operationParameters"]["predicate"]

    one = tmp_path / "broker1"
    shutil.copytree(both / "loadbalance" / "brokers" / "broker-1_8080", one)
    ing.ingest(spark, lake, one, cluster, day1)  # day 1 now only broker-1's 3 reports; its BundleData cleared
    check("broker_load", [(date(2023, 8, 2), 3), (date(2023, 8, 3), 9)])
    check("bundle_data", [(date(2023, 8, 3), 9)])

    # [12:01, 12:02) of day 2 from broker-1's dump: that tick drops to 1 broker row, 12:00 and 12:02 keep 3 each
    ing.ingest(spark, lake, one, cluster,
               window_from_flags("2023-08-03T12:01:00Z", "2023-08-03T12:02:00Z", ("--since", "--until")))
    check("broker_load", [(date(2023, 8, 2), 3), (date(2023, 8, 3), 7)])
    check("bundle_data", [(date(2023, 8, 3), 9)])  # written 12:02:45, outside the window: untouched
    bl = spark.read.format("delta").load(f"{lake}/broker_load").where(F.col("cluster") == cluster)
    assert [(r.broker, r.ts) for r in bl.where("date_trunc('minute', ts) = '2023-08-03 12:01:00'").collect()] == [
        ("broker-1:8080", datetime(2023, 8, 3, 12, 1, 5, 217_000))]


def test_windowed_ingest_keeps_the_leaders_elections_before_the_window(spark, lake, tmp_path: Path) -> None:
    """An election times the leader's shedding after it (kernel.leader_election), so a windowed ingest of a collect
    recording takes every election before the window's end: ``--since 20:45`` of the real recording keeps its
    20:38:53.992 election. A later window ingested from a tree without the record keeps the election the lake
    holds, and re-ingesting the first window does not duplicate it."""
    from lbreplay.lake.window import window_from_flags
    from pyspark.sql import functions as F

    real = REPO / "data" / "samples" / "real-modular-3brokers"
    cluster = "ing_elect"

    def elections() -> list[tuple[int, str]]:
        df = spark.read.format("delta").load(f"{lake}/leader_election").where(F.col("cluster") == cluster)
        return sorted((r[0], r[1]) for r in df.select(F.unix_millis("ts"), "broker").collect())

    expected = [(1_795_639_133_992, "127.0.0.1:18082")]
    ing.ingest(spark, lake, real, cluster, window_from_flags("2026-11-25T20:45:00Z", None, ("--since", "--until")))
    assert elections() == expected
    reports_only = tmp_path / "reports only"
    shutil.copytree(real / "loadbalance", reports_only / "loadbalance")
    ing.ingest(spark, lake, reports_only, cluster, window_from_flags("2026-11-25T20:50:00Z", None,
                                                                      ("--since", "--until")))
    assert elections() == expected
    ing.ingest(spark, lake, real, cluster, window_from_flags("2026-11-25T20:45:00Z", None, ("--since", "--until")))
    assert elections() == expected
