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


def test_a_destination_pulsar_drew_at_random_is_no_difference() -> None:
    """``LeastResourceUsageWithWeight.selectBroker`` draws with ``ThreadLocalRandom`` among its best brokers (every
    candidate when all are overloaded): a matched unload whose leader destination is in the audit's drawn set is a
    destination drawn; a leader-only unload the audit kept on the owner (KEEP, same bundle, source and run) by a draw
    holding the leader's destination is drawn; an audit-only unload drawn among brokers holding its own source is
    drawn. A KEEP of another source or another run, a draw without the leader's destination, or an audit unload
    without a draw counts nothing."""
    from lbreplay.live_audit.comparison import AuditDecision, destination_drawn

    a, b, c = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"
    t = 1_795_864_140_000
    x, y, z, w = (f"lb/hot/0x{i}0000000_0x{i + 1}0000000" for i in range(4))
    leader = [Decision(t + 500, "UNLOAD", x, c, a), Decision(t + 600, "UNLOAD", y, c, b),
              Decision(t + 700, "UNLOAD", z, c, b), Decision(t + 800, "UNLOAD", w, c, a)]
    audit = [AuditDecision(t, "UNLOAD", x, c, b, drawn_among=(a, b, c)),  # matched, destination drawn
             AuditDecision(t, "KEEP", y, c, c, drawn_among=(b, c)),  # leader-only y: drawn
             AuditDecision(t, "KEEP", z, c, c, drawn_among=(a, c)),  # leader-only z: the draw lacks b
             AuditDecision(t - 60_000, "KEEP", w, c, c, drawn_among=(a, c)),  # w: another run
             AuditDecision(t, "UNLOAD", "lb/hot/0xe0000000_0xf0000000", b, a, drawn_among=(a, b)),  # drawn
             AuditDecision(t, "UNLOAD", "lb/hot/0xf0000000_0xffffffff", b, a)]  # no draw
    cmp = compare(leader, audit)
    (ld, au), = cmp.matched
    assert destination_drawn(ld, au) and not destination_drawn(ld, AuditDecision(t, "UNLOAD", x, c, b))
    assert [d.bundle for d in cmp.leader_only] == [y, z, w]
    assert [(d.bundle, k.action) for d, k in cmp.audit_kept] == [(y, "KEEP"), (z, "KEEP")]
    assert [d.bundle for d, _ in cmp.leader_drawn] == [y]
    assert [d.bundle for d in cmp.audit_drawn] == ["lb/hot/0xe0000000_0xf0000000"]
    assert sorted(d.bundle for d in cmp.audit_only) == ["lb/hot/0xe0000000_0xf0000000", "lb/hot/0xf0000000_0xffffffff"]
    assert (cmp.agreement, cmp.agreement_with_draws) == (1 / 4, 2 / 4)
    assert "1 more drawn at random (50 % counting draws)" in cmp.summary()
