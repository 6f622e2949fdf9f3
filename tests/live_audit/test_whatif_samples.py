"""The what-if experiment's committed runs (data/samples/whatif/<config>-<n>, recorded by scripts/pulsar/whatif.sh:
one seeded schedule on a real 4-broker Pulsar 4.0.7 cluster, a broker joining and one SIGKILLed, under config A
(ThresholdShedder + LeastLongTermMessageRate) and config B (UniformLoadShedder + LeastResourceUsageWithWeight),
split children unloaded as Pulsar's default): each run's audit, on its recorded election's timer, makes the
decisions its leader logged, and each recording holds the schedule's events."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lbreplay.collect.layout import read_json_lines
from lbreplay.live_audit.audit_check import leader_decisions

WHATIF = Path(__file__).resolve().parents[2] / "data" / "samples" / "whatif"
# run -> (the leader's SPLIT + UNLOAD decisions, how many of them the audit makes with the same bundle, source and
# minute, how many of the leader's unloads it sends to the leader's destination): measured with the SIGKILLed
# broker dropped at its recorded departure, as the leader drops it (before: 15, 14, 48 and 23 of the leader's
# decisions and 35 of B-1's destinations, the audit holding the dead broker's last report two more minutes)
RUNS: dict[str, tuple[int, int, int]] = {
    "A-1": (19, 18, 6),
    "A-2": (15, 15, 5),
    "B-1": (55, 53, 39),
    "B-2": (28, 24, 14),
}


def _keys(decisions: list, leader: bool) -> Counter:
    if leader:
        return Counter((d.action, d.bundle, d.source, d.at_ms // 60_000) for d in decisions
                       if d.action in ("SPLIT", "UNLOAD"))
    return Counter((d.action, d.bundle, d.source_broker, d.ts_ms // 60_000) for d in decisions
                   if d.action in ("SPLIT", "UNLOAD"))


def _unload_targets(decisions: list, leader: bool) -> Counter:
    if leader:
        return Counter((d.bundle, d.source, d.target, d.at_ms // 60_000) for d in decisions if d.action == "UNLOAD")
    return Counter((d.bundle, d.source_broker, d.target_broker, d.ts_ms // 60_000) for d in decisions
                   if d.action == "UNLOAD")


def test_every_committed_run_is_listed() -> None:
    committed = sorted(p.name for p in WHATIF.iterdir() if (p / "leader-decisions.log").exists())
    assert committed == sorted(RUNS)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_audit_makes_the_leaders_decisions(run: str) -> None:
    """The engine over the recorded report versions, on the recorded election's timer, makes at least the measured
    number of the leader's splits and unloads (same bundle, source, minute) and of its unload destinations."""
    from tests.live_audit.timer_replay import replay_on_the_timer

    sample = WHATIF / run
    _, decided = replay_on_the_timer(sample, ["lb/hot"])
    leader = [d for d in leader_decisions(sample) if d.action in ("SPLIT", "UNLOAD")]
    n_leader, n_same, n_dest = RUNS[run]
    assert len(leader) == n_leader
    assert {"SPLIT", "UNLOAD"} <= {d.action for d in leader}
    assert sum((_keys(leader, True) & _keys(decided, False)).values()) >= n_same
    assert sum((_unload_targets(leader, True) & _unload_targets(decided, False)).values()) >= n_dest


# run -> (the leader's decisions, matched by audit_check's comparison (same action, bundle, source, run), matched or
# drawn: a leader-only unload the audit kept on the owner by a draw holding the leader's destination), and
# (destinations compared, the same, drawn at random among brokers holding the leader's choice): the leader's
# LeastResourceUsageWithWeight (B) draws among every candidate when all are above the average ("Assign randomly as
# all brokers are overloaded"); and (the audit-only unloads, those drawn among brokers holding their owner). B-1's 2
# remaining and B-2's 1 are UniformLoadShedder picking another bundle of the same broker (each with its audit-only
# twin), no placement; A-1's one is its decision after the recording's last report tick (not audited).
WITH_DRAWS: dict[str, tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int]]] = {
    "A-1": ((19, 18, 18), (6, 6, 0), (0, 0)),
    "A-2": ((15, 15, 15), (5, 5, 0), (0, 0)),
    "B-1": ((55, 53, 53), (43, 39, 4), (2, 0)),
    "B-2": ((28, 25, 27), (19, 14, 5), (4, 2)),
}


@pytest.mark.parametrize("run", sorted(WITH_DRAWS))
def test_counting_the_draws_of_pulsars_placement(run: str) -> None:
    """``audit_check``'s comparison of the engine's decisions (with their ``drawn_among`` and KEEP rows) and the
    leader's log: the decisions and destinations matched, and those counting Pulsar's random draws
    (``ThreadLocalRandom`` in ``LeastResourceUsageWithWeight.selectBroker``) as no difference. B-2's 11:29 run:
    UniformLoadShedder planned 5 bundles of 18083; the leader's draw kept two on 18083 ("the same as the current
    owner"), the audit's drew 18081 among all three; at 11:33 the reverse (the audit drew the owner)."""
    from tests.live_audit.timer_replay import counted_with_draws, replay_on_the_timer

    _, decided = replay_on_the_timer(WHATIF / run, ["lb/hot"])
    got = counted_with_draws(WHATIF / run, decided)
    dest = got["destinations"]
    assert ((got["leader"], got["matched"], got["matched"] + got["drawn"]),
            (dest["compared"], dest["same"], dest["drawn"]), (got["audit_only"], got["audit_drawn"])) == WITH_DRAWS[run]
    if run.startswith("B"):  # >= 95 % of the leader's decisions and every destination, counting draws
        assert got["matched"] + got["drawn"] >= 0.95 * got["leader"]
        assert dest["same"] + dest["drawn"] == dest["compared"]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_recording_holds_the_schedules_events(run: str) -> None:
    """broker-4 (127.0.0.1:18084) joined: its first report is written after the others'; the SIGKILLed broker's
    znode deletion is recorded (``absent``) after its last report, and it is not the leader."""
    sample = WHATIF / run
    events = (sample / "events.log").read_text(encoding="utf-8")
    killed = "127.0.0.1:" + events.split("SIGKILL broker-", 1)[1].split("127.0.0.1:", 1)[1].split(")", 1)[0]
    records = read_json_lines(sample / "collect" / "metadata-versions.jsonl")
    reports = [r for r in records if r.get("event") == "version" and r["path"].startswith("/loadbalance/brokers/")]
    first = {b: min(r["mtime"] for r in reports if r["path"].endswith(b)) for b in {r["path"].rsplit("/", 1)[1]
                                                                                    for r in reports}}
    assert len(first) == 4 and first["127.0.0.1:18084"] > max(t for b, t in first.items() if b != "127.0.0.1:18084")
    gone = [r for r in records if r.get("event") == "absent" and r["path"] == f"/loadbalance/brokers/{killed}"]
    assert gone and gone[0]["at"] > max(r["mtime"] for r in reports if r["path"].endswith(killed))
    leaders = {json.dumps(r["data"], sort_keys=True) for r in records if r.get("path") == "/loadbalance/leader"
               and r.get("data")}
    assert all(killed not in lead for lead in leaders)
