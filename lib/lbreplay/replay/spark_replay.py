"""Replays on Spark: pinned inputs, the per-tick stream (stateless DataFrame work), one run per Spark task.

* Inputs are read at their current Delta versions, recorded in ``runs.input_versions``.
* Stateless preparation as DataFrame transformations: the per-broker least-squares sums of the load model and
  the "tick stream", Parquet parts written in parallel once per (cluster, input versions) under
  ``<lake>/_replay_cache``: brokers aggregated into one row per tick, bundles as flat (tick, bundle) rows, each
  input partition sorted by tick with no shuffle; every file sorted by tick, the task merges a part's files by
  tick. Topics, the biggest input, are read by the task straight from ``topic_load``'s files where plain Parquet
  reads see the table (:mod:`lbreplay.replay.topic_files`), else written as a flat (tick, topic) part with their
  ring positions.
* The stateful tick loop runs inside Spark tasks (``mapInPandas`` over the run specs, one run per task): each
  task streams the tick rows with Arrow in bounded batches, so memory does not grow with the history and
  nothing of the history reaches the driver. Never one Spark job per tick.
* Outputs are written per table with one Delta ``replaceWhere run_id IN (...)`` commit each (re-running a run
  id replaces its rows), and the ``runs`` row last: a run is complete when ``runs.status = 'succeeded'``.
* A time window (``--from`` / ``--to``, :class:`~lbreplay.lake.window.TimeWindow`) selects the input rows whose
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
import sys
import time
import uuid
from dataclasses import asdict
from typing import Any, Callable, Iterator

import numpy as np

from lbreplay import __version__
from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.lake import tables as T
from lbreplay.lake.window import TimeWindow, window_from_flags
from lbreplay.replay.engine import ObservedTick, Replay, RunSpec, StaticInputs
from lbreplay.replay.load_model import Calibration

RES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
BATCH_TICKS = 8
MAX_STREAM_FILES = 8
# Audit slices replay this many ticks before their own to rebuild strategy state (EWMA h=0.9 keeps 0.9**120
# = 3e-6 of its start; bundle averages take one sample per report write, so they saturate far sooner).
AUDIT_WARMUP_TICKS = 120


def _progress(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- inputs
def input_versions(spark: Any, lake: str, cluster: str) -> dict[str, int]:
    """Current Delta version of each input table that exists (from the Delta log, no Spark job)."""
    from lbreplay.lake.validation import delta_version

    return {name: v for name, table in T.INPUT_TABLES.items() if (v := delta_version(spark, lake, table)) is not None}


def read_pinned(spark: Any, lake: str, name: str, versions: dict[str, int], cluster: str,
                window: TimeWindow | None = None) -> Any:
    """``cluster``'s rows of input table ``name`` at its pinned version; with ``window``, only rows in it."""
    from pyspark.sql import functions as F

    df = (
        spark.read.format("delta").option("versionAsOf", versions[name]).load(T.table_location(lake, name))
        .where(F.col("cluster") == cluster)
    )
    return df if window is None else df.where(window.predicate())


def _require_validated(spark: Any, lake: str, cluster: str) -> None:
    try:
        from lbreplay.lake.validation import require_validated
    except ImportError:  # validation not installed in this build
        return
    require_validated(spark, lake, cluster)


# --------------------------------------------------------------------------------------------- preparation
def calibration_sums(broker_load: Any) -> Any:
    """Per broker least-squares sums of cpu usage (y) against msg rate in+out (x): DataFrame -> DataFrame."""
    from pyspark.sql import functions as F

    x = F.col("msg_rate_in") + F.col("msg_rate_out")
    y = F.col("cpu_usage")
    return broker_load.groupBy("broker").agg(
        F.count(F.lit(1)).alias("n"), F.sum(x).alias("sx"), F.sum(y).alias("sy"),
        F.sum(x * x).alias("sxx"), F.sum(x * y).alias("sxy"),
    )


def _field(array_col: str, name: str) -> Any:
    """``transform(array_of_structs, e -> e.name)``: one parallel array per struct field."""
    from pyspark.sql import functions as F

    return F.transform(array_col, lambda e: e[name])


def with_index(df: Any, index_df: Any, key: str, idx: str) -> Any:
    return df.join(index_df.hint("broadcast"), on=key, how="inner")


def broker_stream(broker_load: Any, broker_index: Any, partitions: int = 1) -> Any:
    """One row per tick: broker rows (sorted by broker index) as parallel arrays."""
    from pyspark.sql import functions as F

    fields = ["b_idx"] + [f"{r}_{k}" for r in RES for k in ("usage", "limit")] + ["last_update_ms"]
    s = F.sort_array(F.collect_list(F.struct(*[F.col(f) for f in fields]))).alias("b")
    df = broker_load.withColumn("last_update_ms", F.unix_millis(F.coalesce("last_update", "ts")))
    agg = with_index(df, broker_index, "broker", "b_idx").repartition(partitions, "ts").groupBy("ts").agg(s)
    return agg.select("ts", *[_field("b", f).alias(f) for f in fields])


def _sessions() -> Any:
    """Consumers + producers (null = 0) as double: the sessions ``loadBalancerNamespaceBundleMaxSessions`` limits."""
    from pyspark.sql import functions as F

    return (F.coalesce(F.col("consumer_count"), F.lit(0)) + F.coalesce(F.col("producer_count"), F.lit(0))).cast("double")


def bundle_stream(bundle_load: Any, broker_index: Any) -> Any:
    """One row per (tick, observed bundle): ``ts_ms``, the bundle's name, its owner's broker index and its loads
    (the task orders a tick's bundles by name: the layout's order)."""
    from pyspark.sql import functions as F

    return with_index(bundle_load, broker_index, "broker", "b_idx").select(
        F.unix_millis(F.col("ts")).alias("ts_ms"), F.col("bundle").alias("u_name"), F.col("b_idx").alias("u_owner"),
        F.col("msg_throughput_in").alias("u_thr_in"), F.col("msg_throughput_out").alias("u_thr_out"),
        F.col("msg_rate_in").alias("u_rate_in"), F.col("msg_rate_out").alias("u_rate_out"),
        _sessions().alias("u_sessions"),
        F.col("topics").cast("double").alias("u_topics"),
    )


def topic_stream(topic_load: Any, namespace_index: Any) -> Any:
    """One row per (tick, topic): ``ts_ms``, the topic's global ring position ``t_pos`` (namespace index * 2**32 +
    crc32(topic), NamespaceBundleFactory.getBundle's hash) and its load. Topics of namespaces without bundles are
    dropped (the inner join with the namespace index)."""
    from pyspark.sql import functions as F

    return topic_load.join(namespace_index.hint("broadcast"), on="namespace", how="inner").select(
        F.unix_millis(F.col("ts")).alias("ts_ms"),
        (F.col("ns_idx").cast("long") * F.lit(1 << 32) + F.crc32(F.col("topic"))).alias("t_pos"),
        F.col("msg_throughput_in").alias("t_thr_in"), F.col("msg_throughput_out").alias("t_thr_out"),
        F.col("msg_rate_in").alias("t_rate_in"), F.col("msg_rate_out").alias("t_rate_out"),
        _sessions().alias("t_sessions"),
    )


TOPIC_COLUMNS = ("t_thr_in", "t_thr_out", "t_rate_in", "t_rate_out", "t_sessions")
BUNDLE_COLUMNS = ("u_thr_in", "u_thr_out", "u_rate_in", "u_rate_out", "u_sessions", "u_topics")
FLAT_BATCH_ROWS = 1 << 16
STREAM_FORMAT = 6  # part of the cache key: bump when the stream's layout changes


def _write_stream_part(df: Any, path: str) -> None:
    """Write the broker part of the tick stream: one row per tick, each file sorted by ``ts_ms``. The rows were
    hash-partitioned by ``ts`` before their aggregation, so the files are written in parallel with no further
    shuffle; the task merges the files by ``ts_ms``."""
    from pyspark.sql import functions as F

    _write_parquet(df.withColumn("ts_ms", F.unix_millis(F.col("ts"))).drop("ts").sortWithinPartitions("ts_ms"), path)


def _write_flat_part(df: Any, path: str) -> None:
    """Write a flat part of the tick stream (one row per tick and bundle / topic) with no shuffle: each input
    partition sorted by ``ts_ms`` becomes one file (input partitions merged down to ``MAX_STREAM_FILES``, the
    task keeps one batch of each file open); the task merges the files by ``ts_ms``."""
    if df.rdd.getNumPartitions() > MAX_STREAM_FILES:
        df = df.coalesce(MAX_STREAM_FILES)
    _write_parquet(df.sortWithinPartitions("ts_ms"), path)


def run_concurrently(*jobs: Callable[[], Any]) -> list[Any]:
    """Run independent Spark actions from driver threads so their jobs share the cores (Spark schedules
    concurrent jobs; each action's fixed driver-side cost overlaps the others' tasks). Results in order; the
    first error is raised after every action has ended."""
    from concurrent.futures import ThreadPoolExecutor

    if len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]


def _write_parquet(df: Any, path: str) -> None:
    df.write.mode("overwrite").option("parquet.block.size", 8 * 1024 * 1024).parquet(path)


def prepare(spark: Any, lake: str, cluster: str, versions: dict[str, int], use_topics: bool = True,
            window: TimeWindow | None = None, topic_files: bool = True) -> tuple[str, dict[str, Any]]:
    """Write (or reuse) the tick stream of ``cluster`` at ``versions`` (only the ticks in ``window`` when given);
    return its path and the static inputs. ``topic_files=False`` writes the topic part even where the task could
    read ``topic_load``'s files itself."""
    if "broker_load" not in versions or "bundle_load" not in versions:
        raise InvalidInputError(f"cluster {cluster!r}: broker_load and bundle_load are required (run generate or ingest)")
    key_parts: list[Any] = [cluster, versions, use_topics, STREAM_FORMAT] + ([window.to_json()] if window else [])
    key_parts += [] if topic_files else ["topic-part"]
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:16]
    base = f"{lake}/_replay_cache/{cluster}/{key}"
    marker = f"{base}/_meta_json"  # written last: the static inputs, and the sign that the stream is complete
    if _exists(spark, marker):
        meta = json.loads("".join(r[0] for r in spark.read.text(marker).collect()))
        if all(os.path.isfile(f) for f in meta.get("topic_files", ())):  # else vacuumed since: prepare anew
            return meta["stream"], meta
    bl = read_pinned(spark, lake, "broker_load", versions, cluster, window)
    ul = read_pinned(spark, lake, "bundle_load", versions, cluster, window)
    has_topics = use_topics and "topic_load" in versions
    stream = f"{base}/stream"
    # few files per part (the task keeps one batch of each open), parallel across the cores
    parts = max(1, min(int(spark.sparkContext.defaultParallelism), MAX_STREAM_FILES))

    def broker_side() -> tuple[list[str], Calibration]:
        """The broker universe, the load model's calibration, then the broker and bundle parts."""
        brokers = sorted(r[0] for r in bl.select("broker").distinct().collect())
        if not brokers and window is not None:
            raise UsageError(f"{window.flag_text()}: cluster {cluster!r} has no ticks in {window.describe()}")
        if not brokers:
            raise InvalidInputError(f"table=broker_load: no rows for cluster {cluster!r}")
        sums = {r["broker"]: r for r in calibration_sums(bl).collect()}
        arr = lambda k: np.array([float(sums[b][k] or 0.0) for b in brokers])  # noqa: E731
        calib = Calibration.from_sums(arr("n"), arr("sx"), arr("sy"), arr("sxx"), arr("sxy"))
        bidx = spark.createDataFrame([(b, i) for i, b in enumerate(brokers)], "broker STRING, b_idx INT")
        _write_stream_part(broker_stream(bl, bidx, parts), f"{stream}/brokers")
        _write_flat_part(bundle_stream(ul, bidx), f"{stream}/bundles")
        return brokers, calib

    def namespace_side() -> tuple[list[str], list[str] | None]:
        """The namespaces (bundle_load's), then the topics: the files of ``topic_load`` when the task can read
        them itself, else the topic part (the big one) written on their ring positions."""
        namespaces = sorted(r[0] for r in ul.select("namespace").distinct().collect())
        files = None
        if has_topics:
            tl = read_pinned(spark, lake, "topic_load", versions, cluster, window)
            files = direct_topic_files(spark, lake, tl) if topic_files else None
            if files is None:
                nidx = spark.createDataFrame([(n, i) for i, n in enumerate(namespaces)], "namespace STRING, ns_idx INT")
                _write_flat_part(topic_stream(tl, nidx), f"{stream}/topics")
        return namespaces, files

    (brokers, calib), (namespaces, files) = run_concurrently(broker_side, namespace_side)
    meta = {
        "broker_ids": brokers, "namespaces": namespaces,
        "cpu_base": calib.cpu_base.tolist(), "cpu_per_msg": calib.cpu_per_msg.tolist(),
        "topics": has_topics, "stream": stream,
    }
    if files is not None:
        meta["topic_files"] = files
        meta["topic_window_us"] = list(window.epoch_micros()) if window else [None, None]
    spark.createDataFrame([(json.dumps(meta),)], "k STRING").coalesce(1).write.mode("overwrite").text(marker)
    return meta["stream"], meta


def direct_topic_files(spark: Any, lake: str, topic_load: Any) -> list[str] | None:
    """The local Parquet files of the pinned, cluster-filtered ``topic_load`` when plain Parquet reads see exactly
    the table's rows (a local lake; no deletion vectors, no column mapping: Delta protocol reader version 1), so
    the task reads the topics itself (:mod:`lbreplay.replay.topic_files`); else None (the topic part is written)."""
    import re

    if "://" in lake and not lake.startswith("file:"):
        return None
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{T.table_location(lake, T.TOPIC_LOAD.name)}`").first()
    if detail is None or int(detail["minReaderVersion"]) > 1:
        return None
    files = [re.sub(r"^file:(//)?", "", f) for f in topic_load.inputFiles()]
    return sorted(files) if all(os.path.isfile(f) for f in files) else None


def _exists(spark: Any, path: str) -> bool:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return bool(p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(p))


# --------------------------------------------------------------------------------------------- the task
def _part_files(path: str) -> list[str]:
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet")) if os.path.isdir(path) else []


def _stream_rows(path: str) -> Iterator[tuple[int, dict[str, Any], int]]:
    """(ts_ms, columns of its batch, row) for every row of the broker part, in ``ts_ms`` order: each file is
    sorted, and the files are merged, reading a few ticks at a time with Arrow (bounded memory)."""
    import heapq

    import pyarrow.parquet as pq

    def rows(f: str) -> Iterator[tuple[int, dict[str, Any], int]]:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH_TICKS):
            cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
            for r, ts in enumerate(cols["ts_ms"].to_pylist()):
                yield ts, cols, r

    return heapq.merge(*(rows(f) for f in _part_files(path)), key=lambda x: x[0])


def _flat_ticks(path: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(ts_ms, the tick's ``columns`` as arrays, string columns as lists) per tick of a flat part, in ``ts_ms`` order. Each file is sorted
    by ``ts_ms`` and read a batch of rows at a time; the files are merged by ``ts_ms`` and a tick's rows found in
    several files are concatenated in file order (bounded memory: one batch per file and one tick)."""
    import heapq
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lbreplay.replay.topic_files import tick_runs

    def chunks(f: str) -> Iterator[tuple[int, Any]]:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=FLAT_BATCH_ROWS, columns=["ts_ms", *columns]):
            yield from tick_runs(batch.column(0).to_numpy(zero_copy_only=False), batch)

    merged = heapq.merge(*(chunks(f) for f in _part_files(path)), key=lambda x: x[0])
    for ts, group in itertools.groupby(merged, key=lambda x: x[0]):
        batches = [b for _, b in group]
        out = {}
        for k, name in enumerate(columns, start=1):
            arrays = [b.column(k) for b in batches]
            if pa.types.is_string(arrays[0].type):
                out[name] = [v for a in arrays for v in a.to_pylist()]
            else:
                out[name] = np.concatenate([a.to_numpy(zero_copy_only=False) for a in arrays])
        yield ts, out


def _topic_ticks(path: str) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(ts_ms, positions, values (T, 6)) per tick of the topic part, in ``ts_ms`` order; a tick's topics ordered by
    ring position, topics sharing a position (crc32 collision) by their values, so the sums are the same whatever
    the files' row order (:func:`~lbreplay.replay.topic_files.ring_order`, as when the task reads the files)."""
    from lbreplay.replay.topic_files import ring_order

    for ts, cols in _flat_ticks(path, ("t_pos", *TOPIC_COLUMNS)):
        pos = cols["t_pos"].astype(np.int64)
        vals = np.ones((len(pos), 6))
        for k, name in enumerate(TOPIC_COLUMNS):
            vals[:, k] = np.nan_to_num(cols[name].astype(np.float64))
        order, _ = ring_order(pos, vals)
        yield ts, pos[order], vals[order]


def _bundle_ticks(path: str) -> Iterator[tuple[int, list[str], np.ndarray, np.ndarray]]:
    """(ts_ms, names, owner indices, values (U, 6)) per tick of the bundle part, the tick's bundles ordered by name
    (the layout's order)."""
    for ts, cols in _flat_ticks(path, ("u_name", "u_owner", *BUNDLE_COLUMNS)):
        names = cols["u_name"]
        order = sorted(range(len(names)), key=names.__getitem__)
        vals = np.column_stack([np.nan_to_num(cols[c].astype(np.float64)) for c in BUNDLE_COLUMNS])
        yield ts, [names[i] for i in order], cols["u_owner"].astype(np.int32)[order], vals[order]


def _ticks_from_stream(path: str, meta: dict[str, Any]) -> Iterator[ObservedTick]:
    """The observed ticks of a prepared stream, in time order: the broker part defines the ticks; the bundle
    and topic parts join it on ``ts_ms`` (a tick they lack has no bundles / topics)."""
    nb = len(meta["broker_ids"])
    bundles = _bundle_ticks(f"{path}/bundles")
    topics: Iterator[Any] = iter(())
    if meta.get("topic_files") is not None:
        from lbreplay.replay.topic_files import topic_ticks

        window_us = tuple(meta.get("topic_window_us") or (None, None))
        topics = topic_ticks(meta["topic_files"], meta["namespaces"], window_us)  # type: ignore[arg-type]
    elif meta.get("topics"):
        topics = _topic_ticks(f"{path}/topics")
    pending: dict[str, Any] = {"u": next(bundles, None), "t": next(topics, None)}

    def at(key: str, it: Iterator[Any], ts: int) -> Any:
        while pending[key] is not None and pending[key][0] < ts:
            pending[key] = next(it, None)
        return pending[key] if pending[key] is not None and pending[key][0] == ts else None

    def lst(row: Any, name: str, dtype: Any = np.float64) -> np.ndarray:
        v = None
        if row is not None and name in row[1] and row[1][name][row[2]].is_valid:
            v = row[1][name][row[2]].values
        return np.zeros(0, dtype=dtype) if v is None else v.to_numpy(zero_copy_only=False).astype(dtype)

    for tick, b in enumerate(_stream_rows(f"{path}/brokers")):
        ts = b[0]
        b_idx = lst(b, "b_idx", np.int64)
        alive = np.zeros(nb, dtype=bool)
        alive[b_idx] = True
        usage = np.zeros((nb, 5))
        limit = np.zeros((nb, 5))
        for k, res in enumerate(RES):
            usage[b_idx, k] = np.nan_to_num(lst(b, f"{res}_usage"))
            limit[b_idx, k] = np.nan_to_num(lst(b, f"{res}_limit"))
        last_update = np.full(nb, -1, dtype=np.int64)
        last_update[b_idx] = lst(b, "last_update_ms", np.int64)
        u = at("u", bundles, ts)
        t = at("t", topics, ts)
        yield ObservedTick(tick, int(ts), alive, usage, limit,
                           bundle_names=u[1] if u is not None else [],
                           bundle_owner=u[2] if u is not None else np.zeros(0, dtype=np.int32),
                           bundle_values=u[3] if u is not None else np.zeros((0, 6)),
                           topic_values=t[2] if t is not None else None,
                           topic_positions=t[1] if t is not None else None, last_update=last_update)


OUT_SCHEMA = "run_id STRING, kind STRING, payload STRING"


PROGRESS_EVERY_TICKS = 25


def _write_progress(directory: str | None, key: str, done: int) -> None:
    """Tasks report ticks replayed through a small file per run slice (local lakes only)."""
    if not directory:
        return
    import os

    tmp = os.path.join(directory, f".{key}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(done))
    os.replace(tmp, os.path.join(directory, key))


def run_partition(meta: dict[str, Any], policies_json: dict[str, Any] | None, progress_dir: str | None = None) -> Any:
    """The ``mapInPandas`` function: replays each run spec it receives; yields (run_id, kind, payload JSON)."""

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        from lbreplay.replay.metrics import RunMetrics

        policies = None
        if policies_json:
            from lbreplay.kernel.policies import NamespacePolicies

            policies = NamespacePolicies.from_json(
                policies_json["isolation"] or None,
                None,
                {ns: {"policies": {"namespaceAntiAffinityGroup": g}} for ns, g in policies_json["anti_affinity"].items()},
                shedding_excluded_namespaces=policies_json["excluded"],
            )
        static = StaticInputs(
            meta["broker_ids"], meta["namespaces"],
            Calibration(np.array(meta["cpu_base"]), np.array(meta["cpu_per_msg"])), policies,
        )
        ids = meta["broker_ids"]
        for pdf in batches:
            for spec_json in pdf["spec"]:
                spec = RunSpec(**json.loads(spec_json))
                replay = Replay(spec, static)
                metrics = RunMetrics(replay.conf["loadBalancerSheddingGracePeriodMinutes"])
                rows: list[tuple[str, str, str]] = []
                ticks = 0
                first = max(0, spec.tick_start - spec.warmup)
                for obs in _ticks_from_stream(meta["stream"], meta):
                    if obs.tick < first:
                        continue
                    if spec.tick_end is not None and obs.tick >= spec.tick_end:
                        break
                    res = replay.step(obs)
                    if obs.tick < spec.tick_start:
                        continue  # warm-up: rebuild the strategies' state, emit nothing
                    ticks += 1
                    if ticks % PROGRESS_EVERY_TICKS == 0:
                        _write_progress(progress_dir, f"{spec.run_id}-{spec.tick_start}", ticks)
                    lay = replay.layout
                    thr = {}
                    if res.decisions and lay is not None:
                        vals = replay._bundle_values(obs, lay)
                        thr = {n: float(v[0] + v[1]) for n, v in zip(lay.names, vals)}
                    metrics.add(res, ids, thr)
                    bt = res.broker_tick
                    for i in np.flatnonzero(bt.alive):
                        rows.append((spec.run_id, "broker_ticks", json.dumps([
                            bt.tick, bt.ts_ms, ids[i], *bt.pct[i].tolist(), float(bt.max_usage[i]),
                            float(bt.weighted_max_usage[i]), _num(bt.score[i]), float(bt.msg_rate[i]),
                            float(bt.msg_throughput[i]), int(bt.num_bundles[i]), int(bt.num_topics[i]), True])))
                    for d in res.decisions:
                        rows.append((spec.run_id, "decisions", json.dumps([
                            d.tick, d.ts_ms, d.seq, d.action, d.bundle, d.source_broker, d.target_broker,
                            d.child_bundles, d.strategy, d.reason, {k: _num(v) for k, v in d.details.items()}])))
                    if spec.mode != "observed":
                        for iv in res.closed:
                            rows.append((spec.run_id, "ownership", json.dumps(_interval(iv))))
                    if len(rows) >= 20000:
                        yield pd.DataFrame(rows, columns=["run_id", "kind", "payload"])
                        rows = []
                if spec.mode != "observed":
                    for iv in replay.finish():
                        rows.append((spec.run_id, "ownership", json.dumps(_interval(iv))))
                for name, value in metrics.rows():
                    rows.append((spec.run_id, "run_metrics", json.dumps([name, _num(value)])))
                import resource

                peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # this worker's peak RSS
                rows.append((spec.run_id, "run_metrics", json.dumps(["task_peak_rss_mb", peak_mb])))
                rows.append((spec.run_id, "ticks", json.dumps([ticks])))
                _write_progress(progress_dir, f"{spec.run_id}-{spec.tick_start}", ticks)
                yield pd.DataFrame(rows, columns=["run_id", "kind", "payload"])

    return fn


def _num(v: float) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None


def _interval(iv: Any) -> list[Any]:
    return [iv.bundle, iv.namespace, iv.range_lower, iv.range_upper, iv.broker, iv.from_tick, iv.to_tick,
            iv.from_ts_ms, iv.to_ts_ms]


# --------------------------------------------------------------------------------------------- outputs
def combine_metrics(seq_metrics: Any, broker_ticks: Any) -> Any:
    """run_metrics: the tasks' additive metrics summed over tick slices, plus the load distribution over time
    (std, max-min spread and max/mean of the weighted max usage over alive brokers per tick; mean, p95, final)
    computed from ``broker_ticks``: DataFrame -> DataFrame."""
    from pyspark.sql import functions as F

    summed = seq_metrics.groupBy("run_id", "metric").agg(
        F.when(F.col("metric") == "task_peak_rss_mb", F.max("value")).otherwise(F.sum("value")).alias("value"))
    wide = summed.groupBy("run_id").pivot("metric", ["time_to_balance_minutes_total", "cluster_events",
                                                     "calibration_error_total", "calibration_ticks"]).agg(F.first("value"))
    derived = wide.select(
        "run_id",
        F.when(F.col("cluster_events") > 0, F.col("time_to_balance_minutes_total") / F.col("cluster_events"))
        .otherwise(F.lit(0.0)).alias("time_to_balance_minutes"),
        F.when(F.col("calibration_ticks") > 0, F.col("calibration_error_total") / F.col("calibration_ticks"))
        .otherwise(F.lit(None).cast("double")).alias("calibration_mape"),
    )
    derived = derived.select("run_id", F.expr(
        "stack(2, 'time_to_balance_minutes', time_to_balance_minutes, 'calibration_mape', calibration_mape)"
    ).alias("metric", "value"))
    per_tick = broker_ticks.where("alive").groupBy("run_id", "tick").agg(
        F.stddev_pop("weighted_max_usage").alias("load_std"),
        (F.max("weighted_max_usage") - F.min("weighted_max_usage")).alias("load_spread"),
        F.when(F.avg("weighted_max_usage") > 0, F.max("weighted_max_usage") / F.avg("weighted_max_usage"))
        .otherwise(F.lit(1.0)).alias("load_max_over_mean"),
    )
    # every distribution KPI in one aggregation: mean, p95 and the final tick's value (max_by tick)
    names = ("load_std", "load_spread", "load_max_over_mean")
    aggs = [F.count(F.lit(1)).cast("double").alias("ticks")]
    for name in names:
        aggs += [F.avg(name).alias(f"{name}_mean"), F.percentile(name, 0.95).alias(f"{name}_p95"),
                 F.max_by(name, "tick").alias(f"{name}_final")]
    kpis = per_tick.groupBy("run_id").agg(*aggs)
    cols = ["ticks"] + [f"{n}_{s}" for n in names for s in ("mean", "p95", "final")]
    stacked = kpis.select("run_id", F.expr(
        f"stack({len(cols)}, " + ", ".join(f"'{c}', CAST({c} AS DOUBLE)" for c in cols) + ")").alias("metric", "value"))
    rest = summed.where(~F.col("metric").isin("time_to_balance_minutes_total", "calibration_error_total",
                                               "calibration_ticks"))
    return rest.unionByName(derived).unionByName(stacked)


def observed_ownership(bundle_load: Any, cluster: str) -> Any:
    """Observed ownership as intervals (gaps and islands over the tick sequence of ``bundle_load``):
    DataFrame -> DataFrame with the ``ownership`` columns minus ``run_id``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ticks = bundle_load.select("ts").distinct().withColumn("tick", F.row_number().over(Window.orderBy("ts")) - 1)
    rows = bundle_load.join(ticks, "ts").select("bundle", "namespace", "range_lower", "range_upper", "broker", "tick", "ts")
    w = Window.partitionBy("bundle").orderBy("tick")
    rows = rows.withColumn("prev_broker", F.lag("broker").over(w)).withColumn("prev_tick", F.lag("tick").over(w))
    rows = rows.withColumn("new_island", (F.col("prev_broker").isNull() | (F.col("prev_broker") != F.col("broker"))
                                          | (F.col("prev_tick") != F.col("tick") - 1)).cast("int"))
    rows = rows.withColumn("island", F.sum("new_island").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    last_tick = ticks.agg(F.max("tick").alias("last")).first()["last"]
    isl = rows.groupBy("bundle", "namespace", "range_lower", "range_upper", "broker", "island").agg(
        F.min("tick").alias("from_tick"), F.max("tick").alias("last_tick"), F.min("ts").alias("from_ts"))
    nxt = ticks.select(F.col("tick").alias("to_tick_j"), F.col("ts").alias("to_ts"))
    isl = isl.withColumn("to_tick", F.when(F.col("last_tick") < last_tick, F.col("last_tick") + 1))
    isl = isl.join(nxt, isl["to_tick"] == nxt["to_tick_j"], "left")
    return isl.select(F.lit(cluster).alias("cluster"), "bundle", "namespace", "range_lower", "range_upper", "broker",
                      F.col("from_tick").cast("bigint"), F.col("to_tick").cast("bigint"), "from_ts", "to_ts")


def write_outputs(spark: Any, lake: str, cluster: str, raw: Any, runs: list[dict[str, Any]],
                  observed_ownership: Any = None) -> None:
    from pyspark.sql import functions as F

    ids = [r["run_id"] for r in runs]
    where = "run_id IN (" + ", ".join("'" + i.replace("'", "''") + "'" for i in ids) + ")"
    ms = lambda c: ((F.col(c) if isinstance(c, str) else c) / 1000).cast("timestamp")  # noqa: E731
    bt_fields = ["tick", "ts_ms", "broker"] + [f"{r}_pct" for r in RES] + [
        "max_usage", "weighted_max_usage", "score", "msg_rate", "msg_throughput", "num_bundles", "num_topics", "alive"]
    arr = F.from_json(F.col("payload"), "ARRAY<STRING>")
    bt = raw.where(F.col("kind") == "broker_ticks").select("run_id", arr.alias("p")).select(
        "run_id", *[F.col("p")[i].alias(f) for i, f in enumerate(bt_fields)])
    bt = bt.select("run_id", F.lit(cluster).alias("cluster"), F.col("tick").cast("bigint").alias("tick"),
                   ms(F.col("ts_ms").cast("double")).alias("ts"), "broker",
                   *[F.col(f).cast("double").alias(f) for f in bt_fields[3:13]],
                   F.col("num_bundles").cast("bigint").alias("num_bundles"),
                   F.col("num_topics").cast("bigint").alias("num_topics"),
                   F.col("alive").cast("boolean").alias("alive"))
    dec = _json_array_struct(raw, "decisions", [
        ("tick", "BIGINT"), ("ts_ms", "BIGINT"), ("seq", "BIGINT"), ("action", "STRING"), ("bundle", "STRING"),
        ("source_broker", "STRING"), ("target_broker", "STRING"), ("child_bundles", "ARRAY<STRING>"),
        ("strategy", "STRING"), ("reason", "STRING"), ("details", "MAP<STRING,DOUBLE>")])
    # audit slices number their decisions from 1 each: renumber per run in (tick, seq) order
    from pyspark.sql import Window

    dec = dec.withColumn("seq", F.row_number().over(Window.partitionBy("run_id").orderBy("tick", "seq")).cast("bigint"))
    dec = dec.select("run_id", F.lit(cluster).alias("cluster"), "tick", ms("ts_ms").alias("ts"), "seq", "action",
                     "bundle", "source_broker", "target_broker", "child_bundles", "strategy", "reason", "details")
    own = _json_array_struct(raw, "ownership", [
        ("bundle", "STRING"), ("namespace", "STRING"), ("range_lower", "BIGINT"), ("range_upper", "BIGINT"),
        ("broker", "STRING"), ("from_tick", "BIGINT"), ("to_tick", "BIGINT"), ("from_ts_ms", "BIGINT"),
        ("to_ts_ms", "BIGINT")])
    own = own.select("run_id", F.lit(cluster).alias("cluster"), "bundle", "namespace", "range_lower", "range_upper",
                     "broker", "from_tick", "to_tick", ms("from_ts_ms").alias("from_ts"), ms("to_ts_ms").alias("to_ts"))
    observed = [r["run_id"] for r in runs if r["mode"] == "observed"]
    if observed and observed_ownership is not None:
        own = own.unionByName(observed_ownership.crossJoin(
            spark.createDataFrame([(i,) for i in observed], "run_id STRING")).select(*own.columns))
    seq_metrics = _json_array_struct(raw, "run_metrics", [("metric", "STRING"), ("value", "DOUBLE")])
    # broker_ticks feeds its table and every per-tick KPI of run_metrics: parse the JSON once
    from pyspark import StorageLevel

    bt = bt.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        met = combine_metrics(seq_metrics, bt)
        # four independent Delta commits, concurrently; the runs row is written after all of them
        run_concurrently(*[
            (lambda table=table, df=df: T.replace_partitions(spark, lake, table, df, where))
            for table, df in ((T.OWNERSHIP, own), (T.DECISIONS, dec), (T.BROKER_TICKS, bt), (T.RUN_METRICS, met))
        ])
    finally:
        bt.unpersist()
    ticks: dict[str, int] = {}
    for r in raw.where(F.col("kind") == "ticks").collect():
        ticks[r["run_id"]] = ticks.get(r["run_id"], 0) + json.loads(r["payload"])[0]
    finished = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [(r["run_id"], cluster, r["mode"], json.dumps(r["config"], sort_keys=True), int(r["seed"]),
             r["input_versions"], r["started_at"], finished, "succeeded", int(ticks.get(r["run_id"], 0)), __version__,
             json.dumps(r["replay"], sort_keys=True)) for r in runs]
    runs_df = spark.createDataFrame(rows, T.RUNS.struct_type())
    T.replace_partitions(spark, lake, T.RUNS, runs_df, where)


def _json_array_struct(raw: Any, kind: str, fields: list[tuple[str, str]]) -> Any:
    """Payloads are JSON arrays; parse them positionally into typed columns."""
    from pyspark.sql import functions as F

    arr = F.from_json(F.col("payload"), "ARRAY<STRING>")
    df = raw.where(F.col("kind") == kind).select("run_id", arr.alias("p"))
    cols = []
    for i, (name, typ) in enumerate(fields):
        c = F.col("p")[i]
        if typ.startswith("ARRAY") or typ.startswith("MAP"):
            c = F.from_json(c, typ)
        else:
            c = c.cast(typ)
        cols.append(c.alias(name))
    return df.select("run_id", *cols)


# --------------------------------------------------------------------------------------------- commands
def execute(
    spark: Any, lake: str, cluster: str, specs: list[tuple[dict[str, Any], dict[str, Any]]], *,
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
            _require_validated(spark, lake, cluster)
        except InvalidInputError:
            spark.sparkContext.cancelAllJobs()  # the preparation's: no need to finish it
            raise
        T.ensure_tables(spark, lake, T.OUTPUT_TABLES)
        return _policies_json(spark, lake, cluster, versions)

    policies, (_, meta) = run_concurrently(checked, lambda: prepare(spark, lake, cluster, versions, window=window))
    if window is not None:
        specs = [(pulsar, {**replay, "window": window.to_json()}) for pulsar, replay in specs]
    _progress(quiet, f"tick stream ready in {time.time() - t0:.1f}s; replaying {len(specs)} run(s)")
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
    total_ticks = _stream_ticks(meta["stream"])
    slices = max(1, int(spark.sparkContext.defaultParallelism))
    spec_rows = []
    for r in runs:
        base = RunSpec(r["run_id"], cluster, r["mode"], r["config"], r["seed"], r["replay"])
        if r["mode"] == "observed" and slices > 1 and total_ticks > 2 * slices:
            # audit: no feedback, so tick slices run in parallel; each replays a warm-up before its slice
            warmup = int(r["replay"].get("warmupTicks", AUDIT_WARMUP_TICKS))
            bounds = np.linspace(0, total_ticks, slices + 1).astype(int)
            for a, b in zip(bounds[:-1], bounds[1:]):
                spec = RunSpec(**{**asdict(base), "tick_start": int(a), "tick_end": int(b), "warmup": warmup})
                spec_rows.append((json.dumps(asdict(spec)),))
        else:
            spec_rows.append((json.dumps(asdict(base)),))
    rdd = spark.sparkContext.parallelize(spec_rows, numSlices=len(spec_rows))
    progress_dir = None
    if "://" not in lake:
        progress_dir = os.path.join(lake, "_progress", uuid.uuid4().hex)
        os.makedirs(progress_dir, exist_ok=True)
    raw = spark.createDataFrame(rdd, "spec STRING").mapInPandas(run_partition(meta, policies, progress_dir), OUT_SCHEMA)
    staging = f"{lake}/_staging/{uuid.uuid4().hex}"
    with _ProgressWatcher(progress_dir, total_ticks * len(runs), len(runs), quiet):
        # while the runs replay (one core each), the output tables' Delta snapshots and the views are made ready
        run_concurrently(lambda: raw.write.mode("overwrite").parquet(staging),
                         lambda: _ready_outputs(spark, lake, [r["run_id"] for r in runs]))
    _progress(quiet, f"replayed {len(runs)} run(s) in {time.time() - t0:.1f}s; writing tables")
    obs_own = None
    if any(r["mode"] == "observed" for r in runs):
        obs_own = observed_ownership(read_pinned(spark, lake, "bundle_load", versions, cluster, window), cluster)
    t1 = time.time()
    write_outputs(spark, lake, cluster, spark.read.parquet(staging), runs, obs_own)
    _rm(spark, staging)
    _progress(quiet, f"done in {time.time() - t0:.1f}s (tables {time.time() - t1:.1f}s)")
    return [r["run_id"] for r in runs]


def _ready_outputs(spark: Any, lake: str, run_ids: list[str]) -> None:
    """Load each output table's Delta snapshot with the files its ``replaceWhere`` will replace (kept by Delta
    for the commit that follows), and create the views over the tables."""
    from pyspark.sql import functions as F

    from lbreplay.lake.views import ensure_views

    for table in T.OUTPUT_TABLES.values():
        spark.read.format("delta").load(T.table_location(lake, table.name)).where(F.col("run_id").isin(run_ids)).inputFiles()
    ensure_views(spark, lake)


class _ProgressWatcher:
    """Polls the tasks' progress files while the replay job runs: ticks replayed, runs done, ETA."""

    def __init__(self, directory: str | None, total_ticks: int, runs: int, quiet: bool):
        import threading

        from lbreplay.progress import Progress

        self.directory = directory
        self.progress = Progress(f"replaying {runs} run(s)", total_ticks, "ticks", quiet or directory is None)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _done(self) -> int:
        total = 0
        for name in os.listdir(self.directory or "."):
            if not name.startswith("."):
                try:
                    with open(os.path.join(self.directory, name), encoding="utf-8") as fh:
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
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)


def _stream_ticks(path: str) -> int:
    """Number of ticks in a prepared stream (Parquet footers of its broker part only)."""
    import pyarrow.dataset as ds

    return int(ds.dataset(f"{path}/brokers", format="parquet").count_rows())


def _policies_json(spark: Any, lake: str, cluster: str, versions: dict[str, int]) -> dict[str, Any] | None:
    if "namespace_policy" not in versions:
        return None
    rows = read_pinned(spark, lake, "namespace_policy", versions, cluster).collect()
    groups = {r["namespace"]: r["anti_affinity_group"] for r in rows if r["anti_affinity_group"]}
    excluded = [r["namespace"] for r in rows if r["shedding_excluded"]]
    isolation = {}
    for r in rows:
        if r["isolation_primary"]:
            isolation[f"policy-{r['namespace'].replace('/', '-')}"] = {
                "namespaces": [r["namespace"].replace(".", "\\.")], "primary": list(r["isolation_primary"]),
                "secondary": list(r["isolation_secondary"] or []),
                "auto_failover_policy": {"policy_type": "min_available", "parameters": {
                    "min_limit": str(r["isolation_min_available"] or 1), "usage_threshold": "80"}}}
    if not (groups or excluded or isolation):
        return None
    return {"isolation": isolation, "anti_affinity": groups, "excluded": excluded}


def _rm(spark: Any, path: str) -> None:
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(p, True)


def replay_command(cluster: str, config: str | None, broker_conf: str | None, sets: list[str], mode: str | None,
                   run_id: str | None, seed: int | None, lake: str, master: str | None, quiet: bool,
                   window: tuple[str | None, str | None] = (None, None)) -> None:
    """``lbreplay replay``; ``window`` is the ``--from`` / ``--to`` flag values."""
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.spark import get_spark, lake_path

    span = window_from_flags(*window)
    pulsar, replay = resolve_run_config(config, broker_conf, sets)
    if mode:
        if mode not in ("closed-loop", "observed"):
            raise UsageError(f"--mode: expected closed-loop or observed, got {mode!r}")
        replay["mode"] = mode
    spark = get_spark(lake, master=master)
    ids = execute(spark, lake_path(lake), cluster, [(pulsar, replay)], run_ids=[run_id] if run_id else None,
                  seed=seed, quiet=quiet, window=span)
    print(ids[0])


def sweep_command(cluster: str, grid: str, seed: int | None, lake: str, master: str | None, quiet: bool,
                  run_id_prefix: str | None = None, window: tuple[str | None, str | None] = (None, None)) -> None:
    """``lbreplay sweep``; with ``run_id_prefix`` the runs are ``<prefix>-01``, ``<prefix>-02`` … in grid order
    (``expand_grid``'s order), so a scheduler can name them before they exist and re-runs replace them."""
    from lbreplay.replay.run_config import expand_grid
    from lbreplay.spark import get_spark, lake_path

    span = window_from_flags(*window)
    specs = expand_grid(grid)
    run_ids = [f"{run_id_prefix}-{i:02d}" for i in range(1, len(specs) + 1)] if run_id_prefix else None
    spark = get_spark(lake, master=master)
    for rid in execute(spark, lake_path(lake), cluster, specs, run_ids=run_ids, seed=seed, quiet=quiet, window=span):
        print(rid)
