"""Run KPIs (``run_metrics``), accumulated tick by tick with bounded state.

* unloads, transfers, splits, assigns, bundles moved, throughput moved (bytes/s of the moved bundles);
* load spread over alive brokers of the weighted max usage: max-min and max/mean, and its std; each as
  mean, p95 and final over ticks; the peak usage (the highest weighted max usage of any alive broker at any tick);
  the spread per minute of the run (:meth:`RunMetrics.spread_curve`, the what-if comparison's curve);
* recovery after joins/leaves (``recovery_minutes`` in run_metrics): minutes from each broker join/leave until
  the std first returns to at most max(the mean std of the 10 ticks before the event, 0.05), mean over events
  (unbalanced at the end: counted until the last tick). The time to balance by the config's own target is
  computed from ``broker_ticks`` (``report.balance``);
* ping-pong moves: a bundle moved back to a broker it left within 2 grace periods
  (``loadBalancerSheddingGracePeriodMinutes``);
* over-placement events: one broker receiving >= 3 bundles in one tick and becoming the most loaded alive
  broker within the next 5 ticks;
* calibration error: mean absolute percentage error of modelled vs observed CPU over the ticks where the
  replay's ownership equals the observed one.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from lbreplay.replay.records import TickResult


class RunMetrics:
    def __init__(self, grace_minutes: float):
        self.grace_ms = grace_minutes * 60_000
        self.counts: Counter[str] = Counter()
        self.moved_throughput = 0.0
        self.std: list[float] = []
        self.spread: list[float] = []
        self.ratio: list[float] = []
        self.peak = 0.0  # the highest weighted max usage over alive brokers at any tick
        self.spread_ts: list[int] = []  # the tick time of each ``spread`` entry
        self.prev_alive: np.ndarray | None = None
        self.recent_std: deque[float] = deque(maxlen=11)  # the last ticks' std, warm-up included
        self.open_events: list[tuple[int, float]] = []  # (event ts, target std)
        self.balance_minutes: list[float] = []
        self.left: dict[str, tuple[str, int]] = {}  # bundle -> (broker it left, ts)
        self.unplaced: dict[str, str] = {}  # bundle unloaded without destination -> broker it left
        self.pending_over: deque[tuple[int, str, int]] = deque()  # (tick placed, broker, ticks left)
        self.over_placement = 0
        self.cal_err_sum = 0.0
        self.cal_err_n = 0
        self.last_ts = 0
        self.ticks = 0

    def add(self, res: TickResult, broker_ids: list[str], bundle_throughput: dict[str, float],
            counting: bool = True) -> None:
        """One tick. With ``counting`` False (an audit slice's warm-up) only the state that spans ticks follows
        (alive set, recent std, open events, moves, pending over-placements), so a slice counts exactly what the
        whole run counts for its ticks, wherever its boundaries lie."""
        bt = res.broker_tick
        alive = bt.alive
        w = bt.weighted_max_usage[alive]
        std = float(np.std(w)) if w.size else 0.0
        self.recent_std.append(std)
        if counting:
            self.ticks += 1
            self.last_ts = bt.ts_ms
            self.std.append(std)
            if w.size:
                self.spread.append(float(w.max() - w.min()))
                self.spread_ts.append(bt.ts_ms)
                self.peak = max(self.peak, float(w.max()))
                mean = float(w.mean())
                self.ratio.append(float(w.max() / mean) if mean > 0 else 1.0)
            if res.calibration_error is not None:
                self.cal_err_sum += res.calibration_error
                self.cal_err_n += 1
        # cluster events: join / leave
        if self.prev_alive is not None and not np.array_equal(self.prev_alive, alive):
            before = list(self.recent_std)[:-1][-10:] or [std]
            self.open_events.append((bt.ts_ms, max(float(np.mean(before)), 0.05)))
        self.prev_alive = alive.copy()
        still = []
        for ts, target in self.open_events:
            if std <= target and bt.ts_ms > ts:
                if counting:
                    self.balance_minutes.append((bt.ts_ms - ts) / 60_000)
            else:
                still.append((ts, target))
        self.open_events = still
        # decisions
        received: Counter[str] = Counter()
        for d in res.decisions:
            if counting:
                self.counts[d.action] += 1
            source = d.source_broker
            if d.action == "UNLOAD" and not d.target_broker and source:
                self.unplaced[d.bundle] = source  # placed later by an ASSIGN: that completes the move
            if d.action == "ASSIGN" and not source:
                source = self.unplaced.pop(d.bundle, None)
            if d.action in ("UNLOAD", "TRANSFER", "ASSIGN") and d.target_broker:
                if source and source != d.target_broker:
                    back = self.left.get(d.bundle)
                    if counting:
                        self.counts["bundles_moved"] += 1
                        self.moved_throughput += bundle_throughput.get(d.bundle, 0.0)
                        if back and back[0] == d.target_broker and bt.ts_ms - back[1] <= 2 * self.grace_ms:
                            self.counts["ping_pong_moves"] += 1
                    self.left[d.bundle] = (source, bt.ts_ms)
                received[d.target_broker] += 1
        for broker, n in received.items():
            if n >= 3:
                self.pending_over.append((bt.tick, broker, 6))
        # over-placement: within 5 ticks the receiver becomes the most loaded alive broker
        if w.size:
            top = broker_ids[int(np.flatnonzero(alive)[int(np.argmax(w))])]
            keep: deque[tuple[int, str, int]] = deque()
            for tick, broker, left in self.pending_over:
                if broker == top and bt.tick > tick:
                    if counting:
                        self.over_placement += 1
                elif left > 1:
                    keep.append((tick, broker, left - 1))
            self.pending_over = keep

    def rows(self, run_end: bool = True) -> list[tuple[str, float]]:
        """The sequential metrics (counts, moves, ping-pong, over-placement, time to balance, calibration);
        additive across tick slices (an event still open where a slice ends is left to the slice that sees it
        close or that ends the run). The distribution metrics come from ``distribution_rows`` / Spark."""
        if run_end:
            for ts, _ in self.open_events:  # never balanced again: count until the end
                self.balance_minutes.append((self.last_ts - ts) / 60_000)
            self.open_events = []
        out = [
            ("unloads", float(self.counts["UNLOAD"] + self.counts["TRANSFER"])),
            ("transfers", float(self.counts["TRANSFER"])),
            ("splits", float(self.counts["SPLIT"])),
            ("assigns", float(self.counts["ASSIGN"])),
            ("bundles_moved", float(self.counts["bundles_moved"])),
            ("throughput_moved", self.moved_throughput),
            ("ping_pong_moves", float(self.counts["ping_pong_moves"])),
            ("over_placement_events", float(self.over_placement)),
            ("time_to_balance_minutes_total", float(np.sum(self.balance_minutes)) if self.balance_minutes else 0.0),
            ("cluster_events", float(len(self.balance_minutes))),
            ("calibration_error_total", self.cal_err_sum),
            ("calibration_ticks", float(self.cal_err_n)),
        ]
        return out

    def distribution_rows(self) -> list[tuple[str, float]]:
        """Spread/std mean, p95, final over this object's ticks (Spark computes the same over broker_ticks)."""

        def stats(name: str, xs: list[float]) -> list[tuple[str, float]]:
            if not xs:
                return [(f"{name}_mean", 0.0), (f"{name}_p95", 0.0), (f"{name}_final", 0.0)]
            arr = np.array(xs)
            return [(f"{name}_mean", float(arr.mean())), (f"{name}_p95", float(np.percentile(arr, 95))),
                    (f"{name}_final", float(arr[-1]))]

        peak = [("peak_usage", self.peak)]
        return stats("load_std", self.std) + stats("load_spread", self.spread) + stats("load_max_over_mean", self.ratio) \
            + peak

    def spread_curve(self) -> list[float]:
        """The max − min weighted max usage per minute of the run (minute m: the mean over the ticks in
        [first tick + m min, + (m + 1) min); a minute without a tick repeats the last one's)."""
        return spread_per_minute(self.spread_ts, self.spread)


def spread_per_minute(ts_ms: list[int], spreads: list[float]) -> list[float]:
    """Per-tick spreads (tick times ``ts_ms``, epoch ms) -> one value per minute from the first tick: the mean of
    the minute's ticks, a minute without a tick carrying the previous minute's value."""
    if not ts_ms:
        return []
    t0 = min(ts_ms)
    minute = [(t - t0) // 60_000 for t in ts_ms]
    sums, counts = np.zeros(max(minute) + 1), np.zeros(max(minute) + 1)
    np.add.at(sums, minute, spreads)
    np.add.at(counts, minute, 1)
    out: list[float] = []
    for s, n in zip(sums.tolist(), counts.tolist()):
        out.append(s / n if n else (out[-1] if out else 0.0))
    return out
