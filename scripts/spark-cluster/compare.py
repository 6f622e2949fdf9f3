"""Second half of ``make test-cluster`` (spark-submitted with ``--master local[2]``).

Runs the same sweep embedded in this ``local[2]`` session, then checks, from the lake and the cluster
application's Spark event log:

* every run of the cluster sweep has a twin in the ``local[2]`` sweep (same grid position) whose decision hash is
  equal -- the hash is SHA-256 over the run's decisions (run id excluded) in ``seq`` order;
* the cluster sweep's runs spread over at least two executors: the replay stage is the ``mapInPandas`` stage with
  one task per run (partition i = run i, ``spark_replay.execute``), and each task's ``Executor ID`` / ``Host``
  come from its ``SparkListenerTaskEnd`` event.

Prints one JSON line per run and a summary line; exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any


def decision_hashes(spark: Any, lake: str, prefix: str) -> dict[str, tuple[str, int]]:
    from pyspark.sql import functions as F

    df = (spark.read.format("delta").load(f"{lake}/decisions").where(F.col("run_id").startswith(prefix + "-"))
          .select("run_id", "tick", "seq", "action", "bundle", "source_broker", "target_broker", "child_bundles",
                  "strategy", "reason", F.to_json(F.map_entries("details")).alias("details")))
    rows: dict[str, list[Any]] = {}
    for r in df.collect():
        rows.setdefault(r["run_id"], []).append(r)
    out = {}
    for run, rs in rows.items():
        h = hashlib.sha256()
        for r in sorted(rs, key=lambda x: x["seq"]):
            h.update(json.dumps([r["tick"], r["seq"], r["action"], r["bundle"], r["source_broker"],
                                 r["target_broker"], r["child_bundles"], r["strategy"], r["reason"],
                                 r["details"]]).encode())
        out[run] = (h.hexdigest(), len(rs))
    return out


def _event_lines(event_dir: str, app_id: str) -> Iterator[str]:
    """The lines of the application's event log: a plain file, or a rolling ``eventlog_v2_<app>`` directory of
    ``events_<n>_<app>[.zstd]`` files (zstd-compressed ones through the ``zstd`` tool)."""
    app = app_id.removeprefix("eventlog_v2_")
    paths = [p for p in glob.glob(os.path.join(event_dir, "*")) if app in os.path.basename(p)]
    if not paths:
        raise SystemExit(f"no event log for application {app} in {event_dir}")
    path = paths[0]
    files = [path]
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "events_*")),
                       key=lambda f: int(os.path.basename(f).split("_")[1]))
    for f in files:
        if ".zstd" in f:
            out = subprocess.run(["zstd", "-dc", f], check=True, capture_output=True).stdout.decode()
            yield from out.splitlines()
        else:
            with open(f, encoding="utf-8") as fh:
                yield from fh


def executors_per_run(event_dir: str, app_id: str, runs: int) -> dict[int, tuple[str, str]]:
    """partition index -> (executor id, host) of the replay stage's tasks, from the application's event log."""
    stages: dict[int, bool] = {}  # stage id -> runs the mapInPandas replay
    tasks: dict[int, list[tuple[int, str, str, bool]]] = {}
    for line in _event_lines(event_dir, app_id):
        if not line.strip():
            continue
        ev = json.loads(line)
        kind = ev.get("Event")
        if kind == "SparkListenerStageSubmitted":
            info = ev["Stage Info"]
            names = " ".join(r.get("Name", "") + " " + r.get("Callsite", "") for r in info.get("RDD Info", []))
            # the run specs are parallelized one per slice (spark_replay.execute), then mapInPandas replays them
            stages[info["Stage ID"]] = info.get("Number of Tasks") == runs and (
                "ParallelCollectionRDD" in names or "parallelize at" in names)
        elif kind == "SparkListenerTaskEnd":
            t = ev["Task Info"]
            tasks.setdefault(ev["Stage ID"], []).append(
                (t["Index"], t["Executor ID"], t["Host"], ev.get("Task End Reason", {}).get("Reason") == "Success"))
    replay = [s for s, ok in stages.items() if ok and s in tasks]
    if not replay:
        raise SystemExit(f"no stage with {runs} replay tasks in the event log of {app_id}")
    stage = max(replay, key=lambda s: sum(1 for t in tasks[s] if t[3]))
    return {i: (ex, host) for i, ex, host, ok in tasks[stage] if ok}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--grid", required=True)
    ap.add_argument("--cluster-prefix", required=True, help="run-id prefix of the sweep run on the cluster")
    ap.add_argument("--local-prefix", default="local2")
    ap.add_argument("--event-dir", required=True)
    ap.add_argument("--app-id", required=True, help="application id of the cluster sweep")
    args = ap.parse_args()

    from lbreplay.replay.run_config import expand_grid
    from lbreplay.replay.spark_replay import sweep_command
    from lbreplay.spark import get_spark

    spark = get_spark(args.lake)
    master = spark.sparkContext.master
    sweep_command(args.cluster, args.grid, None, args.lake, None, True, run_id_prefix=args.local_prefix)
    n = len(expand_grid(args.grid))
    on_cluster = decision_hashes(spark, args.lake, args.cluster_prefix)
    local = decision_hashes(spark, args.lake, args.local_prefix)
    placed = executors_per_run(args.event_dir, args.app_id, n)
    failures = []
    for i in range(n):
        a, b = f"{args.cluster_prefix}-{i + 1:02d}", f"{args.local_prefix}-{i + 1:02d}"
        ha, hb = on_cluster.get(a, ("<missing>", 0)), local.get(b, ("<missing>", 0))
        ex = placed.get(i, ("?", "?"))
        same = ha[0] == hb[0] and ha[0] != "<missing>"
        if not same:
            failures.append(f"{a} != {b}")
        print(json.dumps({"run": a, "executor_id": ex[0], "host": ex[1], "decisions": ha[1],
                          "decision_hash": ha[0][:16], "local_run": b, "local_master": master,
                          "local_decision_hash": hb[0][:16], "equal": same}), flush=True)
    executors = sorted({placed[i][0] for i in placed})
    if len(executors) < 2:
        failures.append(f"the sweep ran on executors {executors} only (need >= 2)")
    if sum(h[1] for h in on_cluster.values()) == 0:
        failures.append("the cluster sweep made no decision at all (nothing to compare)")
    print(json.dumps({"check": "test-cluster", "runs": n, "executors": executors, "hashes_equal": not any(
        "!=" in f for f in failures), "failures": failures, "load_average": [round(x, 2) for x in os.getloadavg()]}),
          flush=True)
    spark.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
