"""The per-run comparison of the leader's logged decisions with an audit's (``lbreplay.live_audit.comparison``)."""

from __future__ import annotations

from lbreplay.collect.leader_log import Decision, parse_leader_log
from lbreplay.live_audit.comparison import compare
from tests.collect.test_leader_log import LOG, T0


def test_compare_per_tick_same_bundle_same_source() -> None:
    leader = parse_leader_log(LOG.splitlines())
    tick = T0 - 100  # the audit's tick: the leader's run logs its decisions a little after it
    audit = [
        Decision(tick, "UNLOAD", "lb/hot/0x60000000_0x70000000", "127.0.0.1:18081", "127.0.0.1:18082"),  # target differs: still a match
        Decision(tick + 60_000, "SPLIT", "lb/hot/0x10000000_0x20000000", "127.0.0.1:18081"),  # leader's log names no source
        Decision(tick + 120_000, "UNLOAD", "lb/hot/0x00000000_0x10000000", "127.0.0.1:18083"),  # one tick late
        Decision(tick, "UNLOAD", "lb/hot/0x90000000_0xa0000000", "127.0.0.1:18081"),  # never made by the leader
    ]
    cmp = compare(leader, audit)
    assert len(cmp.matched) == 2 and cmp.agreement == 2 / 3
    assert [d.bundle for d in cmp.leader_only] == ["lb/hot/0x00000000_0x10000000"]
    assert sorted(d.bundle for d in cmp.audit_only) == ["lb/hot/0x00000000_0x10000000", "lb/hot/0x90000000_0xa0000000"]
    assert [(d.bundle, a.tick_ms - d.tick_ms) for d, a in cmp.near] == [("lb/hot/0x00000000_0x10000000", 120_000 - 60_000)]
    wrong_source = [Decision(tick, "UNLOAD", "lb/hot/0x60000000_0x70000000", "127.0.0.1:18083")]
    assert compare(leader[:1], wrong_source).matched == []
    assert "matched 2/3" in cmp.summary()


def test_a_split_check_across_a_minutes_end_is_one_tick() -> None:
    """A live run (2026-11-27 14:17:58): the report written at 14:17:58.609 started the leader's split check, whose
    first split call took 2 s, so it logged the next two splits at 14:18:00.857 and 14:18:01.064. The audit splits
    the three at the report's tick: one tick, across the minute's end. Decisions a minute apart stay apart."""
    t = 1795789078609  # 14:17:58.609
    leader = [Decision(t + 208, "SPLIT", "lb/hot/0x00000000_0x10000000", "127.0.0.1:18081"),
              Decision(t + 2_248, "SPLIT", "lb/hot/0xe0000000_0xf0000000", "127.0.0.1:18082"),
              Decision(t + 2_455, "SPLIT", "lb/hot/0x70000000_0x80000000", "127.0.0.1:18081")]
    audit = [Decision(t, d.action, d.bundle, d.source) for d in leader]
    cmp = compare(leader, audit)
    assert len(cmp.matched) == 3 and not cmp.leader_only and not cmp.audit_only
    late = [Decision(t + 60_000, d.action, d.bundle, d.source) for d in leader]
    assert compare(leader, late).matched == []
