"""The committed recording where a shedding run's own duration decides (data/samples/real-modular-run-clock): the
leader unloaded a bundle, then spent a step choosing a destination for another, so at its next run, one interval
after that run ended (``LoadSheddingTask``'s fixed delay), the first bundle was past the grace period and went back
(``modular_load_manager.RunClock``)."""

from __future__ import annotations

from pathlib import Path

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import leader_decisions, shedding_timer_check

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-run-clock"
BACK = "lb/hot/0x90000000_0xa0000000"


def test_the_engine_on_the_timer_makes_the_leaders_ten_decisions() -> None:
    """The audit's engine over the recorded versions, on the recorded election's timer, makes the leader's 6 splits
    and 4 unloads (same bundle, same broker, same minute), among them the bundle unloaded from 18081 at 01:31 and
    back from 18083 at 01:32."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    leader = [d for d in leader_decisions(SAMPLE) if d.action in ("SPLIT", "UNLOAD")]
    assert sorted((d.action, d.bundle, d.source_broker, d.ts_ms // 60_000) for d in decisions if d.action != "KEEP") == sorted(
        (d.action, d.bundle, d.source, d.at_ms // 60_000) for d in leader)
    back = [(d.source_broker, d.target_broker) for d in decisions if d.action == "UNLOAD" and d.bundle == BACK]
    assert back == [("127.0.0.1:18081", "127.0.0.1:18083"), ("127.0.0.1:18083", "127.0.0.1:18081")]
    assert [d.action for d in leader].count("UNLOAD") == 4 and len(leader) == 10


def test_every_shedding_run_is_on_the_timer_and_holds_the_printed_reports() -> None:
    got = shedding_timer_check(SAMPLE, read_dumps(SAMPLE, "clock").rows, SAMPLE / "broker.conf")
    assert (got["elections"], got["leader"], got["audit"], got["leader_on_timer"]) == (1, 9, 9, 9)
    assert (got["views"], got["views_equal"], got["views_unexplained"]) == (21, 21, [])
