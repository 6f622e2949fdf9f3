"""The committed recording of the extensible load manager near Pulsar 4.0.7's defaults
(data/samples/real-extensible-defaults): 3 brokers, TransferShedder with target std 0.25, hit count 3 and the 180 s
cool-down; the hot load on one broker. The leader made 4 transfers at one run (Underloaded, std 0.10 < 0.25), then
every run was in cool-down."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import check, leader_decisions
from tests.live_audit.test_real_extensible_sample import assert_reproduced

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-extensible-defaults"
B1, B3 = "127.0.0.1:18081", "127.0.0.1:18083"
DEFAULTS = {  # 4.0.7's ServiceConfiguration defaults the overlay restores (scripts/pulsar/topologies)
    "loadBalancerBrokerLoadTargetStd": "0.25", "loadBalancerSheddingConditionHitCountThreshold": "3",
    "loadBalanceSheddingDelayInSeconds": "180", "loadBalancerSheddingGracePeriodMinutes": "30",
    "loadBalancerHistoryResourcePercentage": "0.9", "loadBalancerReportUpdateMaxIntervalMinutes": "15",
    "loadBalancerTransferEnabled": "true", "loadBalancerNamespaceBundleMaxMsgRate": "30000",
}


def test_the_leader_transferred_once_on_underload_then_cooled_down() -> None:
    """The brokers' load std stayed at or under 0.10 (target 0.25): the shedding condition held because the min
    broker 18083 was underloaded (its throughput under 1/8 of the max broker's, ``isUnderLoaded``). Hit counts 1, 2
    and 3 (a run without 18083's load data, ``NoLoadData``, kept the count), then at the 4th hit 3 transfers from
    18081 to 18083 and one swap back; afterwards 18081 published no load data 180 s after the transfer (no 10 %
    change, 15-minute interval), so each run stopped in ``CoolDown``."""
    conf = dict(line.split("=", 1) for line in (SAMPLE / "broker.conf").read_text(encoding="utf-8").splitlines()
                if "=" in line and not line.startswith("#"))
    assert {k: conf[k] for k in DEFAULTS} == DEFAULTS
    assert (conf["loadBalancerDebugModeEnabled"], conf["loadBalancerOverrideBrokerNicSpeedGbps"]) == ("true", "10")
    decisions = leader_decisions(SAMPLE)
    assert [(d.action, d.bundle, d.source, d.target) for d in decisions] == [
        ("UNLOAD", "lb/hot/0x80000000_0x90000000", B1, B3), ("UNLOAD", "lb/hot/0x00000000_0x10000000", B1, B3),
        ("UNLOAD", "lb/hot/0x30000000_0x40000000", B1, B3), ("UNLOAD", "lb/hot/0x20000000_0x30000000", B3, B1)]
    log = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8")
    assert re.findall(r"std:([\d.]+), totalBrokers", log) == ["0.01", "0.10", "0.10", "0.10", "0.05"]
    assert re.findall(r"hit count:(\d+) is less than or equal to the threshold:3", log) == ["1", "2", "3"]
    results = [line for line in log.splitlines() if "Unload decision result: [UnloadDecision" in line]
    assert "broker:127.0.0.1:18083 is underloaded" in log and len(results) == 1
    assert results[0].count("label=Success, reason=Underloaded") == 4
    assert log.count("Reason:CoolDown") == 10 and log.count("Reason:NoLoadData") == 1


@pytest.mark.spark
def test_audit_reproduces_the_extensible_defaults_leader(spark, lake: str, tmp_path: Path) -> None:
    """The audit holds the same published load data and makes the leader's 4 transfers (with the swap) to its
    destinations at its 20:11 run, and nothing in the cool-down runs; its 11 runs are on the leader's timer and the
    4 load statistics the leader printed are the ones the audit held."""
    report = check(SAMPLE, tmp_path, "real-ext-defaults", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert_reproduced(report, 4, 4)
    assert {m["tick"] for m in report["matched_decisions"]} == {"2026-11-28T20:11:00.000Z"}
    runs = report["shedding_runs"]
    assert (runs["elections"], runs["leader"], runs["audit"], runs["leader_on_timer"]) == (1, 11, 11, 11)
    assert (runs["views"], runs["views_equal"]) == (4, 4)
