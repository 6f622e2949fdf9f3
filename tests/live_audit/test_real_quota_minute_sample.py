"""The committed recording where the quota task's minute decides (data/samples/real-modular-quota-minute, a
fresh-clone CI run of 2026-11-29): at 01:53 the shedding run lagged its timer minute by 267 ms; in between, 18083's
report (01:53:13.832) made the leader's split check retry the bundles it had split at 01:53:09, dropping their
BundleData ("Make sure the same bundle is not selected again"). ``LoadResourceQuotaUpdaterTask``'s sample ran at the
minute itself, before that report, so ThresholdShedder found no BundleData for 0xe8000000_0xf0000000 and unloaded
two other bundles of 18081."""

from __future__ import annotations

from pathlib import Path

from lbreplay.live_audit.audit_check import leader_decisions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-quota-minute"


def test_the_engine_on_the_timer_makes_the_leaders_eleven_decisions() -> None:
    """The audit's engine over the recorded versions, on the recorded election's timer, makes the leader's 6 splits
    and 5 unloads (same bundle, broker and minute) with its destinations; at 01:53 the two bundles of 18081, not the
    split parent 0xe8000000_0xf0000000 whose BundleData the quota task's later sample would have brought back."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    _, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    leader = [d for d in leader_decisions(SAMPLE) if d.action in ("SPLIT", "UNLOAD")]
    assert (len(leader), [d.action for d in leader].count("UNLOAD")) == (11, 5)
    assert sorted((d.action, d.bundle, d.source_broker, d.target_broker if d.action == "UNLOAD" else None,
                   d.ts_ms // 60_000) for d in decisions if d.action in ("SPLIT", "UNLOAD")) == sorted(
        (d.action, d.bundle, d.source, d.target if d.action == "UNLOAD" else None, d.at_ms // 60_000) for d in leader)
    at_0153 = {d.bundle for d in decisions if d.action == "UNLOAD" and d.ts_ms // 60_000 * 60_000 == 1795917180000}
    assert at_0153 == {"lb/hot/0x40000000_0x50000000", "lb/hot/0x08000000_0x10000000"}
