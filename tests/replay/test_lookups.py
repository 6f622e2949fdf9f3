"""The leader's logged lookups in an audit (``tick_stream.with_lookups``, ``ModularLeader._lookups``): each tick
carries the lookups logged since the previous one, and the leader places them in logged order on the LoadData the
previous tick left (``selectBrokerForAssignment``: preallocation, the strategy's state)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.lookup_check import RECORDED_LOOKUP, _first_listing, leader_broker, leader_lookups
from lbreplay.replay.records import ObservedTick
from lbreplay.replay.tick_stream import with_lookups
from tests.replay.recording import replay_results

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-round-robin-3.0"
B2 = "127.0.0.1:18082"


def _tick(ts: int) -> ObservedTick:
    return ObservedTick(0, ts, np.ones(1, dtype=bool), np.zeros((1, 5)), np.zeros((1, 5)))


def test_each_tick_gets_the_lookups_logged_since_the_previous_one() -> None:
    """Up to and including the tick's time; the first tick takes every earlier one; none after the last tick."""
    lookups = [[5, "a", None], [10, "b", "x:1"], [15, "c", None], [15, "d", None], [31, "e", None]]
    got = [obs.lookups for obs in with_lookups(iter([_tick(10), _tick(20), _tick(30)]), lookups)]
    assert got == [((5, "a", None), (10, "b", "x:1")), ((15, "c", None), (15, "d", None)), ()]


def test_the_3_0_audit_places_the_leaders_16_lookups_as_it_did() -> None:
    """The 3.0.7 RoundRobin leader's 16 start-up lookups: the audit places each (an ASSIGN, logged order) where the
    next report lists the bundle, so ``RoundRobinBrokerSelector``'s counter stands at 16 at the first unload (2
    candidates: index 16 % 2 = 0, 18082, the leader's destination). The decisions are those of the audit without
    them, and the closed loop ignores them."""
    ids, results = replay_results(SAMPLE, "observed", recorded_line=True, lookups=True)
    decisions = [d for r in results for d in r.decisions]
    assigns = [d for d in decisions if d.action == "ASSIGN"]
    assert len(assigns) == 16 and all(d.reason == RECORDED_LOOKUP and d.source_broker is None for d in assigns)
    rows = read_dumps(SAMPLE, SAMPLE.name).rows
    lines = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    listed = _first_listing(rows)
    expected = [(p.bundle, leader_broker(p, listed)[0]) for p in leader_lookups(lines, rows)]
    assert [(d.bundle, d.target_broker) for d in assigns] == expected
    assert [int(d.details["logged_at_ms"]) for d in assigns] == [p.at_ms for p in leader_lookups(lines, rows)]
    first_unload = next(i for i, d in enumerate(decisions) if d.action == "UNLOAD")
    assert sum(d.action == "ASSIGN" for d in decisions[:first_unload]) == 16
    assert (decisions[first_unload].bundle, decisions[first_unload].target_broker) == ("lb/hot/0x60000000_0x70000000", B2)
    _, without = replay_results(SAMPLE, "observed", recorded_line=True)
    key = [(d.tick, d.action, d.bundle, d.source_broker, d.target_broker) for d in decisions if d.action != "ASSIGN"]
    assert key == [(d.tick, d.action, d.bundle, d.source_broker, d.target_broker)
                   for r in without for d in r.decisions]
    closed = [[(d.action, d.bundle, d.target_broker) for r in replay_results(SAMPLE, "closed-loop", lookups=k)[1]
               for d in r.decisions] for k in (True, False)]
    assert closed[0] == closed[1] and closed[0]
