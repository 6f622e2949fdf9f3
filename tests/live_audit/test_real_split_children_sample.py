"""The committed recording where the leader's placement of split children decides
(data/samples/real-modular-split-children): the children it assigned right after its splits
(``ModularLoadManagerImpl.selectBrokerForAssignment`` -> ``preallocateBundle``) count in
``brokerToNamespaceToBundleRange`` at its next shedding run, so ``removeMostServicingBrokersForNamespace`` leaves
another destination than the reports alone would."""

from __future__ import annotations

from pathlib import Path

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import leader_decisions, shedding_timer_check

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-split-children"
PARENT = "lb/hot/0x70000000_0x78000000"  # split at 11:16:15, unloaded at 11:16:20 from 18083's held report


def _key(action: str, bundle: str, source: str | None, target: str | None, ms: int) -> tuple:
    return action, bundle, source, target if action == "UNLOAD" else None, ms // 60_000


def test_the_audit_makes_the_leaders_nine_decisions_with_its_destinations() -> None:
    """The engine over the recorded versions, on the recorded election's timer and leader, makes the leader's 6
    splits and 3 unloads (same bundle, source, destination and minute), among them both 11:16:20 unloads to 18082."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    leader = [d for d in leader_decisions(SAMPLE) if d.action in ("SPLIT", "UNLOAD")]
    assert len(leader) == 9 and [d.action for d in leader].count("UNLOAD") == 3
    got = sorted(_key(d.action, d.bundle, d.source_broker, d.target_broker, d.ts_ms)
                 for d in decisions if d.action in ("SPLIT", "UNLOAD"))
    assert got == sorted(_key(d.action, d.bundle, d.source, d.target, d.at_ms) for d in leader)
    unload = next(d for d in decisions if d.action == "UNLOAD" and d.bundle == PARENT)
    assert (unload.source_broker, unload.target_broker) == ("127.0.0.1:18083", "127.0.0.1:18082")


def test_without_the_leaders_id_the_children_are_not_placed_and_the_unload_is_missed() -> None:
    """The same ticks without the elected broker (a recording that does not say who led): no lookups are replayed,
    18083 is the least servicing broker for the parent, the destination is its owner, and the leader's unload of
    the parent is missing (8 of 9): the children's preallocations decide it."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    ticks, _ = replay_on_the_timer(SAMPLE, ["lb/hot"])
    assert {t.leader_broker for t in ticks} == {"127.0.0.1:18083"}
    ticks, decided = replay_on_the_timer(SAMPLE, ["lb/hot"], with_leader=False)
    assert {t.leader_broker for t in ticks} == {None}
    assert not any(d.action == "UNLOAD" and d.bundle == PARENT for d in decided)
    assert sum(d.action == "UNLOAD" for d in decided) == 2


def test_every_shedding_run_is_on_the_timer() -> None:
    got = shedding_timer_check(SAMPLE, read_dumps(SAMPLE, "children").rows, SAMPLE / "broker.conf")
    assert (got["elections"], got["leader"], got["audit"], got["leader_on_timer"]) == (1, 7, 7, 7)
    assert got["views_unexplained"] == []
