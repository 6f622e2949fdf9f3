"""What a lake is, and the clusters and runs it knows: the checks commands run before reading one.

A path is a lake when it holds at least one of lbreplay's Delta tables (``<lake>/<table>/_delta_log``, a table of
``tables.ALL_TABLES``, ``dump_tables.DUMP_TABLES`` or ``validation_runs``): ``generate``, ``ingest`` and
``collect`` make one; every other command refuses a path that is not one (exit 2) instead of answering from an
empty lake it would create. A local path is checked with no JVM (before Spark starts); a storage URI through the
session's Hadoop FileSystem.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote

from lbreplay.errors import UsageError

LISTED = 20  # known clusters / runs named in an error, at most


def table_names() -> list[str]:
    """Every table name of a lake: inputs, dump tables, outputs and ``validation_runs``."""
    from lbreplay.lake.dump_tables import DUMP_TABLES, VALIDATION_RUNS
    from lbreplay.lake.tables import ALL_TABLES

    return sorted({*ALL_TABLES, *DUMP_TABLES, VALIDATION_RUNS.name})


def no_lake(lake: str) -> UsageError:
    return UsageError(f"no lake at {lake}; create one with `lbreplay generate …`, `lbreplay ingest …` or "
                      f"`lbreplay collect --lake …`")


def is_local_lake(lake: str) -> bool:
    """Whether the local directory ``lake`` holds a Delta log of one of lbreplay's tables (no JVM)."""
    path = re.sub(r"^file:(//)?", "", lake)
    return os.path.isdir(path) and any(os.path.isdir(os.path.join(path, n, "_delta_log")) for n in table_names())


def require_local_lake(lake: str) -> None:
    """Refuse (exit 2) a local path that is not a lake (:func:`is_local_lake`); nothing is created."""
    if not is_local_lake(lake):
        raise no_lake(lake)


def table_exists(spark: Any, lake: str, name: str) -> bool:
    """Whether ``<lake>/<name>/_delta_log`` exists (local: the filesystem; a URI: Hadoop's FileSystem)."""
    from lbreplay.lake.tables import table_location

    log = table_location(lake, name) + "/_delta_log"
    if "://" not in lake or lake.startswith("file:"):
        return os.path.isdir(re.sub(r"^file:(//)?", "", log))
    from lbreplay.lake.storage import path_exists

    return path_exists(spark, log)


def require_lake(spark: Any, lake: str) -> None:
    """Refuse (exit 2) a lake (local or a storage URI) that holds none of lbreplay's tables."""
    if not any(table_exists(spark, lake, n) for n in table_names()):
        raise no_lake(lake)


def _listing(kind: str, names: list[str]) -> str:
    if not names:
        return f"no {kind} yet"
    more = f" (and {len(names) - LISTED} more)" if len(names) > LISTED else ""
    return f"known {kind}: {', '.join(names[:LISTED])}{more}"


def _partition_value(path: str, column: str) -> str | None:
    """The value of Hive-style partition directory ``column=<value>`` in a data file's path (unescaped)."""
    match = re.search(rf"/{column}=([^/]+)/", path)
    if match is None:
        return None
    value = match.group(1)
    return unquote(unquote(value)) if "://" in path or path.startswith("file:") else unquote(value)


def _cluster_tables() -> dict[str, Any]:
    """The tables holding a cluster's input rows: ``tables.INPUT_TABLES`` and the dump tables."""
    from lbreplay.lake.dump_tables import DUMP_TABLES
    from lbreplay.lake.tables import INPUT_TABLES

    return {**INPUT_TABLES, **DUMP_TABLES}


def clusters_in(spark: Any, lake: str, name: str) -> set[str]:
    """Clusters with rows in table ``name``: the ``cluster=`` partitions of its current Delta snapshot's files (no
    Spark job); a distinct query where the table is not partitioned by cluster first."""
    from lbreplay.lake.tables import table_location

    if not table_exists(spark, lake, name):
        return set()
    df = spark.read.format("delta").load(table_location(lake, name))
    if _cluster_tables()[name].partition_by[:1] == ("cluster",):
        return {v for f in df.inputFiles() if (v := _partition_value(f, "cluster")) is not None}
    return {str(r[0]) for r in df.select("cluster").distinct().collect()}


def known_clusters(spark: Any, lake: str) -> list[str]:
    """Clusters with rows in the lake's input tables (``broker_load``, ``bundle_load``, ``topic_load``,
    ``namespace_policy``) or its dump tables (``lake.dump_tables``), sorted."""
    return sorted(set().union(*(clusters_in(spark, lake, name) for name in _cluster_tables())))


def require_cluster(spark: Any, lake: str, cluster: str) -> None:
    """Refuse (exit 2) a cluster with no input rows in the lake, naming the known ones (stops at the first table
    that has the cluster)."""
    if any(cluster in clusters_in(spark, lake, name) for name in _cluster_tables()):
        return
    raise UsageError(f"unknown cluster {cluster!r} in {lake}; {_listing('clusters', known_clusters(spark, lake))}")


def known_runs(spark: Any, lake: str) -> list[str]:
    """Run ids of the lake's ``runs`` table (every status), sorted."""
    from lbreplay.lake.tables import RUNS, table_location

    if not table_exists(spark, lake, RUNS.name):
        return []
    df = spark.read.format("delta").load(table_location(lake, RUNS.name))
    return sorted({r[0] for r in df.select("run_id").distinct().collect()})


def require_runs(spark: Any, lake: str, run_ids: list[str]) -> None:
    """Refuse (exit 2) run ids the lake's ``runs`` table does not hold, naming the known ones."""
    known = known_runs(spark, lake)
    missing = [r for r in run_ids if r not in set(known)]
    if missing:
        raise UsageError(f"unknown run id{'s' if len(missing) > 1 else ''} {', '.join(missing)} in {lake}; "
                         f"{_listing('runs', known)}")
