"""Brokers that leave: ``collect``'s ``absent`` record (a ``/loadbalance/brokers/<broker>`` znode deleted) -> ingest's
``broker_departure`` row -> the audit drops the broker at that moment, as ``ModularLoadManagerImpl.updateAll`` does
(``updateAllBrokerData`` loses its report, ``cleanupDeadBrokersData`` its strategy state), and a broker that
writes a report again starts afresh.

The recording is the committed ``real-modular-split-children`` sample with broker 18081 killed right after its
11:17:25 report: its later versions removed and the deletion recorded, as ``collect`` records it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from lbreplay.lake.dump_tree import tick_of
from lbreplay.lake.ingest import read_dumps
from lbreplay.replay.records import ObservedTick

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-split-children"
KILLED = "127.0.0.1:18081"
BROKERS = ("127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083")
VERSIONS = Path("collect") / "metadata-versions.jsonl"


def _killed_at(sample: Path) -> int:
    """500 ms after the killed broker's 11:17:25 report (its sixth version)."""
    from lbreplay.live_audit.leader_view import recorded_versions

    return recorded_versions(sample, "brokers")[KILLED][5].mtime + 500


def _killed_copy(tmp_path: Path, record_departure: bool = True) -> tuple[Path, int]:
    """The sample with KILLED gone at ``_killed_at``: its later report versions removed and (``record_departure``)
    the znode's deletion appended as ``collect`` writes it."""
    dump = tmp_path / "killed"
    shutil.copytree(SAMPLE, dump)
    gone = _killed_at(SAMPLE)
    lines = []
    for line in (dump / VERSIONS).read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("path") == f"/loadbalance/brokers/{KILLED}" and rec.get("mtime", 0) > gone:
            (dump / rec["file"]).unlink()
            continue
        lines.append(line)
    if record_departure:
        lines.append(json.dumps({"at": gone, "broker": KILLED, "event": "absent",
                                 "path": f"/loadbalance/brokers/{KILLED}"}))
    (dump / VERSIONS).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dump, gone


def _audit(dump: Path, departures: bool = True) -> tuple[Any, list[ObservedTick], list[Any]]:
    """The audit's engine over the recording's report versions on its leader's timer (as ``replay --mode
    observed`` streams them: ``tick_stream.leader_held_view``): (the replay, its ticks,
    its decisions)."""
    from lbreplay.kernel.config import parse_broker_conf, typed_overrides
    from lbreplay.live_audit.leader_view import recorded_versions
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import departure_rows, leader_held_view
    from tests.live_audit.test_real_sample import _version_ticks

    conf = typed_overrides(parse_broker_conf((dump / "broker.conf").read_text(encoding="utf-8")), path="broker.conf")
    conf["pulsarVersion"] = "4.0"  # the line the sample's brokers report
    rows = read_dumps(dump, "killed").rows
    brokers = recorded_versions(dump, "brokers")
    ids = sorted(brokers)
    replay = Replay(RunSpec("killed", "killed", "observed", conf),
                    StaticInputs(ids, ["lb/hot"], CpuCalibration(np.zeros(len(ids)), np.zeros(len(ids)))))
    hold = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    elected = sorted((int(r["ts"].timestamp() * 1000), r["broker"]) for r in rows["leader_election"])
    runs = sorted(int(r["ts"].timestamp() * 1000) for r in rows["shedding_run"])
    gone = departure_rows(((int(r["ts"].timestamp() * 1000), r["broker"]) for r in rows["broker_departure"]), ids)
    seen = list(leader_held_view(iter(_version_ticks(brokers, ids)), len(ids), hold,
                                 elections_ms=[t for t, _ in elected], leader_brokers=[b for _, b in elected],
                                 runs_ms=runs, departures=gone if departures else None))
    return replay, seen, [d for obs in seen for d in replay.step(obs).decisions]


def test_ingest_turns_the_absent_record_into_the_brokers_departure(tmp_path: Path) -> None:
    dump, gone = _killed_copy(tmp_path)
    assert read_dumps(SAMPLE, "s").rows["broker_departure"] == []
    assert read_dumps(dump, "killed").rows["broker_departure"] == [
        {"cluster": "killed", "ts": tick_of(gone), "broker": KILLED}]


def _first_run_after(replay: Any, ticks: list[ObservedTick], gone: int) -> tuple[list[str], set[str]]:
    """Step a fresh replay of the same run up to its first shedding run after ``gone``: the brokers of the leader's
    LoadData then and those its ThresholdShedder keeps an average for."""
    from lbreplay.replay.engine import Replay

    again = Replay(replay.run, replay.static)
    for t in ticks:
        again.step(t)
        if t.ts_ms >= gone and t.timer_minute:
            break
    return list(again.leader.ld.brokers.ids), set(again.leader.manager.shedder.get_state()["brokerAvgResourceUsage"])


def test_the_audit_drops_the_dead_broker_at_its_departure(tmp_path: Path) -> None:
    """Broker 18081 killed at 11:17:25.950. Without the departure the audit holds its last report until it is older
    than maxInterval + 1 minute: at the 11:18:20 run the dead broker is in the leader's view and its strategy, and
    the unload goes to it. With the departure it is gone from the next tick on: not in the leader's LoadData, not in
    ThresholdShedder's averages (``onActiveBrokersChange``), no decision names it (at 11:18:20 18082 and 18083 are
    left: 18083 is above the average but its one other broker is no destination, so nothing is unloaded), and
    every decision before the deletion is the unmodified audit's."""
    cut, _ = _killed_copy(tmp_path / "cut", record_departure=False)
    dump, gone = _killed_copy(tmp_path / "rec")
    replay, ticks, blind = _audit(cut)
    assert [(d.bundle, d.source_broker, d.target_broker) for d in blind if d.ts_ms >= gone] == [
        ("lb/hot/0x70000000_0x74000000", "127.0.0.1:18083", KILLED)]
    assert _first_run_after(replay, ticks, gone) == (sorted(BROKERS), set(BROKERS))

    replay, ticks, decisions = _audit(dump)
    row = replay.static.broker_ids.index(KILLED)
    assert all(not t.alive[row] for t in ticks if t.ts_ms >= gone)
    alive = sorted(set(BROKERS) - {KILLED})
    assert _first_run_after(replay, ticks, gone) == (alive, set(alive))
    # selectBroker chose the owner 18083 (doLoadShedding: "the same as the current owner"): a KEEP, no unload
    assert [(d.action, d.bundle, d.source_broker, d.drawn_among) for d in decisions if d.ts_ms >= gone] == [
        ("KEEP", "lb/hot/0x70000000_0x74000000", "127.0.0.1:18083", None)]
    assert all(KILLED not in (d.source_broker, d.target_broker) for d in decisions if d.ts_ms >= gone)
    _, _, full = _audit(SAMPLE)
    before = [(d.action, d.bundle, d.source_broker, d.target_broker, d.ts_ms) for d in full if d.ts_ms < gone]
    assert [(d.action, d.bundle, d.source_broker, d.target_broker, d.ts_ms) for d in decisions if d.ts_ms < gone] == before
    # the unmodified audit's 6 splits and 2 unloads before the kill, and a planned bundle its placement kept
    assert sorted(a for a, *_ in before) == ["KEEP"] + ["SPLIT"] * 6 + ["UNLOAD"] * 2


def _tick(ts: int, alive: list[bool], last_update: list[int], listing: list[tuple[int, str]]) -> ObservedTick:
    names = sorted({n for _, n in listing})
    brokers = np.array([b for b, _ in listing], dtype=np.int64)
    idx = np.array([names.index(n) for _, n in listing], dtype=np.int64)
    vals = np.arange(len(listing) * 6, dtype=np.float64).reshape(-1, 6)
    owner = np.array([max(b for b, n in listing if n == name) for name in names], dtype=np.int32)
    return ObservedTick(0, ts, np.array(alive), np.zeros((2, 5)), np.zeros((2, 5)), bundle_names=names,
                        bundle_owner=owner, bundle_values=vals[[max(i for i, (_, n) in enumerate(listing) if n == m)
                                                                for m in names]],
                        last_update=np.array(last_update, dtype=np.int64), listings=(brokers, idx, vals))


def test_without_departed_until_the_broker_writes_again() -> None:
    """Broker 1 leaves at 10: at 12 its report and listings are gone (the bundle both listed is broker 0's alone,
    the one only it listed is gone); a report it writes at 20 (a new node) holds it again."""
    from lbreplay.replay.tick_stream import without_departed

    listing = [(0, "ns/a"), (0, "ns/b"), (1, "ns/b"), (1, "ns/c")]
    ticks = [_tick(5, [True, True], [4, 5], listing), _tick(12, [True, True], [11, 5], listing),
             _tick(20, [True, True], [11, 20], listing)]
    out = list(without_departed(iter(ticks), [[10, 1]]))
    assert out[0] is ticks[0]
    assert out[1].alive.tolist() == [True, False]
    assert out[1].bundle_names == ["ns/a", "ns/b"] and out[1].bundle_owner.tolist() == [0, 0]
    assert out[1].listings is not None and out[1].listings[0].tolist() == [0, 0]
    assert out[1].bundle_values.tolist() == ticks[1].listings[2][[0, 1]].tolist()  # broker 0's own stats of ns/b
    assert out[2] is ticks[2] and out[2].alive.tolist() == [True, True]
