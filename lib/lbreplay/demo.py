"""``lbreplay demo``: the main job on the embedded default (DESIGN.md §2).

Generates the ``scale-in`` scenario (11 -> 8 brokers), validates it, replays it closed-loop under several
strategy presets (conf/strategies/) and as an audit, writes the comparison report, and prints where the tables
and the report are.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEMO_CLUSTER = "demo"
DEMO_SCENARIO = "scale-in"
PRESETS = ("threshold-lltmr", "threshold-lruww", "avg-shedder")


def demo_command(lake: str, master: str | None = None, quiet: bool = False) -> None:
    from lbreplay.lake.generator import generate
    from lbreplay.lake.validation import validate
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.replay.spark_replay import execute
    from lbreplay.spark import get_spark, lake_path

    say = (lambda _m: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    t0 = time.time()
    lake = lake_path(lake)
    spark = get_spark(lake, master=master)
    say(f"[demo] spark ready ({time.time() - t0:.0f}s); generating scenario {DEMO_SCENARIO} as cluster {DEMO_CLUSTER}")
    generate(spark, lake, DEMO_SCENARIO, DEMO_CLUSTER, seed=42, log=say)
    say(f"[demo] validating ({time.time() - t0:.0f}s)")
    report = validate(spark, lake, DEMO_CLUSTER)
    if not report.passed:
        from lbreplay.errors import InvalidInputError

        for line in report.details():
            print(line, file=sys.stderr)
        raise InvalidInputError(report.summary())
    specs = [resolve_run_config(p) for p in PRESETS]
    audit = resolve_run_config("threshold-lltmr", sets=["replay.mode=observed"])
    ids = execute(spark, lake, DEMO_CLUSTER, specs + [audit],
                  run_ids=[f"demo-{p}" for p in PRESETS] + ["demo-audit-threshold"], quiet=quiet)
    out = Path(lake) / "reports" / "demo.html"
    report_path = None
    try:
        from lbreplay.report.html_report import write_report

        out.parent.mkdir(parents=True, exist_ok=True)
        write_report(spark, lake, ids, str(out))
        report_path = str(out)
    except ImportError:
        pass
    print(f"lake: {lake}")
    print("tables: lbreplay.broker_load, bundle_load, topic_load, namespace_policy (inputs); "
          "lbreplay.runs, ownership, decisions, broker_ticks, run_metrics (outputs)")
    print(f"runs: {', '.join(ids)}")
    if report_path:
        print(f"report: {report_path}")
    print(f'try: .venv/bin/lbreplay sql "SELECT run_id, metric, value FROM lbreplay.run_metrics '
          f"WHERE metric IN ('unloads','bundles_moved','load_std_mean') ORDER BY metric, run_id\" --lake {lake}")
    say(f"[demo] done in {time.time() - t0:.0f}s")
