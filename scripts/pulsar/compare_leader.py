"""Ingest a `lbreplay collect` recording, validate it, audit it (replay --mode observed with the brokers'
broker.conf) and compare the audit's UNLOAD / SPLIT decisions with the leader's logged ones, per tick.

usage: python scripts/pulsar/compare_leader.py --dump DIR --work DIR [--cluster NAME] [--require 0.95]
Exit 0 when the agreement reaches --require (default 0.95) with no unexplained difference (a decision only the
audit made counts too), every shedding run the leader logged is on the audit's timer (the recorded election's;
``audit_check.run_lags``) and every report its ThresholdShedder printed is the one held at that tick (or one written
between the tick and the leader's late run), else 1 (``audit_check.verdict`` names why).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lbreplay.live_audit.audit_check import check, render, verdict


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--cluster", default="live")
    ap.add_argument("--broker-conf", type=Path, default=None, help="default: DUMP/broker.conf")
    ap.add_argument("--require", type=float, default=0.95)
    a = ap.parse_args()
    conf = a.broker_conf or (a.dump / "broker.conf")
    report = check(a.dump, a.work, a.cluster, conf if conf.exists() else None)
    print(render(report))
    print(f"report: {a.work / 'report' / 'comparison.json'}")
    why = verdict(report, a.require)
    for reason in why:
        print(f"FAILED: {reason}")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
