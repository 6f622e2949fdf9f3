"""run_metrics sequential KPIs: moves, ping-pong, over-placement, time to balance (lbreplay.replay.metrics)."""

from __future__ import annotations

import numpy as np

from lbreplay.replay.engine import BrokerTick, Decision, TickResult
from lbreplay.replay.metrics import RunMetrics

IDS = ["a:8080", "b:8080", "c:8080"]


def _tick(tick: int, wmax: list[float], decisions: list[Decision], alive: list[bool] | None = None) -> TickResult:
    n = len(IDS)
    z = np.zeros(n)
    bt = BrokerTick(tick, tick * 60_000, np.zeros((n, 5)), z, np.array(wmax), z, z, z, z, z,
                    np.array(alive or [True] * n))
    return TickResult(bt, decisions, [], None)


def _d(tick: int, action: str, bundle: str, src: str | None, dst: str | None) -> Decision:
    return Decision(tick, tick * 60_000, 0, action, bundle, src, dst, None, "s", "r", {})


def test_moves_ping_pong_and_over_placement() -> None:
    """An UNLOAD without destination completed by an ASSIGN is one move; a bundle returning to the broker it left
    within 2 grace periods is a ping-pong; >= 3 bundles to one broker that then becomes the most loaded within
    5 ticks is an over-placement event."""
    m = RunMetrics(grace_minutes=30)
    m.add(_tick(0, [0.9, 0.2, 0.3], [_d(0, "UNLOAD", "x", "a:8080", None)]), IDS, {"x": 100.0})
    m.add(_tick(1, [0.8, 0.2, 0.3], [_d(1, "ASSIGN", "x", None, "b:8080")] +
                [_d(1, "UNLOAD", f"y{i}", "a:8080", "c:8080") for i in range(3)]), IDS, {"x": 100.0, "y0": 1.0, "y1": 1.0, "y2": 1.0})
    m.add(_tick(2, [0.5, 0.3, 0.7], [_d(2, "UNLOAD", "x", "b:8080", "a:8080")]), IDS, {"x": 100.0})
    rows = dict(m.rows())
    assert rows["bundles_moved"] == 5.0  # x a->b, y0..y2 a->c, x b->a
    assert rows["throughput_moved"] == 203.0
    assert rows["ping_pong_moves"] == 1.0  # x went back to a:8080 2 minutes after leaving it
    assert rows["over_placement_events"] == 1.0  # c:8080 got 3 at tick 1 and is the most loaded at tick 2
    assert rows["unloads"] == 5.0 and rows["assigns"] == 1.0


def test_a_kept_bundle_is_no_unload_and_no_move() -> None:
    """A KEEP row (doLoadShedding's placement chose the owner, "the same as the current owner broker": no unload)
    changes no KPI: the same figures with and without it."""
    def run(with_keep: bool) -> dict[str, float]:
        m = RunMetrics(grace_minutes=30)
        keep = [_d(0, "KEEP", f"k{i}", "a:8080", "a:8080") for i in range(3)] if with_keep else []
        m.add(_tick(0, [0.9, 0.2, 0.3], [_d(0, "UNLOAD", "x", "a:8080", "b:8080"), *keep]), IDS, {"x": 5.0, "k0": 7.0})
        m.add(_tick(1, [0.9, 0.2, 0.3], []), IDS, {})
        return dict(m.rows())

    assert run(True) == run(False)
    assert run(True)["unloads"] == 1.0 and run(True)["bundles_moved"] == 1.0


def test_time_to_balance_after_a_broker_leaves() -> None:
    """Minutes from a join/leave until the std of weighted max usage is back to at most
    max(mean std of the 10 ticks before, 0.05)."""
    m = RunMetrics(grace_minutes=30)
    for t in range(3):
        m.add(_tick(t, [0.5, 0.5, 0.5], []), IDS, {})
    m.add(_tick(3, [0.9, 0.3, 0.0], [], alive=[True, True, False]), IDS, {})  # c leaves: std 0.3
    m.add(_tick(4, [0.8, 0.4, 0.0], [], alive=[True, True, False]), IDS, {})  # std 0.2
    m.add(_tick(5, [0.62, 0.58, 0.0], [], alive=[True, True, False]), IDS, {})  # std 0.02 <= 0.05
    rows = dict(m.rows())
    assert rows["cluster_events"] == 1.0
    assert rows["time_to_balance_minutes_total"] == 2.0


def _history() -> list[tuple[TickResult, dict[str, float]]]:
    rng = np.random.default_rng(5)
    out = []
    for t in range(16):
        alive = [True, True, t < 6 or t > 10]  # c leaves at tick 6 and returns at tick 11
        wmax = [float(x) for x in rng.uniform(0, 1, 3)]
        ds = []
        if t % 3 == 0:
            ds.append(_d(t, "UNLOAD", f"x{t % 2}", IDS[t % 2], IDS[(t + 1) % 2]))
        if t % 4 == 1:
            ds += [_d(t, "UNLOAD", f"y{i}", "a:8080", "b:8080") for i in range(3)]
        out.append((_tick(t, wmax, ds, alive=alive), {"x0": 1.5, "x1": 2.5, "y0": 1.0, "y1": 1.0, "y2": 1.0}))
    return out


def test_audit_slices_count_what_the_whole_run_counts() -> None:
    """An audit slice replays its warm-up ticks first (state spanning ticks follows, nothing is counted): the
    counted KPIs of any split of the ticks add up to the whole run's, wherever the boundaries lie (here one right
    at the tick a broker leaves)."""
    history = _history()
    whole = RunMetrics(grace_minutes=1)
    for res, thr in history:
        whole.add(res, IDS, thr)
    for cut in (1, 6, 7, 11, 15):
        parts = []
        for lo, hi in ((0, cut), (cut, len(history))):
            m = RunMetrics(grace_minutes=1)
            for k, (res, thr) in enumerate(history[:hi]):
                m.add(res, IDS, thr, counting=k >= lo)
            parts.append(dict(m.rows(run_end=hi == len(history))))
        total = dict(whole.rows())
        for name in ("cluster_events", "time_to_balance_minutes_total", "bundles_moved", "ping_pong_moves",
                     "over_placement_events", "unloads", "throughput_moved"):
            assert parts[0][name] + parts[1][name] == total[name], (cut, name)
    assert dict(whole.rows())["cluster_events"] >= 1.0
