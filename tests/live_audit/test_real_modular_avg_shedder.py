"""The committed recording of the modular load manager with AvgShedder as both shedding and placement strategy
(data/samples/real-modular-avg-shedder): 3 Pulsar 4.0.7 brokers; the leader made 6 splits and 8 AvgShedder unloads,
4 of them at its last run, after the recording's last report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import check, leader_decisions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-avg-shedder"
B1, B2, B3 = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"
UNLOADS = [  # (timer minute, bundle, source, destination) of the unloads the audit can see
    ("2026-11-28T17:36:00.000Z", "lb/hot/0x74000000_0x78000000", B3, B2),
    ("2026-11-28T17:36:00.000Z", "lb/hot/0xec000000_0xf0000000", B3, B2),
    ("2026-11-28T17:40:00.000Z", "lb/hot/0x74000000_0x78000000", B2, B3),
    ("2026-11-28T17:40:00.000Z", "lb/hot/0xc0000000_0xd0000000", B2, B3),
]
LAST_RUN = ["lb/hot/0x30000000_0x40000000", "lb/hot/0x40000000_0x50000000", "lb/hot/0x50000000_0x60000000",
            "lb/hot/0x78000000_0x80000000"]  # 17:41:22, 4 s after the last recorded report


def test_the_leaders_decisions_and_avg_shedders_plans() -> None:
    """6 splits and 8 ``[AvgShedder]`` unloads. Each firing pair planned its low broker, 18081, as the destination
    (``bundleBrokerMap``), but 18081 never received a bundle: the placement's candidates were narrowed first
    (``removeMostServicingBrokersForNamespace``), so the unloads went to the one broker left, and twice that was
    the owner (no unload: "the same as the current owner")."""
    decisions = leader_decisions(SAMPLE)
    unloads = [d for d in decisions if d.action == "UNLOAD"]
    assert (len(decisions), len(unloads)) == (14, 8)
    assert all(d.strategy == "AvgShedder" for d in unloads)
    assert [(d.source, d.target) for d in unloads] == [(B3, B2)] * 2 + [(B2, B3)] * 2 + [(B3, B2)] * 4
    log = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8")
    planned = re.findall(r"broker:\[(\S+)\] is planning to shed bundles to broker:\[(\S+)\]\. ", log)
    assert planned == [(B3, B1), (B3, B1), (B3, B1), (B2, B1), (B3, B1)]
    assert log.count("is the same as the current owner broker") == 4


@pytest.mark.spark
def test_audit_reproduces_the_avg_shedder_leader(spark, lake: str, tmp_path: Path) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --broker-conf``: the audit makes the leader's 6 splits
    and its 4 unloads up to 17:40 (same bundle, source, destination and minute), nothing else, and passes over the
    bundles whose destination was their owner (17:37, 17:39); the 4 unloads of the run at 17:41:22 come after the
    recording's last report and are listed as not audited."""
    report = check(SAMPLE, tmp_path, "real-avg", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert report["raw"]["validation_passed"], report["raw"]["validation"]
    assert report["result"] == "compared", report["result"]
    assert not report["differences"], report["differences"]
    assert (report["leader_decisions"], report["matched"], report["audit_decisions"]) == (14, 10, 10)
    assert report["agreement"] == 1.0, report["summary"]
    assert sorted(d["bundle"] for d in report["leader_after_the_recording"]) == LAST_RUN
    unloads = [(m["tick"], m["bundle"], m["source"], m["leader_target"])
               for m in report["matched_decisions"] if m["action"] == "UNLOAD"]
    assert unloads == UNLOADS
    assert all(m["leader_target"] == m["audit_target"] for m in report["matched_decisions"] if m["action"] == "UNLOAD")
    runs = report["shedding_runs"]
    assert (runs["elections"], runs["leader"], runs["audit"], runs["leader_on_timer"]) == (1, 7, 7, 7)
