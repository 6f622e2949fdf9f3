"""The committed recording of the modular load manager with OverloadShedder and LeastLongTermMessageRate placement
(data/samples/real-modular-overload-shedder): 3 Pulsar 4.0.7 brokers, overload threshold 12 %; the leader made 6
splits and 8 OverloadShedder unloads. At its runs of 17:43, 17:45 and 17:46 every broker was above the threshold,
so ``LeastLongTermMessageRate.getScore`` gave each +inf and ``selectBroker`` drew the destination with
``ThreadLocalRandom``: the audit matches every decision, but not those draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lbreplay.live_audit.audit_check import check, destinations, leader_decisions

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-overload-shedder"
B1, B2, B3 = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"
UNLOADS = [  # (timer minute, bundle, source, the leader's destination)
    ("2026-11-28T17:43:00.000Z", "lb/hot/0x30000000_0x40000000", B2, B1),
    ("2026-11-28T17:43:00.000Z", "lb/hot/0x20000000_0x30000000", B2, B1),
    ("2026-11-28T17:43:00.000Z", "lb/hot/0x10000000_0x20000000", B3, B1),
    ("2026-11-28T17:45:00.000Z", "lb/hot/0x08000000_0x10000000", B2, B1),
    ("2026-11-28T17:46:00.000Z", "lb/hot/0xe8000000_0xec000000", B2, B1),
    ("2026-11-28T17:47:00.000Z", "lb/hot/0xe8000000_0xec000000", B1, B2),
    ("2026-11-28T17:48:00.000Z", "lb/hot/0x90000000_0xa0000000", B1, B3),
    ("2026-11-28T17:49:00.000Z", "lb/hot/0x70000000_0x74000000", B3, B2),
]
RANDOM_RUNS = {"17:43", "17:45", "17:46"}  # every broker above 12 %: LeastLongTermMessageRate draws at random
OWNER_KEPT = [("2026-11-28T17:43:00.000Z", "lb/hot/0x90000000_0xa0000000", B1),
              ("2026-11-28T17:45:00.000Z", "lb/hot/0xf0000000_0xffffffff", B3),
              ("2026-11-28T17:46:00.000Z", "lb/hot/0x90000000_0xa0000000", B1),
              ("2026-11-28T17:46:00.000Z", "lb/hot/0x70000000_0x74000000", B3)]


def test_the_leaders_decisions_and_the_random_placements() -> None:
    """6 splits and 8 ``[OverloadShedder]`` unloads. At the runs of 17:43, 17:45 and 17:46 OverloadShedder found
    every broker above 12 % ("Attempting to shed load on <b>" for all three), so ``LeastLongTermMessageRate`` scored
    every candidate +inf (all tie and ``ThreadLocalRandom`` picks, in the filtered candidates and again over all
    brokers: ``ModularLoadManagerImpl``'s re-check when the pick is overloaded); at 17:47-17:49 only one broker
    was above it and the pick was by score. Five random picks drew the bundle's owner (no move: "the same as the
    current owner broker"). The leader's 13 placement lines (``selectBroker``'s "N brokers being considered") are
    its runs' own: they add no decision and no run."""
    from lbreplay.collect.leader_log import parse_leader_log, shedding_runs

    decisions = leader_decisions(SAMPLE)
    unloads = [d for d in decisions if d.action == "UNLOAD"]
    assert (len(decisions), len(unloads)) == (14, 8)
    assert all(d.strategy == "OverloadShedder" for d in unloads)
    assert [(d.bundle, d.source, d.target) for d in unloads] == [u[1:] for u in UNLOADS]
    log = (SAMPLE / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    shedding: dict[str, set[str]] = {}
    for ln in log:
        if m := re.search(r"T(\d\d:\d\d):\d\d,\d+\S* .*Attempting to shed load on (\S+),", ln):
            shedding.setdefault(m.group(1), set()).add(m.group(2))
    assert {t for t, brokers in shedding.items() if brokers == {B1, B2, B3}} == RANDOM_RUNS
    kept = [re.search(r"T(\d\d:\d\d).* for Bundle (\S+)", ln).groups() for ln in log
            if "is the same as the current owner broker" in ln]
    assert kept == [("17:43", "lb/hot/0x90000000_0xa0000000"), ("17:45", "lb/hot/0x90000000_0xa0000000"),
                    ("17:45", "lb/hot/0xf0000000_0xffffffff"), ("17:46", "lb/hot/0x90000000_0xa0000000"),
                    ("17:46", "lb/hot/0x70000000_0x74000000")]
    without = [ln for ln in log if " brokers being considered for assignment of " not in ln]
    assert len(log) - len(without) == 13
    assert parse_leader_log(log) == parse_leader_log(without) and shedding_runs(log) == shedding_runs(without)


@pytest.mark.spark
def test_audit_reproduces_the_overload_shedder_leader(spark, lake: str, tmp_path: Path) -> None:
    """``ingest`` -> ``validate`` -> ``replay --mode observed --broker-conf``: the audit makes all 14 of the leader's
    decisions (same bundle, source and minute) and the destinations of the runs placed by score (17:47-17:49). Its 4
    extra unloads are bundles the leader shed too at the random runs, whose random placement drew the owner
    (no move); the audit's draw moved them."""
    report = check(SAMPLE, tmp_path, "real-overload", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert report["raw"]["validation_passed"], report["raw"]["validation"]
    assert report["result"] == "compared", report["result"]
    assert (report["leader_decisions"], report["matched"], report["audit_decisions"]) == (14, 14, 18)
    assert report["agreement"] == 1.0, report["summary"]
    matched = [m for m in report["matched_decisions"] if m["action"] == "UNLOAD"]
    assert [(m["tick"], m["bundle"], m["source"], m["leader_target"]) for m in matched] == UNLOADS
    by_score = [m for m in matched if m["tick"][11:16] not in RANDOM_RUNS]
    assert len(by_score) == 3 and all(m["leader_target"] == m["audit_target"] for m in by_score)
    extra = report["differences"]
    assert all(d["side"] == "audit-only" and d["cause"].startswith("destination: ") for d in extra)
    assert [(d["tick"], d["decision"]["bundle"], d["decision"]["source"]) for d in extra] == OWNER_KEPT
    # every destination is the leader's or drawn at random among brokers holding it: the 2 matched unloads placed
    # otherwise and the 4 the leader's draw kept on the owner (LeastLongTermMessageRate: every candidate +inf, a tie)
    assert destinations(report) == {"compared": 12, "same": 6, "owner_kept": 4, "audit_kept": 0, "drawn": 6}
    assert report["agreement_with_draws"] == 1.0
    runs = report["shedding_runs"]
    assert (runs["elections"], runs["leader"], runs["leader_on_timer"]) == (1, 6, 6)
    # its 13 placement lines are its shedding runs' own: no lookup to place
    assert report["lookups"] == {"logged": 0, "placed": 0, "compared": 0, "same": 0, "drawn": 0, "differences": [],
                                 "not_placed": []}
