"""Replays on Spark: the ``replay`` and ``sweep`` commands, from pinned inputs to the Delta commits.

1. the validation check, the output tables and the namespace policies, alongside the tick stream's preparation
   (:mod:`~lbreplay.replay.preparation`, driver side);
2. one Spark task per run, or per tick slice of an audit (no feedback, so slices run in parallel, each after a
   warm-up), running the tick loop over the stream (:mod:`~lbreplay.replay.replay_task`), its rows staged as
   Parquet while the output tables' snapshots and views are made ready;
3. the output tables written (:mod:`~lbreplay.replay.outputs`), the ``runs`` row last.

A time window (``--from`` / ``--to``, :class:`~lbreplay.lake.window.TimeWindow`) selects the input rows whose
``ts`` is in ``[from, to)`` before anything else: the tick stream, the calibration, the broker universe and the
observed ownership see only the window, so ticks are numbered from 0 at the window's first tick, a closed loop
starts from the ownership observed then, and audit slices split the window's ticks. The window is recorded in
``runs.replay_options`` as ``"window": {"from": "…Z", "to": "…Z"}`` (null = open side).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.lake import tables
from lbreplay.lake.dump_tables import BROKER_LOAD_DATA_EXT, BUNDLE_DATA, TOP_BUNDLES_LOAD_DATA
from lbreplay.lake.recorded_line import choose_line, recorded_versions
from lbreplay.lake.storage import partition_bytes, remove_path, run_concurrently
from lbreplay.lake.validation import require_validated
from lbreplay.lake.views import ensure_views
from lbreplay.lake.window import TimeWindow, window_from_flags
from lbreplay.progress import Progress
from lbreplay.replay.outputs import observed_ownership, write_outputs
from lbreplay.replay.payload import TASK_ROW_SCHEMA
from lbreplay.replay.preparation import input_versions, namespace_policies_json, prepare, read_pinned
from lbreplay.replay.recorded_start import require_closed_loop_inputs, require_traffic
from lbreplay.replay.records import RunSpec
from lbreplay.replay.replay_task import run_partition
from lbreplay.replay.run_config import ConfigSpec, RunIntake, finish, grid_points, read_run_config
from lbreplay.spark import get_spark, lake_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Audit slices replay this many ticks before their own to rebuild strategy state (EWMA h=0.9 keeps 0.9**120
# = 3e-6 of its start; bundle averages take one sample per report write, so they saturate far sooner).
AUDIT_WARMUP_TICKS = 120


def _progress(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _run_rows(cluster: str, specs: list[ConfigSpec], run_ids: list[str] | None, seed: int | None,
              versions: dict[str, int]) -> list[dict[str, Any]]:
    """Each run's id (given, or derived from inputs + config + seed), mode, config, seed and inputs."""
    started = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    runs = []
    for i, (pulsar, replay) in enumerate(specs):
        run_seed = int(seed if seed is not None else replay.get("seed", 0))
        rid = (run_ids[i] if run_ids and i < len(run_ids) and run_ids[i] else
               "run-" + hashlib.sha256(json.dumps([cluster, pulsar, replay, run_seed, versions], sort_keys=True)
                                       .encode()).hexdigest()[:12])
        runs.append({"run_id": rid, "mode": replay.get("mode", "closed-loop"), "config": pulsar, "seed": run_seed,
                     "replay": replay, "input_versions": versions, "started_at": started})
    if len({r["run_id"] for r in runs}) != len(runs):
        raise UsageError("run ids must be unique within one call")
    return runs


def _task_specs(cluster: str, runs: list[dict[str, Any]], total_ticks: int, slices: int) -> list[tuple[str]]:
    """One RunSpec per task: a run, or an audit's tick slice (no feedback, so slices run in parallel; each
    replays a warm-up before its slice)."""
    spec_rows = []
    for r in runs:
        base = RunSpec(r["run_id"], cluster, r["mode"], r["config"], r["seed"], r["replay"])
        if r["mode"] == "observed" and slices > 1 and total_ticks > 2 * slices:
            warmup = int(r["replay"].get("warmupTicks", AUDIT_WARMUP_TICKS))
            bounds = np.linspace(0, total_ticks, slices + 1).astype(int)
            for a, b in zip(bounds[:-1], bounds[1:]):
                end = int(b) if b < total_ticks else None  # the last slice ends the run (RunMetrics.rows)
                spec = RunSpec(**{**asdict(base), "tick_start": int(a), "tick_end": end, "warmup": warmup})
                spec_rows.append((json.dumps(asdict(spec)),))
        else:
            spec_rows.append((json.dumps(asdict(base)),))
    return spec_rows


def execute(
    spark: SparkSession, lake: str, cluster: str, specs: list[ConfigSpec], *,
    run_ids: list[str] | None = None, seed: int | None = None, quiet: bool = False, window: TimeWindow | None = None,
) -> list[str]:
    """Replay each (pulsar keys, replay options) spec, in parallel Spark tasks; returns the run ids. With
    ``window`` only its ticks are replayed, and it is recorded in each run's ``replay_options``."""
    versions = input_versions(spark, lake, cluster)
    t0 = time.time()
    _progress(quiet, f"preparing tick stream for cluster {cluster} (inputs {versions})")

    def checked() -> dict[str, Any] | None:
        """The validation check (its refusal wins over any error of the preparation running alongside), the
        output tables, the namespace policies."""
        try:
            require_validated(spark, lake, cluster)
        except InvalidInputError:
            spark.sparkContext.cancelAllJobs()  # the preparation's: no need to finish it
            raise
        tables.ensure_tables(spark, lake, tables.OUTPUT_TABLES)
        return namespace_policies_json(spark, lake, cluster, versions)

    policies, (_, manifest) = run_concurrently(checked, lambda: prepare(spark, lake, cluster, versions, window=window))
    if window is not None:
        specs = [(pulsar, {**replay, "window": window.to_json()}) for pulsar, replay in specs]
    _progress(quiet, f"tick stream ready in {time.time() - t0:.1f}s; replaying {len(specs)} run(s)")
    runs = _run_rows(cluster, specs, run_ids, seed, versions)
    closed_loops = {r["run_id"] for r in runs if r["mode"] != "observed"}
    if closed_loops:
        require_closed_loop_inputs(manifest, cluster)
    total_ticks = manifest.ticks - manifest.lead_in_ticks
    spec_rows = _task_specs(cluster, runs, total_ticks, max(1, int(spark.sparkContext.defaultParallelism)))
    rdd = spark.sparkContext.parallelize(spec_rows, numSlices=len(spec_rows))
    progress_dir = None
    if "://" not in lake:
        progress_dir = os.path.join(lake, "_progress", uuid.uuid4().hex)
        os.makedirs(progress_dir, exist_ok=True)
    raw = spark.createDataFrame(rdd, "spec STRING").mapInPandas(run_partition(manifest, policies, progress_dir),
                                                                TASK_ROW_SCHEMA)
    staging = f"{lake}/_staging/{uuid.uuid4().hex}"
    with _ProgressWatcher(progress_dir, total_ticks * len(runs), len(runs), quiet):
        # while the runs replay (one core each), the output tables' Delta snapshots and the views are made ready
        run_concurrently(lambda: raw.write.mode("overwrite").parquet(staging),
                         lambda: _ready_outputs(spark, lake, [r["run_id"] for r in runs]))
    _progress(quiet, f"replayed {len(runs)} run(s) in {time.time() - t0:.1f}s; writing tables")
    observed = None
    if any(r["mode"] == "observed" for r in runs):
        observed = observed_ownership(read_pinned(spark, lake, "bundle_load", versions, cluster, window), cluster)
    t1 = time.time()
    staged = spark.read.parquet(staging)
    if closed_loops:
        require_traffic(manifest, cluster, closed_loops, [(r["run_id"], r["payload"]) for r in staged.where(
            (F.col("kind") == "ticks") & F.col("run_id").isin(sorted(closed_loops))).collect()])
    write_outputs(spark, lake, cluster, staged, runs, observed)
    remove_path(spark, staging)
    _progress(quiet, f"done in {time.time() - t0:.1f}s (tables {time.time() - t1:.1f}s)")
    return [r["run_id"] for r in runs]


def _ready_outputs(spark: SparkSession, lake: str, run_ids: list[str]) -> None:
    """Load each output table's Delta snapshot with the files its ``replaceWhere`` will replace (kept by Delta
    for the commit that follows), and create the views over the tables."""
    for table in tables.OUTPUT_TABLES.values():
        spark.read.format("delta").load(tables.table_location(lake, table.name)) \
            .where(F.col("run_id").isin(run_ids)).inputFiles()
    ensure_views(spark, lake)


class _ProgressWatcher:
    """Polls the tasks' progress files while the replay job runs: ticks replayed, runs done, ETA."""

    def __init__(self, directory: str | None, total_ticks: int, runs: int, quiet: bool):
        self.directory = directory
        self.progress = Progress(f"replaying {runs} run(s)", total_ticks, "ticks", quiet or directory is None)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _done(self) -> int:
        total = 0
        for name in os.listdir(self.directory or "."):
            if not name.startswith("."):
                try:
                    with open(os.path.join(self.directory or ".", name), encoding="utf-8") as fh:
                        total += int(fh.read() or 0)
                except (OSError, ValueError):
                    pass
        return total

    def _poll(self) -> None:
        while not self.stop.wait(1.0):
            self.progress.update(self._done())

    def __enter__(self) -> "_ProgressWatcher":
        if self.directory:
            self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.directory:
            self.thread.join(timeout=5)
            if exc[0] is None:
                self.progress.finish()
            shutil.rmtree(self.directory, ignore_errors=True)


# A closed loop whose Spark side reads less than this of the cluster's report tables runs its driver JVM with C1
# only (``spark.QUICK_JIT``): the M closed loop reads 12 MB (cold, 38.0-38.5 s against 45.4 s tiered), a week of M
# 78 MB, L 116 MB. Audits keep the tiered JIT: their observed ownership is a window over every bundle_load row
# (M, cold: 58.6 s with C1 only, 56.2 s tiered).
QUICK_JIT_MAX_BYTES = 32 << 20
REPORT_TABLES = [tables.BROKER_LOAD, tables.BUNDLE_LOAD, BUNDLE_DATA, BROKER_LOAD_DATA_EXT, TOP_BUNDLES_LOAD_DATA]


def quick_jit(lake: str, cluster: str, specs: list[ConfigSpec]) -> bool:
    """Whether the replay's Spark work is small enough for a C1-only driver JVM: closed-loop runs only, the
    cluster's report tables (``topic_load``'s files are read by the task itself) under :data:`QUICK_JIT_MAX_BYTES`
    in a local lake."""
    if any(replay.get("mode") == "observed" for _, replay in specs):
        return False
    size = partition_bytes(lake_path(lake), REPORT_TABLES, cluster)
    return size is not None and size < QUICK_JIT_MAX_BYTES


def with_lines(spark: SparkSession, lake: str, cluster: str, window: TimeWindow | None, intakes: list[RunIntake],
               quiet: bool) -> list[ConfigSpec]:
    """Each run's Pulsar line (``lake.recorded_line``: explicit, else the recording's, else the default) applied to
    its intake; the line is stated once per distinct choice (progress), each warning once (stderr)."""
    seen = recorded_versions(spark, lake, cluster, window)
    specs, said = [], set()
    for intake in intakes:
        choice = choose_line(seen, intake.explicit_version)
        specs.append(finish(intake, choice))
        for warning in [*intake.warnings, *choice.warnings]:
            if warning not in said:
                said.add(warning)
                print(f"warning: {warning}", file=sys.stderr, flush=True)
        if choice.message() not in said:
            said.add(choice.message())
            _progress(quiet, choice.message())
    return specs


def parse_seeds(text: str) -> list[int]:
    """``replay --seeds``: ``0-4``, ``0,3,7`` or both (``0-2,7``): distinct non-negative seeds, in the order given."""
    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi) if hi else int(lo)
            if first < 0 or last < first:
                raise ValueError(part)
            out += range(first, last + 1)
    except ValueError:
        raise UsageError(f"--seeds: expected N-M or N,M,... (non-negative integers, N <= M), got {text!r}") from None
    if len(set(out)) != len(out):
        raise UsageError(f"--seeds: {text!r} names a seed twice")
    return out


def seeded_run_ids(run_id: str | None, seeds: list[int]) -> list[str]:
    """``--run-id R --seeds ...``: the runs ``R-s<seed>``, one per seed ([] without ``--run-id``)."""
    return [f"{run_id}-s{s}" for s in seeds] if run_id else []


def replay_command(cluster: str, config: str | None, broker_conf: str | None, sets: list[str], mode: str | None,
                   run_id: str | None, seed: int | None, lake: str, master: str | None, quiet: bool,
                   window: tuple[str | None, str | None] = (None, None), allow_unknown_keys: bool = False,
                   seeds: str | None = None) -> None:
    """``lbreplay replay``; ``window`` is the ``--from`` / ``--to`` flag values. With ``seeds`` (``--seeds 0-4``)
    the same run once per seed, in parallel tasks of one Spark job: Pulsar's random choices drawn from each seed
    (``prediction`` takes the runs as PRED ``run1+run2+...``)."""
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if seed_list is not None and seed is not None:
        raise UsageError("--seed and --seeds: give one of them")
    span = window_from_flags(*window)
    intake = read_run_config(config, broker_conf, sets, allow_unknown_keys)
    if mode:
        if mode not in ("closed-loop", "observed"):
            raise UsageError(f"--mode: expected closed-loop or observed, got {mode!r}")
        intake.replay["mode"] = mode
    spark = get_spark(lake, master=master, quick_jit=quick_jit(lake, cluster, [(intake.pulsar, intake.replay)]))
    specs = with_lines(spark, lake_path(lake), cluster, span, [intake], quiet)
    run_ids = [run_id] if run_id else None
    if seed_list is not None:
        specs = [(pulsar, {**replay, "seed": s}) for pulsar, replay in specs for s in seed_list]
        run_ids = seeded_run_ids(run_id, seed_list) or None
    ids = execute(spark, lake_path(lake), cluster, specs, run_ids=run_ids, seed=seed, quiet=quiet, window=span)
    for rid in ids:
        print(rid)
    if seed_list is not None and len(ids) > 1:
        _progress(quiet, f"{len(ids)} seeds of one run; as `prediction`'s PRED: {'+'.join(ids)}")


def sweep_command(cluster: str, grid: str, seed: int | None, lake: str, master: str | None, quiet: bool,
                  run_id_prefix: str | None = None, window: tuple[str | None, str | None] = (None, None),
                  broker_conf: str | None = None, sets: list[str] | None = None,
                  allow_unknown_keys: bool = False) -> None:
    """``lbreplay sweep``; with ``run_id_prefix`` the runs are ``<prefix>-01``, ``<prefix>-02`` … in grid order
    (``grid_points``' order), so a scheduler can name them before they exist and re-runs replace them.
    ``broker_conf`` is the base the grid overrides, ``sets`` override every point."""
    span = window_from_flags(*window)
    points = grid_points(grid, broker_conf, sets, allow_unknown_keys)
    run_ids = [f"{run_id_prefix}-{i:02d}" for i in range(1, len(points) + 1)] if run_id_prefix else None
    spark = get_spark(lake, master=master, quick_jit=quick_jit(lake, cluster, [(p.pulsar, p.replay) for p in points]))
    specs = with_lines(spark, lake_path(lake), cluster, span, points, quiet)
    for rid in execute(spark, lake_path(lake), cluster, specs, run_ids=run_ids, seed=seed, quiet=quiet, window=span):
        print(rid)
