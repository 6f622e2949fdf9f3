"""The lake's storage below Delta: Hadoop filesystem paths (local or remote), plain Parquet writes and reads,
and Spark actions run side by side."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lbreplay.lake import tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p, p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def path_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` exists (Hadoop ``FileSystem.exists``: a directory or storage URI alike)."""
    p, fs = _hadoop_path(spark, path)
    return bool(fs.exists(p))


def remove_path(spark: SparkSession, path: str) -> None:
    """Delete ``path`` recursively (Hadoop ``FileSystem.delete``)."""
    p, fs = _hadoop_path(spark, path)
    fs.delete(p, True)


def publish_text(spark: SparkSession, path: str, text: str) -> bool:
    """Write ``text`` to the file ``path`` unless it exists: written to a private temporary file first, then
    renamed into place (Hadoop ``FileSystem.rename`` does not replace an existing file). True if this call's file
    was published, False if another writer's came first (its file stays)."""
    p, fs = _hadoop_path(spark, path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    tmp = jvm.org.apache.hadoop.fs.Path(f"{path}.{uuid.uuid4().hex}.tmp")
    out = fs.create(tmp, False)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()
    published = bool(fs.rename(tmp, p))
    if not published:
        fs.delete(tmp, False)
    return published


def read_text(spark: SparkSession, path: str) -> str:
    """The whole text of the file ``path`` (Hadoop filesystem: local or remote)."""
    p, fs = _hadoop_path(spark, path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(p)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_parquet(df: DataFrame, path: str) -> None:
    """Overwrite ``path`` with ``df`` as Parquet in 8 MiB row groups (what the replay tasks read in batches)."""
    df.write.mode("overwrite").option("parquet.block.size", 8 * 1024 * 1024).parquet(path)


def plain_parquet_files(spark: SparkSession, lake: str, table: tables.Table, df: DataFrame) -> list[str] | None:
    """The local Parquet files of ``df`` (a pinned, filtered read of ``table``) when plain Parquet reads see exactly
    the table's rows (a local lake; no deletion vectors, no column mapping: Delta protocol reader version 1); else
    None."""
    if "://" in lake and not lake.startswith("file:"):
        return None
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{tables.table_location(lake, table.name)}`").first()
    if detail is None or int(detail["minReaderVersion"]) > 1:
        return None
    files = [re.sub(r"^file:(//)?", "", f) for f in df.inputFiles()]
    return sorted(files) if all(os.path.isfile(f) for f in files) else None


# Above this estimated size a table's validation takes its cheap-summary paths (``lake.table_scan``, the tiling and
# consistency builders); below it each of their extra Spark jobs would cost more than the per-row forms they replace.
LARGE_SCAN_BYTES = 4 << 20


def partition_bytes(lake: str, of: list[tables.Table], cluster: str) -> int | None:
    """Bytes of the files under each table's ``cluster=<cluster>`` partition directory of a local lake (files Delta
    has removed but not vacuumed included), with no JVM; None for a storage URI."""
    if "://" in lake:
        return None
    total = 0
    for table in of:
        for root, _, files in os.walk(f"{tables.table_location(lake, table.name)}/cluster={cluster}"):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def estimated_bytes(df: DataFrame) -> int:
    """Spark's size estimate of ``df`` from its optimized plan's statistics (a Delta scan: its files' sizes); no
    Spark job."""
    return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def is_large(df: DataFrame) -> bool:
    """Whether ``df`` is estimated at :data:`LARGE_SCAN_BYTES` or more."""
    return estimated_bytes(df) >= LARGE_SCAN_BYTES


def run_concurrently(*jobs: Callable[[], Any]) -> list[Any]:
    """Run independent Spark actions from driver threads so their jobs share the cores (Spark schedules
    concurrent jobs; each action's fixed driver-side cost overlaps the others' tasks). Results in order; the
    first error is raised after every action has ended."""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]
