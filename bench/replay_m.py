"""Replay benchmark on the M scenario (50 brokers, 2,000 bundles, 20,000 topics, 1,440 one-minute ticks).

Prints JSON lines:
* closed-loop replay end-to-end wall time (one cold `execute`: validation check, stream preparation, the run in a
  Spark task, table writes)
  vs the kernel-only time of the same run (same process, no Spark, iterating the prepared tick stream);
  target: end-to-end <= 3 x kernel-only + 60 s;
* an 8-config sweep (conf/grids/threshold-sweep.yaml) vs 8 sequential single replays; target <= 0.6;
* peak RSS of the replay task for a history and for the same history doubled; target ratio <= 1.5;
* the same closed loop and audit as cold ``lbreplay replay`` CLI runs (their own process and Spark session, the
  stream cache removed first): the wall time a user waits, Spark's start and JIT warm-up included;
* the audit (``--mode observed``, tick slices in parallel) of the same history end to end, its tick stream already
  prepared by the closed loop, and its ratio to the closed loop's time (each audit tick re-reads the observed
  ownership: a per-bundle cost that once grew with the square of the bundles).

The scenario defaults to `heterogeneous` (0.5x/1x/2x brokers under capacity-blind history placement), so
ThresholdShedder has real unloads to decide and the closed loop moves bundles; `steady` makes no decisions.

Usage: python bench/replay_m.py [--lake DIR] [--size M|S] [--scenario NAME] [--skip-generate] [--skip-sweep]
       [--skip-memory] [--skip-closed-loop] [--skip-audit] [--skip-cli]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def emit(**kw: object) -> None:
    """One JSON line, with the 1/5/15-minute load averages at its end."""
    print(json.dumps({**kw, "load_average": [round(x, 2) for x in os.getloadavg()]}), flush=True)


def cli_cold(lake: str, cluster: str, run_id: str, mode: str) -> float:
    """Wall seconds of one ``lbreplay replay`` process on ``local[2]``, the cluster's stream cache removed first."""
    shutil.rmtree(f"{lake}/_replay_cache/{cluster}", ignore_errors=True)
    cli = str(Path(sys.executable).with_name("lbreplay"))
    t0 = time.time()
    subprocess.run([cli, "replay", "--cluster", cluster, "--config", "threshold-lltmr", "--mode", mode,
                    "--run-id", run_id, "--lake", lake, "--master", "local[2]", "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    return time.time() - t0


def kernel_only(manifest: Any, pulsar: dict, replay: dict) -> tuple[float, int]:
    """The same run in this process, no Spark: the tick loop over the prepared stream."""
    from lbreplay.replay.engine import Replay, RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import ticks_from_stream

    static = StaticInputs(manifest.broker_ids, manifest.namespaces, manifest.calibration())
    rep = Replay(RunSpec("kernel-only", "bench", "closed-loop", pulsar, 0, replay), static)
    t0 = time.perf_counter()
    decisions = 0
    for obs in ticks_from_stream(manifest):
        decisions += len(rep.step(obs).decisions)
    return time.perf_counter() - t0, decisions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", default=None)
    ap.add_argument("--size", default="M")
    ap.add_argument("--scenario", default="heterogeneous")
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-closed-loop", action="store_true")
    ap.add_argument("--skip-audit", action="store_true")
    ap.add_argument("--skip-cli", action="store_true", help="no cold CLI runs")
    args = ap.parse_args()
    from lbreplay.lake.generator import generate
    from lbreplay.lake.validation import validate
    from lbreplay.replay import spark_replay as R
    from lbreplay.replay.run_config import expand_grid, resolve_run_config
    from lbreplay.spark import get_spark

    lake = args.lake or tempfile.mkdtemp(prefix="lbreplay-bench-")
    t0 = time.time()
    spark = get_spark(lake, master="local[2]", conf={"spark.python.worker.reuse": "false"})
    spark_start = time.time() - t0
    emit(step="spark_start", seconds=round(spark_start, 1))
    cluster = f"bench{args.size.lower()}"
    if not args.skip_generate:
        t0 = time.time()
        generate(spark, lake, args.scenario, cluster, seed=1, size=args.size)
        emit(step="generate", scenario=args.scenario, size=args.size, seconds=round(time.time() - t0, 1))
        t0 = time.time()
        assert validate(spark, lake, cluster).passed
        emit(step="validate", seconds=round(time.time() - t0, 1))
    pulsar, replay = resolve_run_config("threshold-lltmr")
    if not args.skip_cli:  # a process of their own, before this one replays: a cold JVM and no cached stream
        modes = ["closed-loop"] + ([] if args.skip_audit else ["observed"])
        for mode in modes:
            seconds = cli_cold(lake, cluster, f"bench-cli-{mode}", mode)
            emit(step="cli-cold", mode=mode, scenario=args.scenario, size=args.size, seconds=round(seconds, 1))
    if not args.skip_closed_loop:
        # end to end = what `lbreplay replay` does: validation check, tick stream preparation (cold: the cluster's
        # stream cache is removed first), the run in a Spark task, the table writes
        shutil.rmtree(f"{lake}/_replay_cache/{cluster}", ignore_errors=True)
        t0 = time.time()
        R.execute(spark, lake, cluster, [(pulsar, replay)], run_ids=["bench-single"], quiet=False)  # phases on stderr
        e2e = time.time() - t0
        versions = R.input_versions(spark, lake, cluster)
        _, meta = R.prepare(spark, lake, cluster, versions)
        kern, decisions = kernel_only(meta, pulsar, replay)
        spark_decisions = spark.read.format("delta").load(f"{lake}/decisions").where("run_id = 'bench-single'").count()
        emit(step="closed-loop", scenario=args.scenario, size=args.size, ticks=meta.ticks,
             decisions=decisions, spark_decisions=spark_decisions, end_to_end_s=round(e2e, 1),
             end_to_end_with_spark_start_s=round(e2e + spark_start, 1),
             kernel_only_s=round(kern, 1), budget_s=round(3 * kern + 60, 1), within_budget=e2e <= 3 * kern + 60)
        if not args.skip_audit:
            t0 = time.time()
            R.execute(spark, lake, cluster, [(pulsar, {**replay, "mode": "observed"})], run_ids=["bench-audit"],
                      quiet=False)
            audit = time.time() - t0
            audit_decisions = spark.read.format("delta").load(f"{lake}/decisions").where(
                "run_id = 'bench-audit'").count()
            emit(step="audit", scenario=args.scenario, size=args.size, ticks=meta.ticks, decisions=audit_decisions,
                 end_to_end_s=round(audit, 1), end_to_end_with_spark_start_s=round(audit + spark_start, 1),
                 closed_loop_s=round(e2e, 1), ratio=round(audit / e2e, 3))
    if not args.skip_memory:
        peaks = {}
        for label, ticks in (("base", 360), ("doubled", 720)):
            name = f"mem{ticks}"
            generate(spark, lake, {"name": name, "traffic": {"target_utilization": 0.5}, "ticks": ticks, "brokers": 20},
                     name, seed=3, size="S")
            assert validate(spark, lake, name).passed
            R.execute(spark, lake, name, [(pulsar, replay)], run_ids=[f"bench-{name}"], quiet=True)
            peaks[label] = spark.read.format("delta").load(f"{lake}/run_metrics").where(
                f"run_id = 'bench-{name}' AND metric = 'task_peak_rss_mb'").select("value").first()[0]
        emit(step="memory", base_ticks=360, doubled_ticks=720, peak_rss_mb_base=peaks["base"],
             peak_rss_mb_doubled=peaks["doubled"], ratio=round(peaks["doubled"] / peaks["base"], 3), target=1.5)
    if not args.skip_sweep:
        specs = expand_grid(str(REPO / "conf" / "grids" / "threshold-sweep.yaml"))
        t0 = time.time()
        R.execute(spark, lake, cluster, specs, quiet=True)
        sweep = time.time() - t0
        emit(step="sweep-parallel", runs=len(specs), seconds=round(sweep, 1))
        t0 = time.time()
        for i, spec in enumerate(specs):
            t1 = time.time()
            R.execute(spark, lake, cluster, [spec], run_ids=[f"bench-seq-{i}"], quiet=True)
            emit(step="sweep-sequential-run", run=i, seconds=round(time.time() - t1, 1))
        seq = time.time() - t0
        emit(step="sweep", runs=len(specs), sweep_s=round(sweep, 1), sequential_s=round(seq, 1),
             ratio=round(sweep / seq, 3), target=0.6, within_target=sweep / seq <= 0.6)
    emit(step="driver", driver_peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))


if __name__ == "__main__":
    main()
