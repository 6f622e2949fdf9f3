"""The replay engine's tick loop (pure NumPy, no Spark): closed loop, staleness, splits, determinism."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from lbreplay.kernel.naming import bundle_names, initial_boundaries
from lbreplay.replay.engine import ObservedTick, Replay, RunSpec, StaticInputs
from lbreplay.replay.load_model import CpuCalibration
from lbreplay.replay.modular_leader import ModularLeader
from lbreplay.replay.ring_load import IntervalLoad, PointLoad, bundle_span

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
LIMIT = np.array([800.0, 4096.0, 4096.0, 1e6, 1e6])
USAGE = np.array([10.0, 1024.0, 512.0, 0.0, 0.0])


def _static(n_brokers: int) -> StaticInputs:
    ids = [f"broker-{i}:8080" for i in range(n_brokers)]
    return StaticInputs(ids, ["tenant/ns"], CpuCalibration(np.full(n_brokers, 5.0), np.full(n_brokers, 0.004)))


def _ticks(n_brokers: int, owner: list[int], n_ticks: int, leave_at: int | None = None, per_bundle_rate: float = 2000.0):
    names = bundle_names("tenant/ns", initial_boundaries(len(owner)))
    vals = np.zeros((len(owner), 6))
    vals[:, 0] = vals[:, 1] = 5e6
    vals[:, 2] = vals[:, 3] = per_bundle_rate / 2
    vals[:, 4], vals[:, 5] = 10, 20
    for t in range(n_ticks):
        alive = np.ones(n_brokers, dtype=bool)
        if leave_at is not None and t >= leave_at:
            alive[-1] = False
        own = np.array([o if alive[o] else 0 for o in owner], dtype=np.int32)
        yield ObservedTick(t, T0 + 60_000 * t, alive, np.tile(USAGE, (n_brokers, 1)), np.tile(LIMIT, (n_brokers, 1)),
                           bundle_names=names, bundle_owner=own, bundle_values=vals)


def _run(config: dict, n_ticks: int = 40, seed: int = 1, leave_at: int | None = None):
    owner = [0] * 8 + [1, 2, 3, 4] * 2
    replay = Replay(RunSpec("r", "c", "closed-loop", config, seed), _static(5))
    results = [replay.step(obs) for obs in _ticks(5, owner, n_ticks, leave_at)]
    return replay, results


def test_ring_load_point_and_interval_sums() -> None:
    """Topic point masses sum per bundle range (last bundle closed at 0xffffffff); bundle-level load is
    apportioned by range overlap (uniform density)."""
    s, e = bundle_span(np.array([0, 0]), np.array([0, 0x7FFFFFFF]), np.array([0x7FFFFFFF, 0xFFFFFFFF]))
    pts = PointLoad(np.array([0x7FFFFFFE, 0x7FFFFFFF, 0xFFFFFFFF]), np.array([[1.0], [2.0], [4.0]]))
    assert pts.range_sum(s, e)[:, 0].tolist() == [1.0, 6.0]
    iv = IntervalLoad(np.array([0, 1 << 31]), np.array([1 << 31, 1 << 32]), np.array([[10.0], [20.0]]))
    quarter = iv.range_sum(np.array([0, 3 << 30]), np.array([1 << 30, 1 << 32]))[:, 0]
    assert quarter.tolist() == [5.0, 10.0]


def test_closed_loop_sheds_the_hot_broker_and_moves_ownership() -> None:
    """ThresholdShedder (default) unloads from broker-0 (8 of 16 bundles, 2.5x the mean) to the destinations
    LeastLongTermMessageRate picks; the replay's ownership follows, so broker-0's modelled load falls."""
    replay, results = _run({})
    unloads = [d for r in results for d in r.decisions if d.action == "UNLOAD"]
    assert unloads, "the hot broker must shed"
    assert all(d.source_broker == "broker-0:8080" and d.target_broker not in (None, "broker-0:8080") for d in unloads)
    assert unloads[0].tick == 1  # first shedding one interval after start (LoadSheddingTask)
    counts = np.bincount(replay.layout.owner, minlength=5)
    assert counts[0] == 8 - len(unloads)
    first, last = results[0].broker_tick, results[-1].broker_tick
    assert last.weighted_max_usage[0] < first.weighted_max_usage[0]
    moved = {d.bundle for d in unloads}
    closed = {iv.bundle for r in results for iv in r.closed}
    assert moved <= closed  # every moved bundle closed its interval on broker-0


def test_same_seed_same_decisions_different_seed_may_differ() -> None:
    """Deterministic: same inputs + config + seed -> identical decisions."""
    key = lambda rs: [(d.tick, d.action, d.bundle, d.source_broker, d.target_broker) for r in rs for d in r.decisions]  # noqa: E731
    assert key(_run({}, seed=7)[1]) == key(_run({}, seed=7)[1])


def test_broker_leave_orphans_are_assigned_to_live_brokers() -> None:
    """A broker that leaves releases its bundles; each is placed (selectBrokerForAssignment) on a live broker."""
    replay, results = _run({"loadBalancerSheddingEnabled": False}, n_ticks=15, leave_at=10)
    assigns = [d for r in results for d in r.decisions if d.action == "ASSIGN"]
    assert {d.tick for d in assigns} == {10}
    assert len(assigns) == 2  # broker-4 owned 2 bundles
    assert all(d.target_broker != "broker-4:8080" for d in assigns)
    assert not (replay.layout.owner == 4).any()
    assert not results[-1].broker_tick.alive[4]


def test_leader_refresh_forgets_the_ewma_of_a_broker_that_left() -> None:
    """``ModularLoadManagerImpl.updateAll`` -> ``cleanupDeadBrokersData`` -> ``ThresholdShedder.onActiveBrokersChange``:
    once broker-4 has left, the leader's EWMA map no longer holds it (it kept it before the kernel's leader loop
    made that call)."""
    replay, _ = _run({"loadBalancerSheddingEnabled": True}, n_ticks=9)
    leader = replay.leader
    assert isinstance(leader, ModularLeader)
    assert "broker-4:8080" in leader.manager.shedder.get_state()["brokerAvgResourceUsage"]
    replay, _ = _run({"loadBalancerSheddingEnabled": True}, n_ticks=15, leave_at=10)
    leader = replay.leader
    assert isinstance(leader, ModularLeader)
    assert sorted(leader.manager.shedder.get_state()["brokerAvgResourceUsage"]) == [
        f"broker-{i}:8080" for i in range(4)]


def test_split_repartitions_topic_traffic() -> None:
    """A bundle whose long-term msg rate exceeds loadBalancerNamespaceBundleMaxMsgRate splits at
    lower + (upper-lower)//2 (range_equally_divide) and its topics' traffic follows the new layout."""
    topics = [f"persistent://tenant/ns/t{i}" for i in range(400)]
    hashes = np.array([zlib.crc32(t.encode()) for t in topics], dtype=np.int64)
    static = _static(3)
    names = bundle_names("tenant/ns", initial_boundaries(2))
    rates = np.where(hashes < 0x80000000, 100.0, 1.0)  # bundle 0 hot: ~200 topics x 100 msg/s in
    tv = np.zeros((len(topics), 6))
    tv[:, 2] = rates
    tv[:, 3] = rates
    tv[:, 0] = tv[:, 1] = 1000.0
    tv[:, 5] = 1.0
    conf = {"loadBalancerNamespaceBundleMaxMsgRate": 30000, "loadBalancerSheddingEnabled": False}
    replay = Replay(RunSpec("r", "c", "closed-loop", conf, 1), static)
    splits = []
    for t in range(5):
        obs = ObservedTick(t, T0 + 60_000 * t, np.ones(3, dtype=bool), np.tile(USAGE, (3, 1)), np.tile(LIMIT, (3, 1)),
                           bundle_names=names, bundle_owner=np.array([0, 1], dtype=np.int32),
                           bundle_values=np.zeros((2, 6)), topic_values=tv,
                           topic_positions=hashes)  # namespace index 0: global position = hash
        splits += [d for d in replay.step(obs).decisions if d.action == "SPLIT"]
    assert [d.bundle for d in splits] == ["tenant/ns/0x00000000_0x80000000"]
    assert splits[0].child_bundles == ["tenant/ns/0x00000000_0x40000000", "tenant/ns/0x40000000_0x80000000"]
    lay = replay.layout
    assert sorted(lay.names) == sorted(splits[0].child_bundles + ["tenant/ns/0x80000000_0xffffffff"])
    vals = replay.bundle_values(obs, lay)
    for name, v in zip(lay.names, vals):
        _, lo, hi = name.rpartition("/")[0], *[int(x, 16) for x in name.rpartition("/")[2].split("_")]
        inside = (hashes >= lo) & ((hashes < hi) | (hi == 0xFFFFFFFF))
        assert v[2] == rates[inside].sum()
        assert v[5] == inside.sum()


def test_extensible_transfer_shedder_transfers_after_hit_count() -> None:
    """Extensible load manager: TransferShedder needs loadBalancerSheddingConditionHitCountThreshold (3) + 1
    consecutive unbalanced cycles (first cycle one interval after start: ticks 1..4), then TRANSFERs bundles from
    the most loaded broker (broker-0) to the least loaded, with the target broker as destination."""
    conf = {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
            "loadBalancerLoadSheddingStrategy": "TransferShedder", "loadBalancerBrokerLoadTargetStd": 0.05}
    owner = [0] * 8 + [1, 2, 3, 4] * 2
    replay = Replay(RunSpec("r", "c", "closed-loop", conf, 1), _static(5))
    results = [replay.step(obs) for obs in _ticks(5, owner, 8)]
    moves = [d for r in results for d in r.decisions if d.action in ("TRANSFER", "UNLOAD")]
    assert moves and {d.tick for d in moves} == {4}
    assert all(d.action == "TRANSFER" and d.target_broker for d in moves)
    assert any(d.source_broker == "broker-0:8080" for d in moves)
    assert replay.strategy_name == "TransferShedder"


def test_calibration_fits_per_broker_and_falls_back_when_ill_determined() -> None:
    """Load model calibration: brokers with spread-out msg rates get their own least-squares fit (a 0.5x broker
    keeps twice the CPU per message); a broker seen at a nearly constant rate gets the fleet base and a slope
    through its own mean point instead of a wild extrapolating fit."""
    from lbreplay.replay.load_model import CpuCalibration

    rng = np.random.default_rng(0)
    xs = [rng.uniform(50_000, 100_000, 50), rng.uniform(50_000, 100_000, 50), np.full(20, 80_000.0) + rng.normal(0, 200, 20)]
    true = [(40.0, 0.004), (40.0, 0.008), (40.0, 0.004)]
    ys = [a + b * x for (a, b), x in zip(true, xs)]
    ys[2] = ys[2] + rng.normal(0, 5, 20)  # noise dominates the tiny spread: its own fit is meaningless
    sums = [np.array([len(x) for x in xs])] + [np.array(v) for v in (
        [x.sum() for x in xs], [y.sum() for y in ys], [(x * x).sum() for x in xs], [(x * y).sum() for x, y in zip(xs, ys)])]
    cal = CpuCalibration.from_sums(*sums)
    assert np.allclose(cal.cpu_base[:2], 40.0) and np.allclose(cal.cpu_per_msg[:2], [0.004, 0.008])
    assert cal.cpu_base[2] == pytest.approx(40.0, rel=1e-6)
    assert cal.cpu_base[2] + cal.cpu_per_msg[2] * xs[2].mean() == pytest.approx(ys[2].mean(), rel=1e-9)


EXTENSIBLE = {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
              "loadBalancerLoadSheddingStrategy": "TransferShedder", "loadBalancerBrokerLoadTargetStd": 0.05}


def _modelled_ticks(static: StaticInputs, owner: list[int], n_ticks: int):
    """Ticks whose observed usage is exactly what the closed loop models for the observed ownership (cpu from the
    calibration, bandwidth from the throughput, memory as observed) and whose reports were all written at tick 0
    (``lastUpdate`` never changes again; the 10 % / 15 min rule writes nothing new either): the closed loop and the
    audit then see the same state until the first decision is applied."""
    from lbreplay.replay.load_model import model_usage

    n = len(static.broker_ids)
    for obs in _ticks(n, owner, n_ticks):
        tot = np.zeros((n, 6))
        np.add.at(tot, obs.bundle_owner, obs.bundle_values)
        obs.usage = model_usage(static.calibration, tot[:, 2] + tot[:, 3], tot[:, 0], tot[:, 1], obs.usage)
        obs.last_update = np.full(n, T0, dtype=np.int64)
        yield obs


@pytest.mark.parametrize("config", [{}, EXTENSIBLE], ids=["modular-threshold", "extensible-transfer"])
def test_observed_tick_decides_like_a_closed_loop_tick_on_the_same_state(config: dict) -> None:
    """An audit (observed mode) runs the same leader as the what-if: on the same observed state, up to the first
    decision (which only the closed loop applies), both decide the same unloads/transfers. For TransferShedder
    configs this is the extensible load manager (UnloadScheduler), not the modular one."""
    owner = [0] * 8 + [1, 2, 3, 4] * 2
    static = _static(5)
    key = lambda d: (d.tick, d.seq, d.action, d.bundle, d.source_broker, d.target_broker, d.strategy, d.reason)  # noqa: E731
    decided = {}
    for mode in ("closed-loop", "observed"):
        replay = Replay(RunSpec("r", "c", mode, config, 1), static)
        decided[mode] = [d for obs in _modelled_ticks(static, owner, 8) for d in replay.step(obs).decisions]
    first = min(d.tick for d in decided["closed-loop"])
    closed = [key(d) for d in decided["closed-loop"] if d.tick <= first]
    observed = [key(d) for d in decided["observed"] if d.tick <= first]
    assert closed and closed == observed
    expected = {"TRANSFER"} if config else {"UNLOAD"}
    assert {k[2] for k in closed} == expected
    assert {k[6] for k in closed} == ({"TransferShedder"} if config else {"ThresholdShedder"})
    assert any(k[4] == "broker-0:8080" for k in closed)  # the hot broker sheds
    assert not any(d.action == "ASSIGN" for d in decided["observed"])  # an audit applies nothing


def _recorded_ticks(static: StaticInputs, owner: list[int], n_ticks: int, ema: list[float],
                    tombstoned: int | None = None):
    """An extensible recording's held versions: every broker reports the same usage, but the BrokerLoadData it
    published (``ObservedTick.broker_meta``) says ``ema``; each broker's top bundles list is the bundles it owns.
    ``tombstoned``: that broker's entry is removed (its ``updated_at_ms`` NaN) at every tick."""
    from lbreplay.replay.stream_manifest import RECORDED_LOAD_DATA

    n = len(static.broker_ids)
    for obs in _ticks(n, owner, n_ticks):
        meta = {name: np.zeros(n) for name in RECORDED_LOAD_DATA}
        meta["weighted_max_ema"] = np.array(ema)
        meta["updated_at_ms"] = np.full(n, float(obs.ts_ms))
        meta["msg_throughput_in"] = np.bincount(obs.bundle_owner, obs.bundle_values[:, 0], minlength=n)
        if tombstoned is not None:
            meta["updated_at_ms"][tombstoned] = np.nan
        obs.broker_meta = meta
        obs.last_update = np.full(n, obs.ts_ms, dtype=np.int64)
        obs.listings = (obs.bundle_owner.astype(np.int64), np.arange(len(owner), dtype=np.int64), obs.bundle_values)
        yield obs


@pytest.mark.parametrize("tombstoned", [None, 2], ids=["published", "tombstoned"])
def test_an_extensible_audit_decides_on_the_published_load_data(tombstoned: int | None) -> None:
    """Audit of an extensible recording: TransferShedder reads each broker's BrokerLoadData as published (its
    ``weightedMaxEMA``), not a load rebuilt from the usage (equal here, which would shed nothing); it transfers
    from broker-0 (published 0.9) after the hit count, to the least loaded. A broker whose entry is tombstoned
    (``BrokerLoadDataReporter.tombstone``) has no load data: every run skips (``NoLoadData``), nothing moves."""
    owner = [0] * 8 + [1, 2, 3, 4] * 2
    static = _static(5)
    replay = Replay(RunSpec("r", "c", "observed", EXTENSIBLE, 1), static)
    ema = [0.9, 0.1, 0.2, 0.3, 0.15]
    decided = [d for obs in _recorded_ticks(static, owner, 8, ema, tombstoned) for d in replay.step(obs).decisions]
    if tombstoned is not None:
        assert decided == []
        return
    assert decided and {d.tick for d in decided} == {4}
    assert {(d.action, d.source_broker, d.target_broker) for d in decided} == {
        ("TRANSFER", "broker-0:8080", "broker-1:8080")}
    rebuilt = Replay(RunSpec("r", "c", "observed", EXTENSIBLE, 1), static)  # the same ticks, no recorded load data
    plain = (dataclasses.replace(obs, broker_meta={}) for obs in _recorded_ticks(static, owner, 8, ema))
    assert [d for obs in plain for d in rebuilt.step(obs).decisions] == []


def test_finest_keeps_split_children_over_their_parent() -> None:
    """A held view listing a split parent (an older report) beside its children keeps the children, also when a
    child without topics is in no report; disjoint ranges keep all."""
    from lbreplay.replay.ring_load import finest

    start = np.array([0, 0, 8, 16, 8], dtype=np.int64)
    end = np.array([16, 8, 16, 32, 12], dtype=np.int64)  # [0,16) holds [0,8) and [8,16); [8,16) holds [8,12)
    assert finest(start, end).tolist() == [False, True, False, True, True]
    assert finest(start[[1, 2, 3]], end[[1, 2, 3]]).all()


def test_recorded_usage_is_the_recording_where_the_traffic_is_and_follows_moved_traffic() -> None:
    """A recording's closed loop: a broker holding what its report lists has its recorded usage; a bundle of
    100 msg/s and 1000 B/s moved from broker 0 to 1 moves cpu by the fitted slope and bandwidth by the recorded
    bandwidth per byte (Kbit/s), never below 0."""
    from lbreplay.replay.load_model import recorded_usage

    calib = CpuCalibration(np.array([5.0, 5.0]), np.array([0.01, 0.02]), np.array([0.001, 0.002]), np.array([0.0, 0.0]))
    recorded = np.array([[30.0, 100.0, 8.0, 4.0, 0.0], [0.5, 100.0, 8.0, 1.0, 0.0]])
    held = np.array([[1000.0, 0, 100.0, 0, 1, 1], [0, 0, 0, 0, 0, 0]])
    assert np.allclose(recorded_usage(calib, held, held, recorded), recorded)
    moved = recorded_usage(calib, held[::-1].copy(), held, recorded)
    assert np.allclose(moved[:, 0], [29.0, 2.5]) and np.allclose(moved[:, 3], [3.0, 3.0])
    assert (moved >= 0).all() and np.allclose(moved[:, 1:3], recorded[:, 1:3])
