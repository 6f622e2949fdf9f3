"""The committed recording where reports written during the shedding run's lag decide
(data/samples/real-modular-shedding-lag): ``LoadSheddingTask`` runs one interval after its last run ended (fixed
delay), so each run reads the reports held some hundreds of ms after its timer minute; the dump's leader log shows
when (``shedding_run``)."""

from __future__ import annotations

from pathlib import Path

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import leader_decisions
from tests.live_audit.timer_replay import decision_keys

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-shedding-lag"
LATE = ("UNLOAD", "lb/hot/0x70000000_0x74000000", "127.0.0.1:18082")  # 12:39:43, after three lag-written reads


def test_ingest_keeps_the_leaders_logged_runs() -> None:
    """Eight runs in the leader's log, each 66-461 ms after its timer minute (the election's znode ctime plus whole
    minutes), the lag growing with the runs' unloads."""
    rows = read_dumps(SAMPLE, "lag").rows
    [election] = rows["leader_election"]
    elected = int(election["ts"].timestamp() * 1000)
    lags = [(int(r["ts"].timestamp() * 1000) - elected) % 60_000 for r in rows["shedding_run"]]
    assert lags == [66, 296, 325, 368, 377, 379, 385, 461]


def test_the_audit_at_the_logged_runs_makes_the_leaders_ten_decisions() -> None:
    """At the logged runs the audit holds what the leader read and makes its 6 splits and 4 unloads (same bundle,
    source and minute); at the timer minutes it misses the 12:39 unload (ThresholdShedder's average carried the
    older reports)."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    leader = decision_keys(leader_decisions(SAMPLE), leader=True)
    assert len(leader) == 10 and [k[0] for k in leader].count("UNLOAD") == 4
    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    assert decision_keys(decisions) == leader
    _, at_minutes = replay_on_the_timer(SAMPLE, ["lb/hot"], logged_runs=False)
    missed = [k for k in leader if k not in decision_keys(at_minutes)]
    assert [k[:3] for k in missed] == [LATE]
