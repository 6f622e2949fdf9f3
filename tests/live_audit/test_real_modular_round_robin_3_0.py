"""The committed recording of the 3.0 LTS line (data/samples/real-modular-round-robin-3.0): 3 Pulsar 3.0.7 brokers,
modular load manager, ThresholdShedder with RoundRobinBrokerSelector placement; the leader made 6 splits and
3 unloads, and twice kept a bundle on its owner (the one candidate left was the owner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import check, leader_decisions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-round-robin-3.0"
B1, B2, B3 = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"
UNLOADS = [  # (timer minute, bundle, source, destination)
    ("2026-11-28T19:58:00.000Z", "lb/hot/0x60000000_0x70000000", B1, B2),
    ("2026-11-28T19:59:00.000Z", "lb/hot/0x70000000_0x78000000", B2, B3),
    ("2026-11-28T20:00:00.000Z", "lb/hot/0x70000000_0x74000000", B2, B3),
]


def test_the_leaders_decisions_and_round_robin_placements() -> None:
    """9 decisions (6 splits, 3 ``[ThresholdShedder]`` unloads) and 2 passes "the same as the current owner".
    ``RoundRobinBrokerSelector`` takes candidate ``count % size``: the leader's placement lines count its
    ``selectBroker`` calls, 16 lookups before the first unload (the only one with 2 candidates: index 16 % 2 = 0,
    18082, the first in the JVM's ``HashSet`` order, which for these ids is the sorted order); every later
    placement had 1 candidate (``removeMostServicingBrokersForNamespace``)."""
    decisions = leader_decisions(SAMPLE)
    unloads = [d for d in decisions if d.action == "UNLOAD"]
    assert (len(decisions), len(unloads)) == (9, 3)
    assert all(d.strategy == "ThresholdShedder" for d in unloads)
    assert [(d.source, d.target) for d in unloads] == [(B1, B2), (B2, B3), (B2, B3)]
    log = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8")
    assert log.count("is the same as the current owner broker") == 2
    placements = [line for line in log.splitlines() if " brokers being considered for assignment of " in line]
    considered = [int(line.split(" brokers being considered")[0].rsplit(" ", 1)[1]) for line in placements]
    assert len(considered) == 21 and considered[16:] == [2, 1, 1, 1, 1]
    assert "lb/hot/0x60000000_0x70000000" in placements[16]


def test_collect_keeps_the_placement_lines_without_new_decisions_or_runs() -> None:
    """``collect --leader-log-dir`` keeps the leader's placement lines (``is_leader_log_line``), and in the decision
    lines (as this recording holds them) they add no decision and no shedding run: the 5 placements of the leader's
    shedding runs fall inside the runs' bursts, the 16 lookups are on other threads."""
    from lbreplay.collect.leader_log import is_leader_log_line, parse_leader_log, shedding_runs

    merged = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    decisions = [line for line in merged if " brokers being considered for assignment of " not in line]
    assert len(merged) - len(decisions) == 21 and all(is_leader_log_line(line) for line in merged)
    assert parse_leader_log(merged) == parse_leader_log(decisions)
    assert shedding_runs(merged) == shedding_runs(decisions)
    assert len(shedding_runs(decisions)) == 8


@pytest.mark.spark
def test_audit_reproduces_the_3_0_round_robin_leader(spark, lake: str, tmp_path: Path) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --broker-conf`` on the line the brokers report (3.0,
    from ``brokerVersionString`` 3.0.7): the leader's 6 splits and 3 unloads with its destinations, nothing else,
    and no unload where the leader's placement kept the bundle on its owner (20:04, 20:05). The leader's 16 logged
    lookups are placed too, each on the broker whose next report lists the bundle (``RoundRobinBrokerSelector``'s
    counter stands at 16 at the first unload, as the leader's)."""
    report = check(SAMPLE, tmp_path, "real-rr-3-0", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert report["raw"]["validation_passed"], report["raw"]["validation"]
    assert report["result"] == "compared", report["result"]
    assert not report["differences"], report["differences"]
    assert (report["leader_decisions"], report["matched"], report["audit_decisions"]) == (9, 9, 9)
    assert report["agreement"] == 1.0, report["summary"]
    assert not report["leader_after_the_recording"]
    unloads = [(m["tick"], m["bundle"], m["source"], m["leader_target"])
               for m in report["matched_decisions"] if m["action"] == "UNLOAD"]
    assert unloads == UNLOADS
    assert all(m["leader_target"] == m["audit_target"] for m in report["matched_decisions"] if m["action"] == "UNLOAD")
    assert report["lookups"] == {"logged": 16, "placed": 16, "compared": 16, "same": 16, "drawn": 0,
                                 "differences": [], "not_placed": []}
    runs = report["shedding_runs"]
    assert (runs["elections"], runs["leader"], runs["audit"], runs["leader_on_timer"]) == (1, 8, 8, 8)
    row = spark.read.format("delta").load(f"{lake}/runs").where(f"run_id = '{report['run_id']}'").first()
    assert json.loads(row.replay_options)["pulsarLine"] == {
        "line": "3.0", "source": "recording", "detail": "from the recording: brokers report 3.0.7"}
    assert json.loads(row.config)["pulsarVersion"] == "3.0"
