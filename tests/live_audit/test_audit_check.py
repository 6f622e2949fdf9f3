"""``live_audit.audit_check``: what Pulsar's debug lines print, the verdict, the run lags and the shedding timer."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import java_2f, load_stats
from tests.collect.test_leader_log import _shedder_line


def test_load_stats_print_as_transfer_shedder_does() -> None:
    """``TransferShedder.LoadStats``: sum, sqSum, avg = sum / n, std = Math.sqrt(sqSum / n - avg * avg), each as
    ``%.2f``; brokers sorted by load. Three equal loads leave a variance that rounds below zero: Java's sqrt is NaN
    and ``String.format`` prints ``NaN``."""
    stats, order = load_stats({"b:1": 0.3908571, "a:1": 0.17473135, "c:1": 0.21947726})
    assert stats == {"sum": "0.79", "sqSum": "0.23", "avg": "0.26", "std": "0.09"}
    assert order == ["a:1", "c:1", "b:1"]
    assert load_stats({"a:1": 0.1, "b:1": 0.1, "c:1": 0.1})[0]["std"] == "NaN"
    assert load_stats({}) == ({"sum": "0.00", "sqSum": "0.00", "avg": "0.00", "std": "0.00"}, [])


def test_java_2f_rounds_the_shortest_decimal_half_up() -> None:
    """Java rounds the double's shortest decimal half up (0.125 -> 0.13, 2.675 -> 2.68), where Python's ``%.2f``
    rounds its binary value (0.12, 2.67); a negative value that rounds to zero keeps its sign."""
    assert "%.2f %.2f" % (0.125, 2.675) == "0.12 2.67"
    assert [java_2f(v) for v in (0.125, 0.005, 2.675, -0.004)] == ["0.13", "0.01", "2.68", "-0.00"]


def test_decisions_after_the_recordings_last_tick_are_not_audited() -> None:
    """The fresh-clone extensible run: the leader's UnloadScheduler timer started at 11:27:52.083; its recording's
    last report tick was 11:35:50.671. The owner 18083's SplitScheduler split two bundles at 11:35:50.639 (its own
    timer, 1.4 s before the leader's): the audit checks splits at the leader's 11:35:52.083, after the recording,
    so they are not audited. An unload at the 11:33 run is; an unload after the last tick is not; a modular
    recording's split (after a report write, not on the timer) always is."""
    from datetime import UTC, datetime

    from lbreplay.collect.leader_log import Decision
    from lbreplay.live_audit.audit_check import after_the_recording

    start = 1795778872083  # 11:27:52.083
    rows = {"leader_election": [{"ts": datetime.fromtimestamp(start / 1000, UTC)}]}
    last = 1795779350671
    split = Decision(1795779350639, "SPLIT", "lb/hot/0x70000000_0x78000000", "127.0.0.1:18083")
    early_split = Decision(1795779110660, "SPLIT", "lb/hot/0x70000000_0x80000000", "127.0.0.1:18083")
    unload = Decision(1795779232086, "UNLOAD", "lb/hot/0x78000000_0x80000000", "127.0.0.1:18083")
    late_unload = Decision(last + 1_500, "UNLOAD", "lb/hot/0xb0000000_0xc0000000", "127.0.0.1:18083")
    kept, beyond = after_the_recording([early_split, unload, split, late_unload], last, rows, "broker_load_data_ext")
    assert (kept, beyond) == ([early_split, unload], [split, late_unload])
    kept, beyond = after_the_recording([split, late_unload], last, rows, "broker_load")
    assert (kept, beyond) == ([split], [late_unload])
    assert after_the_recording([split], None, rows, "broker_load") == ([split], [])
    assert after_the_recording([late_unload], last, {}, "broker_load") == ([late_unload], [])  # no election: no timer


def test_an_unload_whose_run_reads_after_the_last_tick_is_not_audited() -> None:
    """The fresh-clone CI's trimmed modular run: the leader's timer minute 17:11:42.861 came before the recording's
    last report tick (17:11:43.138, a ``lastUpdate``), but its logged run started at 17:11:43.240 and read a report
    written after that tick. ``with_leader_timer`` puts the run's tick there, after the stream's last tick, so the
    audit has no such run: its unload is not audited. A run that read before the last tick is (``read_at``)."""
    from datetime import UTC, datetime

    from lbreplay.collect.leader_log import Decision
    from lbreplay.live_audit.audit_check import after_the_recording

    def ts(ms: int) -> datetime:
        return datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)

    start = 1795885422861  # 17:03:42.861, the election; its minutes are at :42.861
    last = 1795885903138  # 17:11:43.138
    run = 1795885903240
    unload = Decision(run + 5, "UNLOAD", "lb/hot/0x70000000_0x74000000", "127.0.0.1:18081", "127.0.0.1:18083")
    earlier = Decision(run - 480_000 + 5, "UNLOAD", "lb/hot/0x30000000_0x40000000", "127.0.0.1:18083")
    rows = {"leader_election": [{"ts": ts(start)}],
            "shedding_run": [{"ts": ts(run - 480_000), "read_at": None}, {"ts": ts(run), "read_at": None}]}
    assert after_the_recording([earlier, unload], last, rows, "broker_load") == ([earlier], [unload])
    rows["shedding_run"][1]["read_at"] = ts(last - 20)  # it read the reports held before the last tick
    assert after_the_recording([earlier, unload], last, rows, "broker_load") == ([earlier, unload], [])
    late = {**rows, "shedding_run": [{"ts": ts(start + 480_000 + 31_000), "read_at": None}]}  # > 30 s: not this run
    assert after_the_recording([unload], last, late, "broker_load") == ([unload], [])


def test_verdict_counts_decisions_only_the_audit_made() -> None:
    """A comparison passes only with the leader's decisions matched (>= the bar), every audit-only decision
    explained and the timer checks clean: the 15-minute extensible run whose bookie turned read-only matched the
    leader's 3 of 3 and made 9 splits the leader never made (its owners read their live stats, 0 msg/s)."""
    from lbreplay.live_audit.audit_check import verdict

    runs = {"leader": 15, "leader_on_timer": 15, "views_unexplained": []}
    split = {"side": "audit-only", "decision": {"action": "SPLIT"}}
    base = {"result": "compared", "agreement": 1.0, "shedding_runs": runs}
    assert verdict({**base, "differences": []}, 0.95) == []
    assert verdict({**base, "differences": [split] * 9}, 0.95) == ["9 decision(s) only the audit made, unexplained"]
    assert verdict({**base, "differences": [{**split, "cause": "outside the audited ticks"}]}, 0.95) == []
    assert verdict({**base, "agreement": 0.9, "differences": []}, 0.95) == ["agreement 90% < 95%"]
    late = {**runs, "leader_on_timer": 14, "views_unexplained": [{"broker": "b"}]}
    assert len(verdict({**base, "shedding_runs": late, "differences": []}, 0.95)) == 2
    assert verdict({"result": "no decisions"}, 0.95) == ["not compared: no decisions"]


def test_run_lags_follow_the_fixed_delay() -> None:
    """``LoadSheddingTask.run`` re-schedules itself after each run, so its lag behind the timer grows by each run's
    duration: the CI run of 2026-11-27 (election 18:19:20.481, 8 runs) reached 710 ms at 18:31 and 1,011 ms at
    18:35, each step well under a second; all on the timer. A run 1.5 s later than the one before, or half a
    minute off, is not."""
    from lbreplay.live_audit.audit_check import run_lags

    elected = 1_000_000
    audit = [elected + k * 60_000 for k in range(1, 9)]
    lags = [40, 170, 300, 420, 560, 710, 860, 1_011]
    got = run_lags(audit, [elected], [a + lag for a, lag in zip(audit, lags, strict=True)])
    assert [r["lag"] for r in got] == lags
    assert [r["step"] for r in got] == [40, 130, 130, 120, 140, 150, 150, 151]
    jumped = run_lags(audit[:3], [elected], [audit[0] + 40, audit[1] + 1_600, audit[2] + 31_000])
    assert [(r["lag"], r["step"]) for r in jumped] == [(40, 40), (1_600, 1_560), (None, None)]
    # a second election starts its own lag
    again = elected + 500_000 + 7
    got = run_lags([*audit[:2], again + 60_000], [elected, again], [audit[1] + 900, again + 60_000 + 30])
    assert [(r["lag"], r["step"]) for r in got] == [(900, 900), (30, 30)]


@pytest.mark.parametrize(("second", "within"), [("54", 4), ("24", 0)])
def test_shedding_timer_check_against_the_leaders_runs(tmp_path: Path, second: str, within: int) -> None:
    """The audit's shedding instants (the recorded election 20:38:53.992 + k minutes, kernel.leader_election)
    against the leader's runs in its log: runs logged 64 ms after them are all on the timer; runs half a minute
    off (a leader timed otherwise) match none."""
    import shutil

    from lbreplay.lake.ingest import read_dumps
    from lbreplay.live_audit.audit_check import shedding_timer_check

    sample = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-3brokers"
    dump = tmp_path / "dump"
    shutil.copytree(sample, dump)
    with (dump / "leader-decisions.log").open("a", encoding="utf-8") as f:
        for minute in range(40, 44):
            f.write(_shedder_line(f"2026-11-25T20:{minute}:{second},056", "127.0.0.1:18081") + "\n")
    got = shedding_timer_check(dump, read_dumps(dump, "x").rows, dump / "broker.conf")
    assert (got["leader"], got["elections"], got["leader_on_timer"]) == (4, 1, within)
    assert got["audit"] >= 4 and (within == 0 or got["max_lag_ms"] == 64)


def test_an_unload_the_leaders_placement_kept_on_its_owner_is_a_destination_difference() -> None:
    """The fresh-clone what-if run A-1 (2026-11-28 14:30:52): ThresholdShedder shed lb/hot/0x70000000_0x74000000
    from 18083 in the leader's run too, but ``selectBroker`` chose 18083 itself, so ``doLoadShedding`` logged "The
    destination broker … is the same as the current owner broker" and moved nothing; the audit's placement chose
    18084. That is a destination difference with its cause (counted in the destinations), not an unexplained
    decision; the same line for another bundle, another owner or another run explains nothing."""
    from lbreplay.collect.leader_log import Decision, owner_kept
    from lbreplay.live_audit.audit_check import destinations, owner_kept_cause, render, verdict

    line = ("127.0.0.1:18082 2026-11-28T14:30:52,949+0000 [pulsar-load-manager-1-1] WARN  org.apache.pulsar.broker."
            "loadbalance.impl.ModularLoadManagerImpl - [ThresholdShedder] The destination broker 127.0.0.1:18083 is "
            "the same as the current owner broker for Bundle lb/hot/0x70000000_0x74000000")
    kept = owner_kept([line, "2026-11-28T14:30:53,000+0000 unrelated"])
    t = 1_795_876_252_949
    assert kept == [(t, "lb/hot/0x70000000_0x74000000", "127.0.0.1:18083")]
    audit = Decision(t - 400, "UNLOAD", "lb/hot/0x70000000_0x74000000", "127.0.0.1:18083", "127.0.0.1:18084")
    facts = owner_kept_cause(audit, kept)
    assert facts["cause"].startswith("destination: the leader shed it from 127.0.0.1:18083 too")
    assert "127.0.0.1:18084" in facts["cause"]
    for other in (Decision(audit.at_ms, "UNLOAD", "lb/hot/0x74000000_0x78000000", audit.source, audit.target),
                  Decision(audit.at_ms, "UNLOAD", audit.bundle, "127.0.0.1:18081", audit.target),
                  Decision(audit.at_ms - 60_000, "UNLOAD", audit.bundle, audit.source, audit.target)):
        assert owner_kept_cause(other, kept) == {}
    diff = {"side": "audit-only", "tick": "2026-11-28T14:30:00.000Z", "decision": {
        "action": "UNLOAD", "bundle": audit.bundle, "source": audit.source, "target": audit.target}, **facts}
    matched = [{"tick": "t", "action": "UNLOAD", "bundle": "b", "source": "s", "leader_target": "x",
                "audit_target": "x"}, {"tick": "t", "action": "UNLOAD", "bundle": "c", "source": "s",
                                       "leader_target": "x", "audit_target": "y"}]
    report = {"result": "compared", "agreement": 1.0, "shedding_runs": {}, "differences": [diff],
              "matched_decisions": matched, "leader_decisions": 2, "leader_unloads": 2, "leader_splits": 0,
              "run_id": "r", "audited_cluster": "c", "audited_ticks": [], "audit_decisions": 3, "audit_unloads": 3,
              "audit_splits": 0, "summary": "matched 2/2", "leader_view": {"phase_ms": None, "at": "each run",
                                                                          "ticks": 1, "stale_claims_dropped": 0,
                                                                          "validation_passed": True}}
    assert verdict(report, 0.95) == []
    assert destinations(report) == {"compared": 3, "same": 1, "owner_kept": 1, "audit_kept": 0, "drawn": 0}
    text = render(report)
    assert "DESTINATIONS: 1 of 3 unloads" in text and "leader's view (at each run)" in text


def test_a_destination_drawn_at_random_counts_as_drawn_in_the_report() -> None:
    """The what-if run B-2's 11:29 run (UniformLoadShedder + LeastResourceUsageWithWeight, every broker above the
    average: "Assign randomly as all brokers are overloaded"): the leader's draw kept 0xb0000000_0xc0000000 on 18083
    (its WARN "the same as the current owner"), the audit's drew 18081 among all three brokers. That audit-only
    unload is drawn, not unexplained; a matched unload whose leader destination is in the audit's drawn set and a
    leader-only unload the audit kept by a draw holding the leader's destination count as drawn: the verdict uses
    the agreement counting draws, and render prints both figures."""
    from lbreplay.collect.leader_log import Decision
    from lbreplay.live_audit.audit_check import destinations, difference_facts, matched_rows, render, verdict
    from lbreplay.live_audit.comparison import AuditDecision, compare

    b1, b3, b4 = "127.0.0.1:18081", "127.0.0.1:18083", "127.0.0.1:18084"
    every = (b1, b3, b4)
    t = 1_795_864_140_000  # 2026-11-28T11:29:00Z
    kept_line = (t + 900, "lb/hot/0xb0000000_0xc0000000", b3)
    leader = [Decision(t + 800, "UNLOAD", "lb/hot/0x00000000_0x10000000", b3, b4),
              Decision(t + 850, "UNLOAD", "lb/hot/0x10000000_0x20000000", b3, b1),
              Decision(t + 860, "UNLOAD", "lb/hot/0x20000000_0x30000000", b3, b4)]
    audit = [AuditDecision(t, "UNLOAD", "lb/hot/0x00000000_0x10000000", b3, b1, drawn_among=every),
             AuditDecision(t, "KEEP", "lb/hot/0x10000000_0x20000000", b3, b3, drawn_among=every),
             AuditDecision(t, "KEEP", "lb/hot/0x20000000_0x30000000", b3, b3),  # no draw: a real difference
             AuditDecision(t, "UNLOAD", "lb/hot/0xb0000000_0xc0000000", b3, b1, drawn_among=every)]
    cmp = compare(leader, audit)
    assert len(cmp.matched) == 1 and [d.bundle for d in cmp.leader_only] == [leader[1].bundle, leader[2].bundle]
    assert [d.bundle for d, _ in cmp.leader_drawn] == [leader[1].bundle]
    assert len(cmp.audit_kept) == 2 and [a.bundle for a in cmp.audit_drawn] == ["lb/hot/0xb0000000_0xc0000000"]
    assert (cmp.agreement, cmp.agreement_with_draws) == (1 / 3, 2 / 3)
    facts = [f for f, _ in difference_facts(cmp, [kept_line], [])]
    assert [f.get("destination_drawn", False) for f in facts] == [True, False, True]
    assert "the leader logged \"the same as the current owner\"" in facts[2]["cause"]
    assert facts[1]["cause"].startswith("destination: the audit shed it") and "no move" in facts[1]["cause"]
    matched = matched_rows(cmp)
    assert matched[0]["destination_drawn"] and matched[0]["audit_drawn_among"] == list(every)
    report = {"result": "compared", "agreement": round(cmp.agreement, 4), "shedding_runs": {}, "differences": facts,
              "matched_decisions": matched, "matched": 1, "drawn": len(cmp.leader_drawn),
              "agreement_with_draws": round(cmp.agreement_with_draws, 4), "leader_decisions": 3, "leader_unloads": 3,
              "leader_splits": 0, "run_id": "r", "audited_cluster": "c", "audited_ticks": [], "audit_decisions": 2,
              "audit_unloads": 2, "audit_splits": 0, "summary": cmp.summary()}
    assert destinations(report) == {"compared": 4, "same": 0, "owner_kept": 1, "audit_kept": 2, "drawn": 3}
    assert verdict(report, 0.6) == [] and verdict(report, 0.95) == ["agreement 67% < 95%"]
    text = render(report)
    assert "AGREEMENT COUNTING DRAWS: 67% (1 matched + 1 drawn at random; 33% matched only)" in text
    assert "DESTINATIONS: 0 of 4 unloads to the leader's destination, 3 counting 3 drawn at random" in text
