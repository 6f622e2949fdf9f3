"""A week of history against a day: the closed-loop replay of a 7-day M history (10,080 one-minute ticks) and of a
1-day one (1,440 ticks) of the same scenario and seed, in one process.

Prints JSON lines:
* ``generate`` / ``validate`` per history (seconds, rows);
* ``replay`` per history: end to end (validation check, cold tick-stream preparation, the run's task, table
  writes), the phases the replay reports (stream ready, replayed), decisions, and the task's peak RSS
  (``run_metrics.task_peak_rss_mb``);
* ``week_vs_day``: ``replay_ratio`` = week / day end to end (target <= 7.5) and ``rss_ratio`` = week / day task peak
  RSS (target <= 1.2): the task streams the ticks, so a longer history costs time, not memory.

Usage: python bench/history_week.py [--lake DIR] [--size M] [--scenario heterogeneous] [--days 7] [--skip-generate]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

REPLAY_TARGET = 7.5
RSS_TARGET = 1.2


def emit(**kw: object) -> None:
    print(json.dumps({**kw, "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lake", default=None, help="keep the lake here (default: a temporary one, removed after)")
    ap.add_argument("--size", default="M")
    ap.add_argument("--scenario", default="heterogeneous")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-generate", action="store_true", help="the lake already holds both histories")
    args = ap.parse_args()

    from lbreplay.lake.generator import generate
    from lbreplay.lake.scenario import load_scenario_doc
    from lbreplay.lake.validation import validate
    from lbreplay.replay import spark_replay as R
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.spark import get_spark

    tmp = None if args.lake else tempfile.mkdtemp(prefix="lbreplay-bench-week-")
    lake = args.lake or f"{tmp}/lake"
    spark = get_spark(lake, master="local[2]", conf={"spark.ui.enabled": "false"})
    histories = {"day": 1440, "week": 1440 * args.days}
    results: dict[str, dict[str, float]] = {}
    try:
        for label, ticks in histories.items():
            cluster = f"{label}{args.size.lower()}"
            if not args.skip_generate:
                name, doc = load_scenario_doc(args.scenario)
                doc["name"] = name
                sizes = dict(doc.get("sizes") or {})
                sizes[args.size] = {**(sizes.get(args.size) or {}), "ticks": ticks}
                doc["sizes"] = sizes
                t0 = time.time()
                out = generate(spark, lake, doc, cluster, seed=args.seed, size=args.size)
                emit(step="generate", history=label, ticks=ticks, seconds=round(time.time() - t0, 1),
                     rows=sum(out.rows.values()))
                t0 = time.time()
                passed = validate(spark, lake, cluster).passed
                emit(step="validate", history=label, seconds=round(time.time() - t0, 1), passed=passed)
        pulsar, replay = resolve_run_config("threshold-lltmr")
        if args.skip_generate:  # the process's first Delta queries and JIT are not the day's: a run not counted
            R.execute(spark, lake, f"day{args.size.lower()}", [(pulsar, replay)], run_ids=["bench-warm-up"], quiet=True)
        for label in histories:
            cluster = f"{label}{args.size.lower()}"
            run_id = f"bench-{label}-{int(time.time())}"
            shutil.rmtree(f"{lake}/_replay_cache/{cluster}", ignore_errors=True)  # cold: prepared anew
            t0 = time.time()
            R.execute(spark, lake, cluster, [(pulsar, replay)], run_ids=[run_id], quiet=False)  # phases on stderr
            seconds = time.time() - t0
            metrics = {r["metric"]: r["value"] for r in spark.read.format("delta").load(f"{lake}/run_metrics")
                       .where(f"run_id = '{run_id}'").collect()}
            decisions = spark.read.format("delta").load(f"{lake}/decisions").where(f"run_id = '{run_id}'").count()
            results[label] = {"seconds": seconds, "rss": float(metrics["task_peak_rss_mb"])}
            emit(step="replay", history=label, ticks=histories[label], end_to_end_s=round(seconds, 1),
                 decisions=decisions, task_peak_rss_mb=round(results[label]["rss"], 1))
        day, week = results["day"], results["week"]
        replay_ratio = week["seconds"] / day["seconds"]
        rss_ratio = week["rss"] / day["rss"]
        emit(step="week_vs_day", size=args.size, days=args.days, replay_ratio=round(replay_ratio, 2),
             replay_target=REPLAY_TARGET, rss_ratio=round(rss_ratio, 3), rss_target=RSS_TARGET,
             within_target=replay_ratio <= REPLAY_TARGET and rss_ratio <= RSS_TARGET)
        spark.stop()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
