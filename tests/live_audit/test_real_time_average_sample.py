"""The committed recording where the leader places with the time averages of its last ``updateAll``
(data/samples/real-modular-time-average): ``LeastLongTermMessageRate.getScore`` reads ``TimeAverageBrokerData``,
which ``ModularLoadManagerImpl.updateBundleData`` resets, while the split check that ends ``updateAll``
(``checkNamespaceBundleSplit``) removes each parent's BundleData after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import leader_decisions
from tests.live_audit.timer_replay import decision_keys

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-time-average"
FIRST_RUN = [("UNLOAD", "lb/hot/0x30000000_0x40000000", "127.0.0.1:18081", "127.0.0.1:18083"),
             ("UNLOAD", "lb/hot/0x40000000_0x50000000", "127.0.0.1:18081", "127.0.0.1:18083")]


def test_the_audit_makes_the_leaders_eleven_decisions() -> None:
    """6 splits and 5 unloads (same bundle, source and minute); the first run's two unloads go where the leader
    sent them (18083: 18081's time average still summed its split parents' fresh samples)."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    leader = decision_keys(leader_decisions(SAMPLE), leader=True)
    assert len(leader) == 11 and [k[0] for k in leader].count("UNLOAD") == 5
    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    assert decision_keys(decisions) == leader
    unloads = [(d.action, d.bundle, d.source_broker, d.target_broker) for d in decisions if d.action == "UNLOAD"]
    assert unloads[:2] == FIRST_RUN  # in decision order: the first run's


def test_time_averages_summed_at_the_run_miss_the_first_unloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summing the time averages at the shedding run (from the BundleData the split checks left) counts the split
    parents at the default 100 msg/s: 18081, the bundles' own broker, scores least, and no unload is issued."""
    from lbreplay.replay.modular_leader import ModularLeader
    from tests.live_audit.timer_replay import replay_on_the_timer

    monkeypatch.setattr(ModularLeader, "_keep_time_average", lambda self, ld: None)
    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    unloads = [(d.action, d.bundle, d.source_broker, d.target_broker) for d in decisions if d.action == "UNLOAD"]
    assert len(unloads) == 3 and not set(FIRST_RUN) & set(unloads)
