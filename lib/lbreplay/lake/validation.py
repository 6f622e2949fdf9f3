"""``lbreplay validate``: Great Expectations 1.x suites over the input tables, quarantine, validation status.

One suite per table, run once per table on the rows of the clusters being validated, read at a pinned Delta
version. Every rule is a GE expectation whose ``meta.rule`` is the rule name. Rules GE expresses directly use GE's
own expectations; rules it cannot (finite numbers, range tiling, a live reporting broker, name/column
consistency) are computed with Spark into a flag column (null = ok, else what is wrong) asserted with
``ExpectColumnValuesToBeNull``.

=========================  ===================================================================================
rule                       meaning (GE expectation)
=========================  ===================================================================================
``key_not_null``           key columns are set (ExpectColumnValuesToNotBeNull)
``unique_key``             (cluster, ts, entity) is unique — e.g. no duplicate (cluster, ts, broker)
                           (ExpectCompoundColumnsToBeUnique)
``non_negative``           rates, throughputs and counters >= 0 (ExpectColumnValuesToBeBetween min 0)
``finite``                 no NaN / ±Infinity in any DOUBLE column (flag)
``float_range``            resource usages and limits within ±Float.MAX_VALUE (Pulsar's percentUsage() casts the
                           usage to float: beyond it the percentage is Infinity) (flag: the columns out of range)
``limit_positive``         resource limits > 0 (ExpectColumnValuesToBeBetween strict min 0); an error for cpu,
                           memory and direct memory, a **warning** for the bandwidth limits (Pulsar reports 0
                           when the NIC speed is unknown and then counts bandwidth as 0 %)
``bundle_name_format``     ``tenant/ns/0x%08x_0x%08x`` in lower-case hex (ExpectColumnValuesToMatchRegex)
``range_lower_lt_upper``   range_upper > range_lower (ExpectColumnPairValuesAToBeGreaterThanB)
``bundle_name_consistent`` namespace / range_lower / range_upper agree with the bundle name (flag)
``ranges_tile_namespace``  per (cluster, ts, namespace) the ranges tile [0x00000000, 0xffffffff] with no gap or
                           overlap (flag: the row where the gap/overlap is seen); a **warning**: real dumps
                           overlap around splits and while a bundle moves (two brokers list it in one tick),
                           and leave gaps while an unloaded bundle waits for its next owner (DESIGN.md §4)
``reporting_broker_alive`` the reporting broker has a broker_load (extensible: broker_load_data_ext) row at that
                           ts (flag)
``max_samples_positive``   BundleData maxSamples >= 1 (0 makes Pulsar's TimeAverageMessageData divide by zero)
``num_samples_within_max`` 0 <= numSamples <= maxSamples (ExpectColumnPairValuesAToBeGreaterThanB or_equal)
``topic_name_format``      ``persistent://tenant/ns/topic`` (or non-persistent)
``namespace_format``       ``tenant/ns`` (or ``tenant/cluster/ns``)
``num_bundles_positive``   namespace_policy.num_bundles >= 1
``boundaries_well_formed`` initial boundaries are lower-case 0x%08x, strictly increasing, from 0x00000000 to
                           0xffffffff, num_bundles + 1 of them (flag)
=========================  ===================================================================================

On failure every failing rule is reported as ``table=… column=… rule=… failing=N`` (N = GE's unexpected count)
with up to 5 sample rows, failing rows go to the ``quarantine`` table (the validated clusters' previous quarantine
rows are replaced), and :func:`validate_command` raises :class:`~lbreplay.errors.InvalidInputError` (exit 3).
Each validation appends one ``validation_runs`` row per (cluster, table with rows) with the Delta version and a
content fingerprint; :func:`is_validated` / :func:`require_validated` let replays refuse input that was never
validated, failed, or changed since.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Literal

from lbreplay.errors import InvalidInputError
from lbreplay.lake.dump_tables import (
    BROKER_LOAD_DATA_EXT,
    BROKER_TIME_AVERAGE,
    BUNDLE_DATA,
    TOP_BUNDLES_LOAD_DATA,
    VALIDATION_RUNS,
)
from lbreplay.lake.tables import (
    BROKER_LOAD,
    BUNDLE_LOAD,
    NAMESPACE_POLICY,
    QUARANTINE,
    RESOURCES,
    TOPIC_LOAD,
    Table,
    table_location,
)

BUNDLE_NAME_REGEX = r"^[^/]+/[^/]+(/[^/]+)?/0x[0-9a-f]{8}_0x[0-9a-f]{8}$"
TOPIC_NAME_REGEX = r"^(persistent|non-persistent)://[^/]+/[^/]+(/[^/]+)?/[^/].*$"
NAMESPACE_REGEX = r"^[^/]+/[^/]+(/[^/]+)?$"
MAX_HASH = 0xFFFFFFFF
SAMPLE_ROWS = 5
PASSED = "passed"
FAILED = "failed"

#: Tables validated, in this order (inputs, then the dump tables ingest adds).
VALIDATED_TABLES: tuple[Table, ...] = (
    BROKER_LOAD,
    BUNDLE_LOAD,
    TOPIC_LOAD,
    NAMESPACE_POLICY,
    BUNDLE_DATA,
    BROKER_TIME_AVERAGE,
    BROKER_LOAD_DATA_EXT,
    TOP_BUNDLES_LOAD_DATA,
)


# ----------------------------------------------------------------------------------------------------------------
# rules


@dataclass(frozen=True)
class _Context:
    """Pinned frames of every validated table (restricted to the clusters being validated)."""

    spark: Any
    frames: dict[str, Any]


Builder = Callable[[Any, _Context], Any]


@dataclass(frozen=True)
class Rule:
    """One named check = one GE expectation. ``kind``: not_null | unique | between | regex | pair | flag."""

    name: str
    kind: str
    columns: tuple[str, ...]
    severity: str = "error"  # "error" fails validation; "warning" is printed only
    min_value: float | None = None
    max_value: float | None = None
    strict_min: bool = False
    regex: str | None = None
    or_equal: bool = False
    build: Builder | None = None  # adds the helper/flag column the expectation reads

    @property
    def flag(self) -> str:
        return f"_v_{self.name}"

    @property
    def label(self) -> str:
        return ",".join(self.columns)

    def expectation(self, index: int) -> Any:
        """The GE expectation for this rule (``meta`` carries the rule name and index)."""
        import great_expectations.expectations as gxe
        from great_expectations.expectations.metadata_types import FailureSeverity

        common: dict[str, Any] = {
            "meta": {"rule": self.name, "columns": list(self.columns), "index": index},
            "severity": FailureSeverity.WARNING if self.severity == "warning" else FailureSeverity.CRITICAL,
        }
        col = self.columns[0]
        if self.kind == "not_null":
            return gxe.ExpectColumnValuesToNotBeNull(column=col, **common)
        if self.kind == "unique":
            return gxe.ExpectCompoundColumnsToBeUnique(column_list=list(self.columns), **common)
        if self.kind == "between":
            return gxe.ExpectColumnValuesToBeBetween(
                column=col, min_value=self.min_value, max_value=self.max_value, strict_min=self.strict_min, **common
            )
        if self.kind == "regex":
            assert self.regex is not None  # a regex rule carries its pattern
            return gxe.ExpectColumnValuesToMatchRegex(column=col, regex=self.regex, **common)
        if self.kind == "pair":
            return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A=self.columns[0],
                column_B=self.columns[1],
                or_equal=self.or_equal,
                ignore_row_if="either_value_is_missing",
                **common,
            )
        if self.kind == "flag":
            return gxe.ExpectColumnValuesToBeNull(column=self.flag, **common)
        raise ValueError(f"unknown rule kind {self.kind}")

    def failing(self) -> Any:
        """Spark predicate selecting the rows GE counts as unexpected for this rule (nulls ignored like GE)."""
        from pyspark.sql import functions as F

        c = F.col(self.columns[0])
        if self.kind == "not_null":
            return c.isNull()
        if self.kind == "unique":
            return F.col("_n_unique_key") > 1
        if self.kind == "between":
            cond = F.lit(False)
            if self.min_value is not None:
                cond = cond | ((c <= F.lit(self.min_value)) if self.strict_min else (c < F.lit(self.min_value)))
            if self.max_value is not None:
                cond = cond | (c > F.lit(self.max_value))
            return c.isNotNull() & cond
        if self.kind == "regex":
            return c.isNotNull() & ~c.rlike(self.regex or "")
        if self.kind == "pair":
            a, b = F.col(self.columns[0]), F.col(self.columns[1])
            return a.isNotNull() & b.isNotNull() & ((a < b) if self.or_equal else (a <= b))
        return F.col(self.flag).isNotNull()


def _hex(c: Any) -> Any:
    from pyspark.sql import functions as F

    return F.concat(F.lit("0x"), F.lpad(F.lower(F.hex(c)), 8, "0"))


def _unique_builder(key: tuple[str, ...]) -> Builder:
    def build(df: Any, ctx: _Context) -> Any:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        return df.withColumn("_n_unique_key", F.count(F.lit(1)).over(Window.partitionBy(*key)))

    return build


def _finite_builder(cols: tuple[str, ...]) -> Builder:
    def build(df: Any, ctx: _Context) -> Any:
        from pyspark.sql import functions as F

        parts = [F.when(F.isnan(F.col(c)) | (F.abs(F.col(c)) == F.lit(float("inf"))), F.lit(c)) for c in cols]
        v = F.concat_ws(",", *parts)
        return df.withColumn("_v_finite", F.when(v == "", F.lit(None).cast("string")).otherwise(v))

    return build


def _tiling_build(df: Any, ctx: _Context) -> Any:
    """Per (cluster, ts, namespace), ranges sorted by lower bound must chain from 0x00000000 to 0xffffffff:
    each lower bound equals the highest upper bound before it (NamespaceBundles: boundaries partition the ring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("cluster", "ts", "namespace").orderBy("range_lower", "range_upper", "bundle")
    lo, hi = F.col("range_lower"), F.col("range_upper")
    prev = F.max(hi).over(w.rowsBetween(Window.unboundedPreceding, -1))
    nxt = F.lead(lo).over(w)
    valid = lo.isNotNull() & hi.isNotNull()
    end = F.greatest(hi, F.coalesce(prev, hi))

    def say(*parts: Any) -> Any:
        return F.concat(*[F.lit(p) if isinstance(p, str) else p for p in parts])

    v = (
        F.when(~valid, F.lit(None))
        .when(prev.isNull() & (lo != 0), say("gap: the first range starts at ", _hex(lo), ", not 0x00000000"))
        .when(prev.isNotNull() & (lo < prev), say("overlap: starts at ", _hex(lo), " inside a range ending at ", _hex(prev)))
        .when(prev.isNotNull() & (lo > prev), say("gap: ", _hex(prev), " to ", _hex(lo), " not covered"))
        .when(nxt.isNull() & (end != F.lit(MAX_HASH)), say("gap: the last range ends at ", _hex(end), ", not 0xffffffff"))
    )
    return df.withColumn("_v_ranges_tile_namespace", v.cast("string"))


def _alive_builder(ref: Table) -> Builder:
    def build(df: Any, ctx: _Context) -> Any:
        from pyspark.sql import functions as F

        frame = ctx.frames.get(ref.name)
        if frame is None:
            frame = ctx.spark.createDataFrame([], "cluster STRING, ts TIMESTAMP, broker STRING")
        alive = frame.select("cluster", "ts", "broker").distinct().withColumn("_alive", F.lit(True))
        joined = df.join(alive, ["cluster", "ts", "broker"], "left")
        msg = F.concat(F.lit(f"no {ref.name} row for broker "), F.col("broker"), F.lit(" at this ts"))
        return joined.withColumn("_v_reporting_broker_alive", F.when(F.col("_alive").isNull(), msg)).drop("_alive")

    return build


def _consistent_build(df: Any, ctx: _Context) -> Any:
    from pyspark.sql import functions as F

    lo, hi = _hex(F.col("range_lower")), _hex(F.col("range_upper"))
    expected = F.concat(F.col("namespace"), F.lit("/"), lo, F.lit("_"), hi)
    bad = F.col("bundle").rlike(BUNDLE_NAME_REGEX) & (expected.isNull() | (expected != F.col("bundle")))
    msg = F.concat(F.lit("namespace/range columns give "), F.coalesce(expected, F.lit("null")))
    return df.withColumn("_v_bundle_name_consistent", F.when(bad, msg))


def _boundaries_build(df: Any, ctx: _Context) -> Any:
    from pyspark.sql import functions as F

    return df.withColumn(
        "_v_boundaries_well_formed",
        F.expr(
            """CASE
              WHEN initial_boundaries IS NULL THEN NULL
              WHEN size(initial_boundaries) < 2 THEN 'fewer than 2 boundaries'
              WHEN exists(initial_boundaries, x -> x IS NULL OR NOT x rlike '^0x[0-9a-f]{8}$')
                THEN 'a boundary is not lower-case 0x%08x'
              WHEN initial_boundaries[0] != '0x00000000' OR element_at(initial_boundaries, -1) != '0xffffffff'
                THEN 'boundaries must start at 0x00000000 and end at 0xffffffff'
              WHEN exists(sequence(1, size(initial_boundaries) - 1),
                          i -> initial_boundaries[i] <= initial_boundaries[i - 1])
                THEN 'boundaries are not strictly increasing'
              WHEN num_bundles IS NOT NULL AND size(initial_boundaries) != num_bundles + 1
                THEN 'num_bundles + 1 boundaries expected'
            END"""
        ),
    )


def _key_rules(table: Table) -> list[Rule]:
    rules = [Rule("key_not_null", "not_null", (c,)) for c in table.key]
    rules.append(Rule("unique_key", "unique", table.key, build=_unique_builder(table.key)))
    return rules


def _non_negative(*cols: str) -> list[Rule]:
    return [Rule("non_negative", "between", (c,), min_value=0) for c in cols]


def _finite(table: Table) -> list[Rule]:
    cols = tuple(c.name for c in table.columns if c.type == "DOUBLE")
    return [Rule("finite", "flag", cols, build=_finite_builder(cols))] if cols else []


FLOAT_MAX = 3.4028234663852886e38  # java.lang.Float.MAX_VALUE
_RESOURCE_COLS = tuple(f"{r}_{k}" for r in RESOURCES for k in ("usage", "limit"))


def _float_range_build(df: Any, ctx: _Context) -> Any:
    from pyspark.sql import functions as F

    cols = _RESOURCE_COLS
    parts = [F.when(F.abs(F.col(c)) > F.lit(FLOAT_MAX), F.lit(c)) for c in cols]
    v = F.concat_ws(",", *parts)
    return df.withColumn("_v_float_range", F.when(v == "", F.lit(None).cast("string")).otherwise(v))


def _limits() -> list[Rule]:
    # Pulsar computes ResourceUsage.percentUsage() as (float) usage / limit: beyond Float.MAX_VALUE it is Infinity
    rules = [Rule("float_range", "flag", _RESOURCE_COLS, build=_float_range_build)]
    rules += [
        Rule("limit_positive", "between", (f"{r}_limit",), min_value=0, strict_min=True)
        for r in ("cpu", "memory", "direct_memory")
    ]
    rules += [
        Rule("limit_positive", "between", (f"{r}_limit",), severity="warning", min_value=0, strict_min=True)
        for r in ("bandwidth_in", "bandwidth_out")
    ]
    return rules


def _bundle_rules() -> list[Rule]:
    return [
        Rule("bundle_name_format", "regex", ("bundle",), regex=BUNDLE_NAME_REGEX),
        Rule("range_lower_lt_upper", "pair", ("range_upper", "range_lower")),
        Rule(
            "bundle_name_consistent",
            "flag",
            ("bundle", "namespace", "range_lower", "range_upper"),
            build=_consistent_build,
        ),
    ]


_RATES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_STATS = (*_RATES, "topics", "consumer_count", "producer_count", "cache_size")


def _tamd_rules(prefix: str) -> list[Rule]:
    return [
        Rule("max_samples_positive", "between", (f"{prefix}_max_samples",), min_value=1),
        Rule("num_samples_within_max", "between", (f"{prefix}_num_samples",), min_value=0),
        Rule("num_samples_within_max", "pair", (f"{prefix}_max_samples", f"{prefix}_num_samples"), or_equal=True),
        *_non_negative(*(f"{prefix}_{c}" for c in _RATES)),
    ]


SUITES: dict[str, tuple[Rule, ...]] = {
    BROKER_LOAD.name: (
        *_key_rules(BROKER_LOAD),
        *_non_negative(*_RATES, "num_topics", "num_bundles", "num_consumers", "num_producers"),
        *_finite(BROKER_LOAD),
        *_limits(),
    ),
    BUNDLE_LOAD.name: (
        *_key_rules(BUNDLE_LOAD),
        *_bundle_rules(),
        *_non_negative(*_STATS),
        *_finite(BUNDLE_LOAD),
        # a warning: real dumps overlap (a parent and its children around a split, a bundle listed by its old and
        # new owner while it moves) and leave gaps (a bundle unloaded and not yet placed) — DESIGN.md §4
        Rule("ranges_tile_namespace", "flag", ("range_lower", "range_upper"), severity="warning",
             build=_tiling_build),
        Rule("reporting_broker_alive", "flag", ("broker",), build=_alive_builder(BROKER_LOAD)),
    ),
    TOPIC_LOAD.name: (
        *_key_rules(TOPIC_LOAD),
        Rule("topic_name_format", "regex", ("topic",), regex=TOPIC_NAME_REGEX),
        *_non_negative(*_RATES, "producer_count", "consumer_count"),
        *_finite(TOPIC_LOAD),
    ),
    NAMESPACE_POLICY.name: (
        *_key_rules(NAMESPACE_POLICY),
        Rule("namespace_format", "regex", ("namespace",), regex=NAMESPACE_REGEX),
        Rule("num_bundles_positive", "between", ("num_bundles",), min_value=1),
        *_non_negative("isolation_min_available"),
        Rule("boundaries_well_formed", "flag", ("initial_boundaries",), build=_boundaries_build),
    ),
    BUNDLE_DATA.name: (
        *_key_rules(BUNDLE_DATA),
        *_bundle_rules(),
        *_non_negative("topics"),
        *_tamd_rules("short"),
        *_tamd_rules("long"),
        *_finite(BUNDLE_DATA),
    ),
    BROKER_TIME_AVERAGE.name: (
        *_key_rules(BROKER_TIME_AVERAGE),
        *_non_negative(*(c.name for c in BROKER_TIME_AVERAGE.columns if c.type == "DOUBLE")),
        *_finite(BROKER_TIME_AVERAGE),
    ),
    BROKER_LOAD_DATA_EXT.name: (
        *_key_rules(BROKER_LOAD_DATA_EXT),
        *_non_negative(*_RATES, "bundle_count", "topics"),
        *_finite(BROKER_LOAD_DATA_EXT),
        *_limits(),
    ),
    TOP_BUNDLES_LOAD_DATA.name: (
        *_key_rules(TOP_BUNDLES_LOAD_DATA),
        *_bundle_rules(),
        *_non_negative(*_STATS),
        *_finite(TOP_BUNDLES_LOAD_DATA),
        Rule("reporting_broker_alive", "flag", ("broker",), build=_alive_builder(BROKER_LOAD_DATA_EXT)),
    ),
}


# ----------------------------------------------------------------------------------------------------------------
# results


@dataclass
class RuleResult:
    """Outcome of one expectation on one table."""

    table: str
    rule: str
    column: str
    severity: str
    success: bool
    failing: int
    error: str | None = None
    samples: list[str] = field(default_factory=list)

    def line(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        text = f"{prefix}table={self.table} column={self.column} rule={self.rule} failing={self.failing}"
        return text + (f" error={self.error}" if self.error else "")


@dataclass
class TableStatus:
    cluster: str
    table: str
    delta_version: int
    row_count: int
    fingerprint: str
    status: str
    failed_rules: list[str]
    warned_rules: list[str]
    failing_rows: int


@dataclass
class ValidationReport:
    clusters: list[str]
    results: list[RuleResult]
    statuses: list[TableStatus]

    @property
    def failures(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success and r.severity == "error"]

    @property
    def warnings(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success and r.severity == "warning"]

    @property
    def passed(self) -> bool:
        return not self.failures and all(s.status == PASSED for s in self.statuses)

    def details(self, warnings: bool = True) -> list[str]:
        lines = []
        for r in self.failures + (self.warnings if warnings else []):
            lines.append(r.line())
            lines.extend(f"  {s}" for s in r.samples)
        return lines

    def summary(self) -> str:
        tables = sorted({s.table for s in self.statuses})
        who = ",".join(self.clusters)
        if self.passed:
            return f"validation passed: cluster {who}, {len(tables)} tables, {len(self.results)} expectations"
        rules = sorted({f"{r.table}.{r.rule}" for r in self.failures})
        return (
            f"validation failed: cluster {who}: {len(rules)} rule(s) failed: {', '.join(rules)} "
            "(rows in lbreplay.quarantine)"
        )


# ----------------------------------------------------------------------------------------------------------------
# Delta helpers


def delta_version(spark: Any, lake: str, table: Table) -> int | None:
    """Current Delta version of ``table`` in ``lake`` (None if the table does not exist): the highest
    ``_delta_log/<version>.json`` commit file (Delta protocol), listed through Hadoop's FileSystem so storage
    URIs work too; no Spark job. Falls back to ``DeltaTable.history(1)``."""
    path = table_location(lake, table.name)
    try:
        jvm = spark._jvm
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
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, path):
            return None
        return int(DeltaTable.forPath(spark, path).history(1).collect()[0]["version"])


def cluster_untouched(spark: Any, lake: str, table: Table, cluster: str, since: int, until: int) -> bool:
    """True when no Delta commit in ``(since, until]`` added or removed a file of ``cluster``'s partition or
    changed the table's metadata: read from the commit files (``add`` / ``remove`` actions carry their
    ``partitionValues``), no Spark job. False when a commit file is gone (log cleanup) or unreadable."""
    path = table_location(lake, table.name)
    try:
        jvm = spark._jvm
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
                if "metaData" in action:
                    return False
                for kind in ("add", "remove"):
                    if kind in action:
                        values = action[kind].get("partitionValues")
                        if not isinstance(values, dict) or "cluster" not in values or values["cluster"] == cluster:
                            return False  # this cluster's files, or a file of unknown partition
        return True
    except Exception:  # noqa: BLE001 - no JVM gateway, or an unexpected log: fall back to the fingerprint
        return False


def check_schema(table: Table, df: Any, where: str) -> None:
    """The table's Delta schema must hold every contract column (DESIGN.md §4) with its type; extra columns are
    ignored (every reader selects the contract's columns). A drifted table is an input error naming the columns."""
    actual = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    problems = []
    for c in table.columns:
        want = c.type.lower().replace(" ", "")
        if c.name not in actual:
            problems.append(f"column {c.name} is missing (expected {want})")
        elif actual[c.name] != want:
            problems.append(f"column {c.name} is {actual[c.name]}, expected {want}")
    if problems:
        raise InvalidInputError(
            f"table {table.name}: schema drifted from the contract: {'; '.join(problems)} (table at {where}); "
            "restore the table's schema or re-create it (lbreplay ingest)")


def _read(spark: Any, lake: str, table: Table, version: int, clusters: list[str] | None) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.format("delta").option("versionAsOf", version).load(table_location(lake, table.name))
    return df.where(F.col("cluster").isin(clusters)) if clusters is not None else df


def _fingerprints(frames: dict[str, Any]) -> dict[tuple[str, str], tuple[int, str]]:
    """(table, cluster) -> (rows, "rows:sum of xxhash64 over all columns"), for every frame in one Spark job.
    The fingerprint changes whenever the cluster's rows change."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not frames:
        return {}
    tables = {t.name: t for t in VALIDATED_TABLES}
    parts = [
        df.select(
            F.lit(name).alias("t"),
            F.col("cluster").alias("c"),
            F.xxhash64(*[F.col(c.name) for c in tables[name].columns]).cast("decimal(38,0)").alias("h"),
        )
        for name, df in frames.items()
    ]
    union = reduce(lambda a, b: a.unionByName(b), parts)
    agg = union.groupBy("t", "c").agg(F.count(F.lit(1)).alias("n"), F.sum("h").alias("h"))
    return {(r["t"], r["c"]): (int(r["n"]), f"{r['n']}:{r['h']}") for r in agg.collect()}


def _empty_fingerprint() -> str:
    return "0:None"


# ----------------------------------------------------------------------------------------------------------------
# Great Expectations runner


class _GX:
    """An ephemeral GE context with one Spark datasource; one dataframe asset + suite per table."""

    def __init__(self) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        self.gx = gx
        self.ctx = gx.get_context(
            mode="ephemeral",
            project_config=DataContextConfig(
                store_backend_defaults=InMemoryStoreBackendDefaults(),
                progress_bars=ProgressBarsConfig(globally=False),
                analytics_enabled=False,
            ),
        )
        self.source = self.ctx.data_sources.add_spark(name="lbreplay")

    def run(self, name: str, df: Any, rules: tuple[Rule, ...]) -> list[tuple[bool, int, str | None]]:
        """Validate ``df`` with ``rules``: (success, unexpected count, error) per rule, in order.

        A cheap BOOLEAN_ONLY pass decides success; a BASIC pass over the failed expectations only gets counts."""
        asset = self.source.add_dataframe_asset(name=name)
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df})
        out: list[tuple[bool, int, str | None]] = [(True, 0, None)] * len(rules)
        indices = list(range(len(rules)))
        formats: tuple[Literal["BOOLEAN_ONLY", "BASIC"], ...] = ("BOOLEAN_ONLY", "BASIC")
        for rnd, fmt in enumerate(formats):
            if not indices:
                break
            suite = self.ctx.suites.add(
                self.gx.ExpectationSuite(name=f"{name}_{rnd}", expectations=[rules[i].expectation(i) for i in indices])
            )
            result = batch.validate(suite, result_format=fmt)
            failed = []
            for r in result.results:
                assert r.expectation_config is not None  # a suite's results carry their expectation
                i = int(r.expectation_config.meta["index"])
                info = r.exception_info or {}
                raised = bool(info.get("raised_exception")) if isinstance(info, dict) else False
                error = str(info.get("exception_message"))[:200] if raised else None
                count = int((r.result or {}).get("unexpected_count") or 0)
                out[i] = (bool(r.success), count, error)
                if not r.success:
                    failed.append(i)
            indices = sorted(failed)
        return out


# ----------------------------------------------------------------------------------------------------------------
# validation


def _clusters_in(spark: Any, lake: str, versions: dict[str, int]) -> list[str]:
    from functools import reduce

    frames = [
        _read(spark, lake, t, versions[t.name], None).select("cluster") for t in VALIDATED_TABLES if t.name in versions
    ]
    if not frames:
        return []
    return sorted(r["cluster"] for r in reduce(lambda a, b: a.unionByName(b), frames).distinct().collect())


def _sql_list(values: Iterable[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def validate(spark: Any, lake: str, cluster: str | None = None) -> ValidationReport:
    """Run every table's suite for ``cluster`` (default: every cluster in the lake), write the quarantine and the
    ``validation_runs`` rows, and return the report. Raises InvalidInputError if there is nothing to validate."""
    from pyspark.sql import functions as F

    from lbreplay.lake.ingest import check_cluster, rows_frame
    from lbreplay.lake.tables import conform, ensure_table, replace_partitions

    versions = {t.name: v for t in VALIDATED_TABLES if (v := delta_version(spark, lake, t)) is not None}
    if cluster is not None:
        clusters = [check_cluster(cluster)]
    else:
        clusters = _clusters_in(spark, lake, versions)
        if not clusters:
            raise InvalidInputError(f"no input rows to validate in {lake}")
    frames = {t.name: _read(spark, lake, t, versions[t.name], clusters) for t in VALIDATED_TABLES if t.name in versions}
    for t in VALIDATED_TABLES:
        if t.name in frames:
            check_schema(t, frames[t.name], table_location(lake, t.name))
    prints = _fingerprints(frames)
    if cluster is not None and not prints:
        raise InvalidInputError(f"cluster {cluster}: no input rows in {lake}")

    ctx = _Context(spark, frames)
    validated_at = datetime.now(timezone.utc)
    gx = _GX()
    results: list[RuleResult] = []
    quarantine_parts = []
    warned: dict[tuple[str, str], set[str]] = {}
    unattributed: dict[str, set[str]] = {}
    cached = []
    for table in VALIDATED_TABLES:
        if not any((table.name, c) in prints for c in clusters):
            continue
        rules = SUITES[table.name]
        df = frames[table.name]
        for builder in dict.fromkeys(r.build for r in rules if r.build is not None):
            df = builder(df, ctx)
        df = df.cache()
        cached.append(df)
        original = F.to_json(F.struct(*[F.col(c.name) for c in table.columns]))
        for rule, (success, count, error) in zip(rules, gx.run(table.name, df, rules)):
            res = RuleResult(table.name, rule.name, rule.label, rule.severity, success, count, error)
            results.append(res)
            if success:
                continue
            bad = df.where(rule.failing())
            if rule.name in ("finite", "float_range"):
                cols = {c for r in bad.select(rule.flag).distinct().collect() for c in r[0].split(",")}
                res.column = ",".join(c for c in rule.columns if c in cols) or res.column
            extra = [F.col(rule.flag)] if rule.kind == "flag" else []
            for row in bad.orderBy(*table.key).select(original.alias("j"), *extra).limit(SAMPLE_ROWS).collect():
                res.samples.append(row["j"] + (f"  <- {row[1]}" if extra else ""))
            if not res.samples:  # GE and the Spark predicate disagree: blame every validated cluster
                unattributed.setdefault(table.name, set()).add(rule.name)
            if rule.severity == "warning":
                for r in bad.select("cluster").distinct().collect():
                    warned.setdefault((r["cluster"], table.name), set()).add(rule.name)
                continue
            quarantine_parts.append(
                bad.select(
                    F.col("cluster"),
                    F.lit(table.name).alias("table_name"),
                    F.lit(rule.name).alias("rule"),
                    F.lit(res.column).alias("column_name"),
                    original.alias("row_json"),
                    F.lit(validated_at).alias("validated_at"),
                )
            )

    # quarantine: replace the validated clusters' rows (an empty write clears earlier ones, if any)
    qsummary: dict[tuple[str, str], tuple[list[str], int]] = {}
    where = f"cluster IN ({_sql_list(clusters)})"
    if quarantine_parts:
        from functools import reduce

        qdf = reduce(lambda a, b: a.unionByName(b), quarantine_parts)
        replace_partitions(spark, lake, QUARANTINE, qdf, where)
        qsummary = {
            (r["cluster"], r["table_name"]): (sorted(r["rules"]), int(r["rows"]))
            for r in spark.read.format("delta")
            .load(table_location(lake, QUARANTINE.name))
            .where(where)  # exactly the rows just written for these clusters
            .groupBy("cluster", "table_name")
            .agg(F.collect_set("rule").alias("rules"), F.countDistinct("row_json").alias("rows"))
            .collect()
        }
    else:
        ensure_table(spark, lake, QUARANTINE)
        old = spark.read.format("delta").load(table_location(lake, QUARANTINE.name)).where(where)
        if old.limit(1).count():
            replace_partitions(spark, lake, QUARANTINE, rows_frame(spark, QUARANTINE, []), where)
    for df in cached:
        df.unpersist()

    statuses = []
    for table in VALIDATED_TABLES:
        for c in clusters:
            if (table.name, c) not in prints:
                continue
            rows, fp = prints[(table.name, c)]
            failed_rules, failing_rows = qsummary.get((c, table.name), ([], 0))
            failed_rules = sorted(set(failed_rules) | unattributed.get(table.name, set()))
            statuses.append(
                TableStatus(
                    c,
                    table.name,
                    versions[table.name],
                    rows,
                    fp,
                    FAILED if failed_rules else PASSED,
                    failed_rules,
                    sorted(warned.get((c, table.name), set())),
                    failing_rows,
                )
            )
    ensure_table(spark, lake, VALIDATION_RUNS)
    runs = rows_frame(
        spark,
        VALIDATION_RUNS,
        [{**s.__dict__, "table_name": s.table, "validated_at": validated_at} for s in statuses],
    )
    conform(runs, VALIDATION_RUNS).write.format("delta").mode("append").save(table_location(lake, VALIDATION_RUNS.name))
    return ValidationReport(clusters, results, statuses)


def validate_command(cluster: str | None, lake: str, master: str | None = None) -> None:
    """CLI ``lbreplay validate [--cluster NAME]``: print the outcome; exit 3 (InvalidInputError) on failure."""
    from lbreplay.spark import get_spark, lake_path

    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    report = validate(spark, lake_abs, cluster)
    details = report.details()
    if details:
        print("\n".join(details), file=sys.stderr)
    if not report.passed:
        raise InvalidInputError(report.summary())
    print(report.summary())


# ----------------------------------------------------------------------------------------------------------------
# validation status, for replays


def validation_problems(spark: Any, lake: str, cluster: str, tables: Iterable[str] | None = None) -> list[str]:
    """Why ``cluster``'s input may not be replayed (empty = validated). Every table with rows for the cluster must
    have a latest ``validation_runs`` row that passed and still matches the data (same Delta version, or same
    content fingerprint); ``tables`` must additionally have rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    required = set(tables or ())
    runs_version = delta_version(spark, lake, VALIDATION_RUNS)
    latest: dict[str, Any] = {}
    if runs_version is not None:
        w = Window.partitionBy("table_name").orderBy(F.col("validated_at").desc(), F.col("delta_version").desc())
        for r in (
            spark.read.format("delta")
            .load(table_location(lake, VALIDATION_RUNS.name))
            .where(F.col("cluster") == cluster)
            .withColumn("_rank", F.row_number().over(w))
            .where("_rank = 1")
            .collect()
        ):
            latest[r["table_name"]] = r
    current = {t.name: delta_version(spark, lake, t) for t in VALIDATED_TABLES}

    def validated_data(table: Table) -> bool:
        """The cluster's rows are those its latest validation saw: the same Delta version, or later commits that
        only touched other clusters (no fingerprint scan)."""
        now, run = current[table.name], latest.get(table.name)
        if now is None or run is None or run["delta_version"] is None:
            return False
        seen = int(run["delta_version"])
        return seen == now or 0 <= seen < now and cluster_untouched(spark, lake, table, cluster, seen, now)

    stale = {
        t.name: _read(spark, lake, t, v, [cluster])
        for t in VALIDATED_TABLES
        if (v := current[t.name]) is not None and not validated_data(t)
    }
    by_name = {t.name: t for t in VALIDATED_TABLES}
    for name, df in stale.items():  # a table changed since validation whose schema drifted: say so, not crash
        check_schema(by_name[name], df, table_location(lake, name))
    prints = _fingerprints(stale)
    problems = []
    any_rows = False
    for table in VALIDATED_TABLES:
        run = latest.get(table.name)
        if table.name in stale:
            rows, fp = prints.get((table.name, cluster), (0, _empty_fingerprint()))
        elif run is not None and current[table.name] is not None:  # the validated data (version, or untouched)
            rows, fp = int(run["row_count"] or 0), run["fingerprint"]
        else:
            rows, fp = 0, _empty_fingerprint()
        any_rows = any_rows or rows > 0
        if table.name in required and rows == 0:
            problems.append(f"{table.name}: no rows")
        if run is None:
            if rows > 0:
                problems.append(f"{table.name}: not validated")
        elif fp != run["fingerprint"]:
            problems.append(f"{table.name}: changed since validation (validated Delta version {run['delta_version']})")
        elif run["status"] != PASSED:
            problems.append(f"{table.name}: failed validation ({', '.join(run['failed_rules'] or [])})")
    if not any_rows:
        problems.append("no input rows")
    return problems


def is_validated(spark: Any, lake: str, cluster: str, tables: Iterable[str] | None = None) -> bool:
    """True when every input table of ``cluster`` passed validation and is unchanged since."""
    return not validation_problems(spark, lake, cluster, tables)


def require_validated(spark: Any, lake: str, cluster: str, tables: Iterable[str] | None = None) -> None:
    """Raise InvalidInputError (exit 3) unless ``is_validated``; the message says what to run."""
    problems = validation_problems(spark, lake, cluster, tables)
    if problems:
        raise InvalidInputError(
            f"cluster {cluster}: input not validated: {'; '.join(problems)} "
            f"(run: lbreplay validate --cluster {cluster})"
        )
