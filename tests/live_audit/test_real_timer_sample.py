"""The committed recording with the leader's shedding runs (data/samples/real-modular-shedding-timer): the audit
sheds on the leader's timer (``PulsarService.startLoadBalancerTasks`` -> ``LoadSheddingTask``, modelled by
``kernel.leader_election`` from the recorded ``/loadbalance/leader`` election) and holds, at each run, the reports
the leader's ThresholdShedder printed."""

from __future__ import annotations

import json
from pathlib import Path

from lbreplay.collect.leader_log import shedding_runs, shedding_views
from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import leader_decisions, printed_resource_usage, shedding_timer_check
from lbreplay.live_audit.leader_view import held_at, recorded_versions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-shedding-timer"


def test_each_shedding_run_holds_the_reports_the_leader_printed() -> None:
    """The leader's 8 runs while reports were recorded (23:04:16.387, then a minute after each run) each fall within
    1 s of one of the audit's timer ticks (the election at 23:03:16.369 + k minutes; the leader's lag grows by the
    runs' own durations), and every report ThresholdShedder printed for a broker it did not find overloaded (20)
    is the version held at that tick."""
    got = shedding_timer_check(SAMPLE, read_dumps(SAMPLE, "timer").rows, SAMPLE / "broker.conf")
    assert (got["elections"], got["leader"], got["audit"], got["leader_on_timer"]) == (1, 8, 8, 8)
    assert 10 <= got["max_lag_ms"] <= 300
    assert (got["views"], got["views_equal"]) == (20, 20)


def test_shedding_at_report_writes_held_other_reports() -> None:
    """The audit's rule before the timer (shed at the first report write an interval after the last run,
    ``LeaderTask``) ran at other instants: at them, only some of the printed reports were the ones held."""
    from lbreplay.kernel.modular_load_manager import LeaderTask

    lines = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    versions = recorded_versions(SAMPLE, "brokers")
    task, at_writes = LeaderTask(), []
    for t in sorted({v.mtime for vs in versions.values() for v in vs}):
        if task.due(t, 60_000):
            at_writes.append(t)
    views = shedding_views(lines)
    same = sum(printed_resource_usage(json.loads(held_at(versions[b], min(at_writes, key=lambda a: abs(a - t))).path
                                          .read_bytes())) == pct for t, b, pct in views)  # type: ignore[union-attr]
    assert len(at_writes) < len(shedding_runs(lines)) and same < len(views)


def test_engine_on_the_timer_makes_the_leaders_decisions() -> None:
    """The audit's engine over the recorded versions with the timer ticks of the recorded election makes the
    leader's 9 decisions: 6 splits from the same owners at the same report writes, and 3 ThresholdShedder unloads
    (same bundle, same broker) at the leader's shedding runs. At the first run, 23:04:16, the shedding precedes
    the quota task's sample (``startLoadBalancerTasks`` scheduled it first, for the same instant): the split parent
    ``0x00000000_0x10000000``, dropped by the refused split retry, is not back in the BundleData yet, so the
    leader unloads ``0x10000000_0x20000000``, as its log says."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    ticks, decisions = replay_on_the_timer(SAMPLE, ["lb/hot"])
    assert sum(1 for t in ticks if t.timer_minute) >= 8
    leader = [d for d in leader_decisions(SAMPLE) if d.action in ("SPLIT", "UNLOAD")]
    assert sorted((d.action, d.bundle, d.source_broker, d.ts_ms // 60_000) for d in decisions if d.action != "KEEP") == sorted(
        (d.action, d.bundle, d.source, d.at_ms // 60_000) for d in leader)
    assert [d.action for d in leader].count("UNLOAD") == 3 and len(leader) == 9
    runs = shedding_runs((SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines())
    assert all(any(0 <= r - d.ts_ms < 1_000 for r in runs) for d in decisions if d.action == "UNLOAD")
