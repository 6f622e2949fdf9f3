"""The lake's Delta tables (DESIGN.md §4): explicit schemas with unit comments, idempotent creation,
registration in the ``lbreplay`` database, and atomic writes.

Input tables are partitioned by ``cluster`` and ``date`` (UTC day of ``ts``); output tables by ``run_id``.

Each :class:`Table` is also its entry in the lake's registry of tables (:mod:`lbreplay.lake.registry`): besides
its schema, key and partitioning it declares its role, whether ``validate`` runs a suite on it, whether the replay
reads it, which dump sources ``ingest`` fills it from, whether ``generate`` writes it, whether the SQL views read it
and whether every lake has it from the start. Consumers iterate the registry; no other module lists table names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lbreplay.lake.dump_tree import LOCAL_BROKER_DATA, TOPIC_STATS_KIND

DATABASE = "lbreplay"
#: A table's role: read by validate and the replay (an input), written by ``validate`` from the inputs
#: (derived), or written by replays (an output).
INPUT, DERIVED, OUTPUT = "input", "derived", "output"
ROLES = (INPUT, DERIVED, OUTPUT)
RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
RESOURCE_UNITS = {
    "cpu": "percent of one core (limit = 100 x cores)",
    "memory": "MiB (JVM heap)",
    "direct_memory": "MiB (JVM direct memory)",
    "bandwidth_in": "Kbit/s (NIC rx; limit = NIC speed)",
    "bandwidth_out": "Kbit/s (NIC tx; limit = NIC speed)",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL type
    comment: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...]
    key: tuple[str, ...]
    comment: str
    #: Delta table properties set at creation, e.g. which columns get file statistics
    properties: tuple[tuple[str, str], ...] = ()
    # ---- the table's registry entry (lbreplay.lake.registry)
    role: str = INPUT
    #: an input declares it: True = ``lbreplay validate`` runs its suite (``lake.expectations.SUITES[name]``) and
    #: replays require it validated; False = not validated. None (undeclared) is refused for an input.
    validated: bool | None = None
    #: the replay pins its Delta version and reads it (``replay.preparation``; recorded in ``runs.input_versions``)
    replayed: bool = False
    #: the dump sources ``lbreplay ingest`` fills it from (``lake.dump_tree.DUMP_SOURCES``); () = not ingested
    dump_kinds: tuple[str, ...] = ()
    #: ``lbreplay generate`` writes it (the DESIGN.md §4 input tables)
    generated: bool = False
    #: the SQL views (``lake.views``) read it: registered before they are created
    viewed: bool = False
    #: every lake has it from the start (``ensure_tables()``, so ``lbreplay sql`` sees it empty); else it is created
    #: at its first write, and registered by ``lbreplay sql`` once it exists
    eager: bool = False

    def __post_init__(self) -> None:
        """A registry entry that contradicts itself is a programming error, refused at import."""
        if self.role not in ROLES:
            raise ValueError(f"table {self.name}: role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.role == INPUT and self.validated is None:
            raise ValueError(f"table {self.name}: an input table declares validated=True (with its suite in "
                             "lake.expectations) or validated=False")
        if self.role != INPUT and (self.validated or self.replayed or self.dump_kinds or self.generated):
            raise ValueError(f"table {self.name}: only an input table is validated, replayed, ingested or generated")

    @property
    def ingested(self) -> bool:
        """``lbreplay ingest`` writes it (replaced per cluster, even when the dump has no rows for it)."""
        return bool(self.dump_kinds)

    def ddl_columns(self) -> str:
        parts = []
        for c in self.columns:
            null = "" if c.nullable else " NOT NULL"
            comment = c.comment.replace("'", "\\'")
            parts.append(f"`{c.name}` {c.type}{null} COMMENT '{comment}'")
        return ",\n  ".join(parts)

    def struct_type(self) -> Any:
        from pyspark.sql.types import StructType, _parse_datatype_string

        schema = StructType()
        for c in self.columns:
            schema.add(c.name, _parse_datatype_string(c.type), c.nullable, {"comment": c.comment})
        return schema

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: str, comment: str, nullable: bool = True) -> Column:
    return Column(name, type_, comment, nullable)


DATE_COLUMN = _c("date", "DATE", "UTC day of ts (partition)", False)


_RES_COLS = tuple(
    col
    for r in RESOURCES
    for col in (
        _c(f"{r}_usage", "DOUBLE", f"{r} usage, {RESOURCE_UNITS[r]} (ResourceUsage.usage)"),
        _c(f"{r}_limit", "DOUBLE", f"{r} limit, {RESOURCE_UNITS[r]} (ResourceUsage.limit)"),
    )
)

BROKER_LOAD = Table(
    "broker_load",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC): one leader refresh = one tick", False),
        _c("broker", "STRING", "broker id host:port (LocalBrokerData key)", False),
        *_RES_COLS,
        _c("msg_rate_in", "DOUBLE", "msg/s in (sum over bundles)"),
        _c("msg_rate_out", "DOUBLE", "msg/s out"),
        _c("msg_throughput_in", "DOUBLE", "bytes/s in"),
        _c("msg_throughput_out", "DOUBLE", "bytes/s out"),
        _c("num_topics", "BIGINT", "topics owned"),
        _c("num_bundles", "INT", "bundles owned"),
        _c("num_consumers", "INT", "consumers"),
        _c("num_producers", "INT", "producers"),
        _c("broker_version", "STRING", "brokerVersionString"),
        _c("load_manager_class_name", "STRING", "loadManagerClassName"),
        _c("persistent_topics_enabled", "BOOLEAN", "persistentTopicsEnabled"),
        _c("non_persistent_topics_enabled", "BOOLEAN", "nonPersistentTopicsEnabled"),
        _c("last_update", "TIMESTAMP", "when the broker last wrote this report (lastUpdate, UTC)"),
        DATE_COLUMN,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker"),
    "One row per broker report as the leader saw it (LocalBrokerData). A broker without a row at a ts is not alive.",
    validated=True, replayed=True, dump_kinds=(LOCAL_BROKER_DATA,), generated=True, eager=True,
)

# NamespaceBundleStats, as bundle_load and the extensible top-bundles dump carry it
BUNDLE_STATS_COLUMNS: tuple[Column, ...] = (
    _c("msg_rate_in", "DOUBLE", "msg/s in (NamespaceBundleStats.msgRateIn)"),
    _c("msg_rate_out", "DOUBLE", "msg/s out"),
    _c("msg_throughput_in", "DOUBLE", "bytes/s in"),
    _c("msg_throughput_out", "DOUBLE", "bytes/s out"),
    _c("topics", "BIGINT", "topics in the bundle"),
    _c("consumer_count", "INT", "consumers"),
    _c("producer_count", "INT", "producers"),
    _c("cache_size", "BIGINT", "bytes"),
)
BUNDLE_LOAD = Table(
    "bundle_load",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC)", False),
        _c("broker", "STRING", "reporting owner broker id host:port", False),
        _c("bundle", "STRING", "full bundle name tenant/ns/0x%08x_0x%08x", False),
        _c("namespace", "STRING", "tenant/ns"),
        _c("range_lower", "BIGINT", "bundle range lower bound (inclusive), 0..2^32-1"),
        _c("range_upper", "BIGINT", "bundle range upper bound (exclusive; inclusive at 0xffffffff)"),
        *BUNDLE_STATS_COLUMNS,
        DATE_COLUMN,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "broker", "bundle"),
    "One row per bundle per reporting broker per snapshot from its lastStats (NamespaceBundleStats); a bundle "
    "moving between brokers may be listed by both in one tick.",
    validated=True, replayed=True, dump_kinds=(LOCAL_BROKER_DATA,), generated=True, viewed=True, eager=True,
)

TOPIC_LOAD = Table(
    "topic_load",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("ts", "TIMESTAMP", "snapshot time (UTC)", False),
        _c("topic", "STRING", "fully qualified topic name, e.g. persistent://tenant/ns/t", False),
        _c("namespace", "STRING", "tenant/ns"),
        _c("msg_rate_in", "DOUBLE", "msg/s in"),
        _c("msg_rate_out", "DOUBLE", "msg/s out"),
        _c("msg_throughput_in", "DOUBLE", "bytes/s in"),
        _c("msg_throughput_out", "DOUBLE", "bytes/s out"),
        _c("producer_count", "INT", "producers"),
        _c("consumer_count", "INT", "consumers"),
        DATE_COLUMN,
    ),
    ("cluster", "date"),
    ("cluster", "ts", "topic"),
    "Optional per-topic stats; topics map to bundles by CRC32 of the full name. Ingested from collect's "
    "broker-stats/topics polls at each report's time.",
    # file statistics (data skipping) on ts only: readers select by cluster (a partition) and ts, and collecting
    # min/max/null counts of every column of the largest table costs a large share of writing it
    (("delta.dataSkippingStatsColumns", "ts"),),
    validated=True, replayed=True, dump_kinds=(TOPIC_STATS_KIND,), generated=True, eager=True,
)

NAMESPACE_POLICY = Table(
    "namespace_policy",
    (
        _c("cluster", "STRING", "cluster name", False),
        _c("namespace", "STRING", "tenant/ns", False),
        _c("initial_boundaries", "ARRAY<STRING>", "bundles.boundaries as 0x%08x strings"),
        _c("num_bundles", "INT", "initial number of bundles"),
        _c("anti_affinity_group", "STRING", "namespaceAntiAffinityGroup"),
        _c("isolation_primary", "ARRAY<STRING>", "isolation policy primary broker regexes"),
        _c("isolation_secondary", "ARRAY<STRING>", "isolation policy secondary broker regexes"),
        _c("isolation_min_available", "INT", "auto_failover_policy min_limit"),
        _c("shedding_excluded", "BOOLEAN", "in loadBalancerSheddingExcludedNamespaces"),
    ),
    ("cluster",),
    ("cluster", "namespace"),
    "Optional namespace policies (bundles, anti-affinity, isolation, shedding exclusion).",
    validated=True, replayed=True, generated=True, eager=True,
)

QUARANTINE = Table(
    "quarantine",
    (
        _c("cluster", "STRING", "cluster name"),
        _c("table_name", "STRING", "input table the row failed in", False),
        _c("rule", "STRING", "validation rule (expectation) name", False),
        _c("column_name", "STRING", "column checked"),
        _c("row_json", "STRING", "the failing row as JSON"),
        _c("validated_at", "TIMESTAMP", "when validation ran (UTC)"),
    ),
    ("table_name",),
    (),
    "Rows that failed validation, with the rule that failed.",
    role=DERIVED, eager=True,
)


def table_location(lake: str, name: str) -> str:
    return f"{lake.rstrip('/')}/{name}"


def ensure_table(spark: Any, lake: str, table: Table) -> None:
    """Create the Delta table at ``<lake>/<name>`` if missing and register it in ``lbreplay`` (idempotent)."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    part = f"PARTITIONED BY ({', '.join(table.partition_by)})" if table.partition_by else ""
    comment = table.comment.replace("'", "\\'")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in table.properties)
    ddl = (
        f"CREATE TABLE IF NOT EXISTS {DATABASE}.{table.name} (\n  {table.ddl_columns()}\n) USING delta {part} "
        f"COMMENT '{comment}' LOCATION '{table_location(lake, table.name)}'"
        + (f" TBLPROPERTIES ({props})" if props else "")
    )
    for attempt in range(3):
        try:
            spark.sql(ddl)
            return
        except Exception as exc:  # noqa: BLE001 - another process created the table's first commit at the same time
            if attempt < 2 and "SCHEME_MISMATCH" in str(exc) and _add_new_columns(spark, lake, table):
                continue
            if attempt == 2 or not _lost_create_race(exc):
                raise


def _add_new_columns(spark: Any, lake: str, table: Table) -> bool:
    """A lake made before ``table`` gained columns (nullable, at the end of the registry's list): add them to the
    Delta table (``ALTER TABLE … ADD COLUMNS``, one commit) so the registry's schema matches; False when the
    existing table lacks none of them (a different mismatch: left to the caller's error)."""
    location = table_location(lake, table.name)
    existing = {f.name for f in spark.read.format("delta").load(location).schema.fields}
    names = [c.name for c in table.columns]
    missing = [c for c in table.columns if c.name not in existing]
    if not missing or any(not c.nullable for c in missing) or names[: len(names) - len(missing)] != [
            n for n in names if n in existing]:
        return False
    cols = ", ".join(f"{c.name} {c.type} COMMENT '{c.comment.replace(chr(39), chr(92) + chr(39))}'" for c in missing)
    spark.sql(f"ALTER TABLE delta.`{location}` ADD COLUMNS ({cols})")
    return True


def _lost_create_race(exc: Exception) -> bool:
    """Delta's optimistic concurrency: two processes committing version 0 of one table; the loser retries and then
    registers the winner's table (``DELTA_PROTOCOL_CHANGED``, ``DELTA_METADATA_CHANGED``, a file already there)."""
    text = str(exc)
    return any(marker in text for marker in (
        "ProtocolChanged", "PROTOCOL_CHANGED", "MetadataChanged", "METADATA_CHANGED", "FileAlreadyExists",
        "ConcurrentWrite", "CONCURRENT_WRITE", "already exists"))


def ensure_tables(spark: Any, lake: str, tables: dict[str, Table] | None = None) -> None:
    for t in (tables or ALL_TABLES).values():
        ensure_table(spark, lake, t)


def conform(df: Any, table: Table) -> Any:
    """Select and cast ``df``'s columns to ``table``'s schema (order and types); adds ``date`` from ``ts``."""
    from pyspark.sql import functions as F

    cols = []
    for c in table.columns:
        if c.name == "date" and "date" not in df.columns:
            cols.append(F.to_date(F.col("ts")).alias("date"))
        elif c.name in df.columns:
            cols.append(F.col(c.name).cast(c.type).alias(c.name))
        else:
            cols.append(F.lit(None).cast(c.type).alias(c.name))
    return df.select(*cols)


def replace_partitions(spark: Any, lake: str, table: Table, df: Any, where: str) -> None:
    """Atomically replace the rows matching ``where`` (e.g. ``cluster = 'c1'``) with ``df``: one Delta commit (a
    column the table gained since the lake was made is added first, by :func:`ensure_table`)."""
    ensure_table(spark, lake, table)
    (
        conform(df, table)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", where)
        .save(table_location(lake, table.name))
    )


# ---------------------------------------------------------------------------------------------- outputs
RUNS = Table(
    "runs",
    (
        _c("run_id", "STRING", "run id", False),
        _c("cluster", "STRING", "cluster replayed"),
        _c("mode", "STRING", "closed-loop (what-if) or observed (audit)"),
        _c("config", "STRING", "Pulsar broker.conf keys given for the run, JSON"),
        _c("seed", "BIGINT", "random seed"),
        _c("input_versions", "MAP<STRING,BIGINT>", "Delta version of each input table read"),
        _c("started_at", "TIMESTAMP", "UTC"),
        _c("finished_at", "TIMESTAMP", "UTC"),
        _c("status", "STRING", "succeeded | failed"),
        _c("ticks", "BIGINT", "ticks replayed"),
        _c("lbreplay_version", "STRING", "lbreplay version"),
        _c("replay_options", "STRING", "replay: options, JSON"),
    ),
    ("run_id",),
    ("run_id",),
    "One row per replay run; a run's rows in the other output tables are valid when its status is succeeded.",
    role=OUTPUT, viewed=True, eager=True,
)

OWNERSHIP = Table(
    "ownership",
    (
        _c("run_id", "STRING", "run id", False),
        _c("cluster", "STRING", "cluster"),
        _c("bundle", "STRING", "full bundle name"),
        _c("namespace", "STRING", "tenant/ns"),
        _c("range_lower", "BIGINT", "range lower bound"),
        _c("range_upper", "BIGINT", "range upper bound"),
        _c("broker", "STRING", "owner broker id"),
        _c("from_tick", "BIGINT", "first tick owned"),
        _c("to_tick", "BIGINT", "tick ownership ended (exclusive); null = still owned at the end"),
        _c("from_ts", "TIMESTAMP", "UTC"),
        _c("to_ts", "TIMESTAMP", "UTC; null = still owned at the end"),
    ),
    ("run_id",),
    ("run_id", "bundle", "from_tick"),
    "Who owned what when, as intervals [from, to).",
    role=OUTPUT, eager=True,
)

DECISIONS = Table(
    "decisions",
    (
        _c("run_id", "STRING", "run id", False),
        _c("cluster", "STRING", "cluster"),
        _c("tick", "BIGINT", "tick index"),
        _c("ts", "TIMESTAMP", "UTC"),
        _c("seq", "BIGINT", "order of the decision within the run"),
        _c("action", "STRING", "UNLOAD | TRANSFER | ASSIGN | SPLIT | KEEP (a planned bundle the placement kept on "
                               "its owner: no unload)"),
        _c("bundle", "STRING", "bundle"),
        _c("source_broker", "STRING", "broker the bundle left (null for ASSIGN of an orphan)"),
        _c("target_broker", "STRING", "broker the bundle went to"),
        _c("child_bundles", "ARRAY<STRING>", "SPLIT children"),
        _c("strategy", "STRING", "Pulsar strategy class (short name) that decided"),
        _c("reason", "STRING", "why, in Pulsar's words"),
        _c("details", "MAP<STRING,DOUBLE>", "the numbers that drove it: usage, average, threshold, required, bundle load ..."),
        _c("drawn_among", "ARRAY<STRING>", "the brokers Pulsar's placement drew this destination from at random "
                                           "(ThreadLocalRandom); null: no draw"),
    ),
    ("run_id",),
    ("run_id", "seq"),
    "Every load-balancing decision of a run.",
    role=OUTPUT, viewed=True, eager=True,
)

BROKER_TICKS = Table(
    "broker_ticks",
    (
        _c("run_id", "STRING", "run id", False),
        _c("cluster", "STRING", "cluster"),
        _c("tick", "BIGINT", "tick index"),
        _c("ts", "TIMESTAMP", "UTC"),
        _c("broker", "STRING", "broker id"),
        *(_c(f"{r}_pct", "DOUBLE", f"{r} usage, percent of limit") for r in RESOURCES),
        _c("max_usage", "DOUBLE", "getMaxResourceUsage, fraction"),
        _c("weighted_max_usage", "DOUBLE", "getMaxResourceUsageWithWeight, fraction"),
        _c("score", "DOUBLE", "the shedding strategy's own score (e.g. ThresholdShedder EWMA), fraction"),
        _c("msg_rate", "DOUBLE", "msg/s in+out"),
        _c("msg_throughput", "DOUBLE", "bytes/s in+out"),
        _c("num_bundles", "BIGINT", "bundles owned"),
        _c("num_topics", "BIGINT", "topics owned"),
        _c("alive", "BOOLEAN", "broker alive at this tick"),
    ),
    ("run_id",),
    ("run_id", "tick", "broker"),
    "Per broker per tick load as replayed (modelled, not the leader's stale view).",
    role=OUTPUT, viewed=True, eager=True,
)

RUN_METRICS = Table(
    "run_metrics",
    (
        _c("run_id", "STRING", "run id", False),
        _c("metric", "STRING", "metric name", False),
        _c("value", "DOUBLE", "value"),
    ),
    ("run_id",),
    ("run_id", "metric"),
    "KPIs of a run.",
    role=OUTPUT, viewed=True, eager=True,
)

#: The tables this module declares, in the registry's order (:mod:`lbreplay.lake.registry` joins them with
#: :data:`lbreplay.lake.dump_tables.TABLES`).
TABLES: tuple[Table, ...] = (BROKER_LOAD, BUNDLE_LOAD, TOPIC_LOAD, NAMESPACE_POLICY, QUARANTINE,
                             RUNS, OWNERSHIP, DECISIONS, BROKER_TICKS, RUN_METRICS)
#: The DESIGN.md §4 input tables (``generate`` writes them).
INPUT_TABLES: dict[str, Table] = {t.name: t for t in TABLES if t.generated}
#: The tables every lake has from the start (:func:`ensure_tables`' default): the DESIGN.md §4 inputs, the
#: quarantine and the outputs; the dump tables and ``validation_runs`` are created at their first write.
ALL_TABLES: dict[str, Table] = {t.name: t for t in TABLES if t.eager}
OUTPUT_TABLES: dict[str, Table] = {t.name: t for t in TABLES if t.role == OUTPUT}
