"""Reading a Delta table's transaction log (``_delta_log/<version>.json`` commit files) through Hadoop's FileSystem,
so storage URIs work too, without a Spark job: the current version, and whether commits touched a cluster."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lbreplay.lake.tables import Table, table_location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def delta_version(spark: SparkSession, lake: str, table: Table) -> int | None:
    """Current Delta version of ``table`` in ``lake`` (None if the table does not exist): the highest
    ``_delta_log/<version>.json`` commit file (Delta protocol), listed through Hadoop's FileSystem so storage
    URIs work too; no Spark job. Falls back to ``DeltaTable.history(1)``."""
    path = table_location(lake, table.name)
    try:
        jvm = spark._jvm
        assert jvm is not None  # else the fallback below
        log = jvm.org.apache.hadoop.fs.Path(f"{path}/_delta_log")
        fs = log.getFileSystem(spark._jsc.hadoopConfiguration())
        if not fs.exists(log):
            return None
        versions = [
            int(name[:-5])
            for status in fs.listStatus(log)
            if (name := status.getPath().getName()).endswith(".json") and name[:-5].isdigit()
        ]
        return max(versions) if versions else None
    except Exception:  # noqa: BLE001 - e.g. no JVM gateway (Spark Connect)
        from delta.tables import DeltaTable  # only on this fallback path (delta-spark's Python API)

        if not DeltaTable.isDeltaTable(spark, path):
            return None
        return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


MAX_COMMITS_READ = 500


def cluster_untouched(spark: SparkSession, lake: str, table: Table, cluster: str, since: int, until: int) -> bool:
    """True when no Delta commit in ``(since, until]`` added or removed a file of ``cluster``'s partition or
    changed the table's metadata (``since = -1``: since the table's creation, whose commit 0 sets it): read from
    the commit files (``add`` / ``remove`` actions carry their ``partitionValues``), no Spark job. False when a
    commit file is gone (log cleanup) or unreadable, or when more than ``MAX_COMMITS_READ`` commits would be read
    (then a scan of the cluster's rows is the cheaper answer)."""
    if until - since > MAX_COMMITS_READ:
        return False
    path = table_location(lake, table.name)
    try:
        jvm = spark._jvm
        assert jvm is not None  # else the fallback below
        conf = spark._jsc.hadoopConfiguration()
        for version in range(since + 1, until + 1):
            f = jvm.org.apache.hadoop.fs.Path(f"{path}/_delta_log/{version:020d}.json")
            fs = f.getFileSystem(conf)
            if not fs.exists(f):
                return False
            stream = fs.open(f)
            try:
                text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
            for line in text.splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                if "metaData" in action and version > 0:
                    return False
                for kind in ("add", "remove"):
                    if kind in action:
                        values = action[kind].get("partitionValues")
                        if not isinstance(values, dict) or "cluster" not in values or values["cluster"] == cluster:
                            return False  # this cluster's files, or a file of unknown partition
        return True
    except Exception:  # noqa: BLE001 - no JVM gateway, or an unexpected log: fall back to the fingerprint
        return False

