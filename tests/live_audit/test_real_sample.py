"""The committed real recording (data/samples/real-modular-3brokers: `lbreplay collect` on a live 3-broker Pulsar
4.0.7 cluster, see its README) read by ingest, and audited against its leader's logged decisions."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from lbreplay.collect.layout import read_json_lines
from lbreplay.collect.leader_log import parse_leader_log
from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import check, leader_decisions
from lbreplay.live_audit.leader_view import recorded_versions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-3brokers"
BROKERS = {"127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"}


def test_every_recorded_version_is_ingested() -> None:
    versions = [r for r in read_json_lines(SAMPLE / "collect" / "metadata-versions.jsonl") if r["event"] == "version"]
    by_kind = Counter(r["path"].split("/")[2] for r in versions if "file" in r)
    dump = read_dumps(SAMPLE, "real")
    assert len(dump.rows["broker_load"]) == by_kind["brokers"] > 0
    assert len(dump.rows["bundle_data"]) == by_kind["bundle-data"] > 0
    assert len(dump.rows["broker_time_average"]) == by_kind["broker-time-average"] > 0
    assert {r["broker"] for r in dump.rows["broker_load"]} == BROKERS
    # the leader's splits (range_equally_divide) show up as children of the split bundles in later reports
    bundles = {r["bundle"] for r in dump.rows["bundle_load"]}
    for d in leader_decisions(SAMPLE):
        lo, hi = (int(x, 16) for x in d.bundle.rsplit("/", 1)[1].split("_"))
        mid = lo + (hi - lo) // 2  # range_equally_divide
        children = {f"lb/hot/0x{lo:08x}_0x{mid:08x}", f"lb/hot/0x{mid:08x}_0x{hi:08x}"}
        assert children & bundles, d.bundle  # a child without topics is owned by no broker, so in no report
    # what a healthy cluster writes: some brokers wrote two report versions within one minute
    per_minute = Counter((r["broker"], r["ts"].replace(second=0, microsecond=0)) for r in dump.rows["broker_load"])
    assert max(per_minute.values()) >= 2


def test_each_version_is_ingested_at_its_own_time() -> None:
    """Each report version is one row at its own lastUpdate, to the millisecond (what the replay orders by): the
    recorded versions' times are exactly the rows' times, and two versions of one broker in one minute are two
    rows."""
    rows = read_dumps(SAMPLE, "real").rows["broker_load"]
    assert len({(r["broker"], r["ts"]) for r in rows}) == len(rows)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    written = sorted((r["broker"], (r["ts"] - epoch) // timedelta(milliseconds=1)) for r in rows)
    reports = sorted((b, json.loads(v.path.read_bytes())["lastUpdate"])
                     for b, vs in recorded_versions(SAMPLE, "brokers").items() for v in vs)
    assert written == reports
    assert any(r["ts"].microsecond for r in rows)
    assert max(Counter((b, ms // 60_000) for b, ms in written).values()) >= 2


def test_the_leaders_election_is_ingested() -> None:
    """collect recorded /loadbalance/leader (created by 127.0.0.1:18082 when it won the election, 64 ms before its
    log says "was elected leader"): ingest makes it the leader_election row that times the leader's shedding."""
    rows = read_dumps(SAMPLE, "real").rows["leader_election"]
    assert [(r["ts"].isoformat(timespec="milliseconds"), r["broker"]) for r in rows] == [
        ("2026-11-25T20:38:53.992+00:00", "127.0.0.1:18082")]
    elected = next(ln for ln in (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
                   if "was elected leader" in ln)
    assert "127.0.0.1:18082 2026-11-25T20:38:54,056" in elected


def test_leader_decisions_of_the_recording() -> None:
    lines = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    attempts = parse_leader_log(lines, attempts=True)
    decisions = leader_decisions(SAMPLE)
    assert [d.outcome for d in decisions] == ["succeeded"] * len(decisions)
    assert len(attempts) > len(decisions) > 0  # the leader retried each split once and Pulsar refused the retry
    assert all(d.source in BROKERS for d in decisions)  # the owner at the split, from the recorded reports


@pytest.mark.spark
def test_audit_reproduces_the_leaders_decisions(spark, lake: str, tmp_path: Path) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --broker-conf`` on the raw recording: validation accepts
    what the healthy cluster wrote (report versions at their own times, a bundle in two reports, ranges overlapping
    around splits), and the audit, deciding after each report write on the reports the leader held, makes the
    leader's 4 splits (same bundle, same owner, same minute) and nothing else."""
    report = check(SAMPLE, tmp_path, "real-sample", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert report["raw"]["validation_passed"], report["raw"]["validation"]
    assert report["result"] == "compared", report["result"]
    assert report["agreement"] >= 0.95, report["summary"]
    assert not report["differences"], report["differences"]
    assert "leader_view" not in report  # the raw recording itself was audited
    assert report["matched"] == report["leader_decisions"] == 4 and report["audit_decisions"] == 4


def test_kernel_reproduces_the_leaders_splits_per_report_version() -> None:
    """The kernel is right when driven as the leader is: ModularLoadManagerImpl.updateAll (updateAllBrokerData,
    updateBundleData, checkNamespaceBundleSplit) runs on every broker-report change, so its BundleData gets one
    sample per report version of any broker and its split check runs within ~0.1 s of each write. `decide` chained
    over the recorded versions in that way, with BundleData carried (TimeAverageMessageData.update from the
    kernel), splits the same 4 bundles from the same owners right after the same report versions as the leader,
    and repeats each split once more, as the leader's refused retries did (9 attempts, 8 after the same write)."""
    import numpy as np

    from lbreplay.decide import decide
    from lbreplay.kernel.config import parse_broker_conf
    from lbreplay.kernel.load_data import MESSAGE_FIELDS, tamd_update
    from lbreplay.live_audit.leader_view import held_at, recorded_versions

    conf = parse_broker_conf((SAMPLE / "broker.conf").read_text(encoding="utf-8"))
    brokers = recorded_versions(SAMPLE, "brokers")
    bundle_data: dict[str, dict[str, object]] = {}
    kernel = []
    for t, _writer in sorted((v.mtime, b) for b, vs in brokers.items() for v in vs):
        held = {b: json.loads(held_at(vs, t).path.read_bytes()) for b, vs in brokers.items() if held_at(vs, t)}
        for report in held.values():  # updateBundleData: one sample per bundle of every held report
            for bundle, st in report["lastStats"].items():
                d = bundle_data.setdefault(bundle, {"short": (np.zeros((1, 4)), np.zeros(1, int)),
                                                    "long": (np.zeros((1, 4)), np.zeros(1, int))})
                sample = np.array([[st.get(f, 0.0) for f in MESSAGE_FIELDS]])
                for key, mx in (("short", 10), ("long", 1000)):
                    vals, n = d[key]  # type: ignore[misc]
                    tamd_update(vals, n, np.array([mx]), sample)
                d["topics"] = st.get("topics", 0)
        request_bd = {b: {f"{key}TermData": {**dict(zip(MESSAGE_FIELDS, d[key][0][0].tolist())),  # type: ignore[index]
                                              "maxSamples": mx, "numSamples": int(d[key][1][0])}  # type: ignore[index]
                          for key, mx in (("short", 10), ("long", 1000))} | {"topics": d["topics"]}
                      for b, d in bundle_data.items()}
        res = decide({"config": conf, "nowMillis": t, "actions": ["split"],
                      "loadData": {"brokers": {b: {"localData": r} for b, r in held.items()}, "bundleData": request_bd}})
        for s in res["split"]:
            kernel.append((t, s["bundle"], s["broker"]))
            bundle_data.pop(s["bundle"], None)  # the split parent's BundleData is dropped
    leader = parse_leader_log((SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines(), attempts=True)
    first = {}
    for t, bundle, broker in kernel:
        first.setdefault(bundle, (t, broker))
    splits = [d for d in leader_decisions(SAMPLE) if d.action == "SPLIT"]
    assert [(d.bundle, d.source) for d in splits] == [(b, first[b][1]) for b in (d.bundle for d in splits)]
    assert all(0 <= d.at_ms - first[d.bundle][0] < 500 for d in splits)  # triggered by the same report write
    assert len(kernel) == len(leader) == 9
    same_write = sum(any(0 <= d.at_ms - t < 500 and b == d.bundle for t, b, _ in kernel) for d in leader)
    assert same_write == 8  # the leader's first retry waited for its busy executor (split until 20:40:30.49)


def _version_ticks(brokers: dict[str, list[Any]], ids: list[str]) -> list[Any]:
    """One ObservedTick per recorded report version, in write order, holding only that version (what the tick
    stream of an ingested recording holds)."""
    import numpy as np

    from lbreplay.lake.dump_rows import RESOURCE_JSON
    from lbreplay.replay.records import ObservedTick

    out = []
    for k, (_mtime, broker, v) in enumerate(sorted((v.mtime, b, v) for b, vs in brokers.items() for v in vs)):
        doc = json.loads(v.path.read_bytes())
        i, n = ids.index(broker), len(ids)
        alive, usage, limit = np.zeros(n, dtype=bool), np.zeros((n, 5)), np.zeros((n, 5))
        alive[i] = True
        for j, key in enumerate(RESOURCE_JSON.values()):
            usage[i, j], limit[i, j] = doc[key]["usage"], doc[key]["limit"]
        last_update = np.full(n, -1, dtype=np.int64)
        last_update[i] = doc["lastUpdate"]
        names = sorted(doc["lastStats"])
        stats = [doc["lastStats"][b] for b in names]
        values = np.array([[st.get(f, 0.0) for f in ("msgThroughputIn", "msgThroughputOut", "msgRateIn", "msgRateOut")]
                           + [st.get("consumerCount", 0) + st.get("producerCount", 0), st.get("topics", 0)]
                           for st in stats]).reshape(-1, 6)
        out.append(ObservedTick(k, doc["lastUpdate"], alive, usage, limit, bundle_names=names,
                                bundle_owner=np.full(len(names), i, dtype=np.int32), bundle_values=values,
                                last_update=last_update))
    return out


def test_replay_engine_on_report_versions_makes_the_leaders_splits_and_nothing_else() -> None:
    """The audit's engine (``held_reports``: the reports the leader holds after each write, each with its own
    lastStats; ``Replay`` in observed mode: updateAll per write, shedding on its timer) over the recorded versions
    makes exactly the leader's 4 splits, each at the write that triggered the leader's (its lastUpdate 0-500 ms
    before the log line), from the same owner; the leader's refused retries are not decisions (a split bundle is
    gone), and ThresholdShedder unloads nothing, as the leader did not."""
    import numpy as np

    from lbreplay.kernel.config import parse_broker_conf, typed_overrides
    from lbreplay.live_audit.leader_view import recorded_versions
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import held_reports

    conf = typed_overrides(parse_broker_conf((SAMPLE / "broker.conf").read_text(encoding="utf-8")), path="broker.conf")
    brokers = recorded_versions(SAMPLE, "brokers")
    ids = sorted(brokers)
    ticks = _version_ticks(brokers, ids)
    static = StaticInputs(ids, ["lb/hot"], CpuCalibration(np.zeros(len(ids)), np.zeros(len(ids))))
    replay = Replay(RunSpec("real", "real", "observed", conf), static)
    assert any(len(set(t.bundle_owner.tolist())) == 1 for t in ticks)  # each tick: one broker's version
    hold = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    decisions = [d for obs in held_reports(iter(ticks), len(ids), hold) for d in replay.step(obs).decisions]
    leader = [d for d in leader_decisions(SAMPLE) if d.action in ("SPLIT", "UNLOAD")]
    assert [(d.action, d.bundle, d.source_broker) for d in decisions] == [(d.action, d.bundle, d.source) for d in leader]
    assert all(0 <= d.at_ms - a.ts_ms < 500 for d, a in zip(leader, decisions))


def _stored_bundle_data() -> Any:
    """The recording's /loadbalance/bundle-data versions as ingest reads them."""
    import numpy as np

    from lbreplay.lake.ingest import read_dumps
    from lbreplay.replay.stored_bundle_data import STORED_COLUMNS, StoredBundleData

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    rows = [{**r, "ts_ms": (r["ts"] - epoch) // timedelta(milliseconds=1)}
            for r in read_dumps(SAMPLE, "real").rows["bundle_data"]]
    return StoredBundleData.from_columns({c: np.array([r[c] for r in rows], dtype=object if c == "bundle" else None)
                                          for c in STORED_COLUMNS})


def _engine_decisions(start_ms: int, stored: Any) -> list[tuple[str, str, str | None, int]]:
    """The audit's engine over the recorded versions written from ``start_ms`` on (a ``--from`` window)."""
    import numpy as np

    from lbreplay.kernel.config import parse_broker_conf, typed_overrides
    from lbreplay.live_audit.leader_view import recorded_versions
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import held_reports

    conf = typed_overrides(parse_broker_conf((SAMPLE / "broker.conf").read_text(encoding="utf-8")), path="broker.conf")
    brokers = recorded_versions(SAMPLE, "brokers")
    ids = sorted(brokers)
    ticks = [t for t in _version_ticks(brokers, ids) if t.ts_ms >= start_ms]
    static = StaticInputs(ids, ["lb/hot"], CpuCalibration(np.zeros(len(ids)), np.zeros(len(ids))),
                          stored_bundle_data=stored)
    replay = Replay(RunSpec("real", "real", "observed", conf), static)
    hold = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    return [(d.action, d.bundle, d.source_broker, obs.ts_ms) for obs in held_reports(iter(ticks), len(ids), hold)
            for d in replay.step(obs).decisions]


WINDOW_FROM = "2026-11-25T20:41:00Z"  # after the recording's first split, before the leader's first BundleData write


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_windowed_audit_reads_the_stored_bundle_data_as_the_leader_does() -> None:
    """ModularLoadManagerImpl.updateBundleData -> getBundleDataOrDefaultAsync: a bundle the leader holds no
    BundleData for starts from its stored /loadbalance/bundle-data version, where there is one. An audit from
    20:41 starts without the in-memory history of the first two minutes: with the recorded versions the engine
    splits lb/hot/0xe0000000_0xf0000000 at the report write the leader split it after (20:42:24); starting from
    default data instead, its long-term rate crosses the limit at an earlier write (20:42:19), which the leader
    never acted on. The full recording is unchanged by the store (nothing was stored when the leader met each
    bundle)."""
    stored = _stored_bundle_data()
    assert len(stored) > 200
    start = _ms(WINDOW_FROM)
    leader = [(d.action, d.bundle, d.source) for d in leader_decisions(SAMPLE) if d.at_ms >= start]
    at = {d.bundle: d.at_ms for d in leader_decisions(SAMPLE)}
    seeded = _engine_decisions(start, stored)
    assert [(a, b, s) for a, b, s, _ in seeded] == leader and len(leader) == 3
    assert all(0 <= at[b] - t < 500 for _, b, _, t in seeded)  # the write that triggered the leader's split
    fresh = _engine_decisions(start, None)
    early = [t for _, b, _, t in fresh if b == "lb/hot/0xe0000000_0xf0000000"]
    assert early and at["lb/hot/0xe0000000_0xf0000000"] - early[0] >= 4_000  # a write ~5 s before the leader's
    assert _engine_decisions(0, stored) == _engine_decisions(0, None)


WINDOW_LEAD_IN_FROM = "2026-11-25T20:42:00Z"  # between the leader's 2nd and 3rd split


@pytest.mark.spark
def test_windowed_spark_audit_starts_with_what_the_leader_held(spark, lake: str) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --from 20:42``: the window starts inside the recorded
    versions, so the stream carries the 2 h before it (``LEAD_IN_MS``) and the audit replays them as warm-up: at
    20:42 the leader holds every broker's latest report (some written before 20:42), its BundleData and the
    splits it already made. The audit makes the leader's 2 decisions of the window at the same report writes
    (starting at the window, it held only the reports written since, and missed the 20:42:24 split); ticks are
    numbered from 0 at the window's first and only the window's are written."""
    from pyspark.sql import functions as F

    from lbreplay.kernel.leader_election import count_timer_minutes
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.validation import is_validated, validate
    from lbreplay.lake.window import window_from_flags
    from lbreplay.live_audit.audit_check import audit_decisions
    from lbreplay.replay.run_config import read_run_config
    from lbreplay.replay.spark_replay import execute, with_lines

    # the recording as test_audit_reproduces_the_leaders_decisions ingested and validated it (check), when it ran
    # in this session: its tables unchanged since a passed validation; else (this test alone) ingested here
    cluster = "real-sample"
    if not is_validated(spark, lake, cluster):
        ingest(spark, lake, SAMPLE, cluster)
        assert validate(spark, lake, cluster).passed
    window = window_from_flags(WINDOW_LEAD_IN_FROM, None)
    intakes = [read_run_config(None, str(SAMPLE / "broker.conf")) for _ in range(2)]
    intakes[0].replay["mode"], intakes[1].replay["mode"] = "observed", "closed-loop"
    specs = with_lines(spark, lake, cluster, window, intakes, quiet=True)  # as replay: the recording's line
    assert [(p["pulsarVersion"], o["pulsarLine"]["source"]) for p, o in specs] == [("4.0", "recording")] * 2
    execute(spark, lake, cluster, specs, run_ids=["real-window-audit", "real-window-what-if"], quiet=True,
            window=window)
    audit = audit_decisions(spark, lake, "real-window-audit")
    start = _ms(WINDOW_LEAD_IN_FROM)
    leader = [d for d in leader_decisions(SAMPLE) if d.at_ms >= start]
    assert len(leader) == 2
    assert [(d.action, d.bundle, d.source) for d in audit] == [(d.action, d.bundle, d.source) for d in leader]
    assert all(0 <= d.at_ms - a.at_ms < 500 for d, a in zip(leader, audit))
    dump = read_dumps(SAMPLE, "real")
    versions = [r for r in dump.rows["broker_load"] if r["ts"] >= datetime(2026, 11, 25, 20, 42, tzinfo=timezone.utc)]
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    elected = (dump.rows["leader_election"][0]["ts"] - epoch) // timedelta(milliseconds=1)
    last = max((r["ts"] - epoch) // timedelta(milliseconds=1) for r in versions)
    assert count_timer_minutes([elected], start, last) >= 10
    for run_id in ("real-window-audit", "real-window-what-if"):  # a closed loop starts at the window, no warm-up
        ticks = spark.read.format("delta").load(f"{lake}/broker_ticks").where(F.col("run_id") == run_id) \
            .agg(F.min("tick"), F.min("ts")).first()
        assert ticks[0] == 0 and ticks[1] >= datetime(2026, 11, 25, 20, 42)
        runs = spark.read.format("delta").load(f"{lake}/runs").where(F.col("run_id") == run_id).first()
        # the window's report versions and the leader's timer minutes (its election at 20:38:53.992: 20:42:53.992,
        # 20:43:53.992, ... up to the last version), no lead-in tick
        assert runs["ticks"] == len({r["ts"] for r in versions}) + count_timer_minutes([elected], start, last)
