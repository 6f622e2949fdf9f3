"""The suites of ``lbreplay validate``: one per table, each rule one Great Expectations 1.x expectation.

Every rule is a GE expectation whose ``meta.rule`` is the rule name. Rules GE expresses directly use GE's own
expectations; rules it cannot (finite numbers, range tiling, a live reporting broker, name/column consistency) are
computed with Spark into a flag column (null = ok, else what is wrong) asserted with ``ExpectColumnValuesToBeNull``.

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
``ranges_tile_namespace``  per (cluster, minute, namespace), over each broker's latest report of the minute, the
                           ranges tile [0x00000000, 0xffffffff] with no gap or overlap (flag: the row where the
                           gap/overlap is seen); a **warning**: real dumps overlap around splits and while a
                           bundle moves (two brokers list it in one tick), and leave gaps while an unloaded bundle
                           waits for its next owner (DESIGN.md §4)
``reporting_broker_alive`` the reporting broker has a broker_load row at that ts (extensible: a
                           broker_load_data_ext row in the same or a neighbouring 30-minute window) (flag)
``max_samples_positive``   BundleData maxSamples >= 1 (0 makes Pulsar's TimeAverageMessageData divide by zero)
``num_samples_within_max`` 0 <= numSamples <= maxSamples (ExpectColumnPairValuesAToBeGreaterThanB or_equal)
``topic_name_format``      ``persistent://tenant/ns/topic`` (or non-persistent)
``namespace_format``       ``tenant/ns`` (or ``tenant/cluster/ns``)
``num_bundles_positive``   namespace_policy.num_bundles >= 1
``boundaries_well_formed`` initial boundaries are lower-case 0x%08x, strictly increasing, from 0x00000000 to
                           0xffffffff, num_bundles + 1 of them (flag)
=========================  ===================================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from lbreplay.lake.dump_tables import (
    BROKER_DEPARTURE,
    BROKER_LOAD_DATA_EXT,
    BROKER_TIME_AVERAGE,
    BUNDLE_DATA,
    LEADER_ELECTION,
    LEADER_PLACEMENT,
    SHEDDING_RUN,
    TOP_BUNDLES_LOAD_DATA,
    TOP_BUNDLES_PUBLICATION,
)
from lbreplay.lake.registry import VALIDATED
from lbreplay.lake.storage import is_large
from lbreplay.lake.tables import (
    BROKER_LOAD,
    BUNDLE_LOAD,
    NAMESPACE_POLICY,
    RESOURCES,
    TOPIC_LOAD,
    Table,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BUNDLE_NAME_REGEX = r"^[^/]+/[^/]+(/[^/]+)?/0x[0-9a-f]{8}_0x[0-9a-f]{8}$"
TOPIC_NAME_REGEX = r"^(persistent|non-persistent)://[^/]+/[^/]+(/[^/]+)?/[^/].*$"
NAMESPACE_REGEX = r"^[^/]+/[^/]+(/[^/]+)?$"
MAX_HASH = 0xFFFFFFFF

#: Tables validated, in this order: the registry's inputs declared ``validated`` (each has its suite in
#: :data:`SUITES`, keyed by table name).
VALIDATED_TABLES: tuple[Table, ...] = VALIDATED


@dataclass(frozen=True)
class SuiteContext:
    """Pinned frames of every validated table (restricted to the clusters being validated)."""

    spark: SparkSession
    frames: dict[str, DataFrame]


Builder = Callable[["DataFrame", SuiteContext], "DataFrame"]
"""Adds the helper or flag column a rule's expectation reads."""


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
        # Great Expectations takes seconds to import: only a validation run pays it, not every replay that imports
        # this module through the validation status check
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

    def failing(self) -> Column:
        """Spark predicate selecting the rows GE counts as unexpected for this rule (nulls ignored like GE)."""
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


def _hex(c: Column) -> Column:
    return F.concat(F.lit("0x"), F.lpad(F.lower(F.hex(c)), 8, "0"))


def _unique_builder(key: tuple[str, ...]) -> Builder:
    def build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
        return df.withColumn("_n_unique_key", F.count(F.lit(1)).over(Window.partitionBy(*key)))

    return build


def _finite_builder(cols: tuple[str, ...]) -> Builder:
    def build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
        parts = [F.when(F.isnan(F.col(c)) | (F.abs(F.col(c)) == F.lit(float("inf"))), F.lit(c)) for c in cols]
        v = F.concat_ws(",", *parts)
        return df.withColumn("_v_finite", F.when(v == "", F.lit(None).cast("string")).otherwise(v))

    return build


def _minute(ts: str = "ts") -> Column:
    return F.date_trunc("minute", F.col(ts))


def _tiling_flag(df: DataFrame) -> DataFrame:
    """The rule's flag per row (a window per minute and namespace), on rows carrying ``_minute`` and ``_stale``."""
    # the minute's earlier versions sort last and take no part: no max over them, no lead onto them; broker and ts
    # order two brokers' rows of one range (a moving bundle), so which of them is flagged does not vary by run
    w = Window.partitionBy("cluster", "_minute", "namespace").orderBy(
        "_stale", "range_lower", "range_upper", "bundle", "broker", "ts")
    lo, hi = F.col("range_lower"), F.col("range_upper")
    prev = F.max(hi).over(w.rowsBetween(Window.unboundedPreceding, -1))
    nxt = F.lead(F.when(~F.col("_stale"), lo)).over(w)
    valid = lo.isNotNull() & hi.isNotNull() & ~F.col("_stale")
    end = F.greatest(hi, F.coalesce(prev, hi))

    def say(*parts: Any) -> Column:
        return F.concat(*[F.lit(p) if isinstance(p, str) else p for p in parts])

    v = (
        F.when(~valid, F.lit(None))
        .when(prev.isNull() & (lo != 0), say("gap: the first range starts at ", _hex(lo), ", not 0x00000000"))
        .when(prev.isNotNull() & (lo < prev), say("overlap: starts at ", _hex(lo), " inside a range ending at ", _hex(prev)))
        .when(prev.isNotNull() & (lo > prev), say("gap: ", _hex(prev), " to ", _hex(lo), " not covered"))
        .when(nxt.isNull() & (end != F.lit(MAX_HASH)), say("gap: the last range ends at ", _hex(end), ", not 0xffffffff"))
    )
    return df.withColumn("_v_ranges_tile_namespace", v.cast("string"))


def _tiling_by_window(df: DataFrame) -> DataFrame:
    """The rule's flag on every row with the window alone: staleness by a window over each broker's minute, then
    :func:`_tiling_flag`."""
    latest = F.max("ts").over(Window.partitionBy("cluster", "_minute", "broker"))
    marked = df.withColumn("_minute", _minute()).withColumn("_stale", F.col("ts") < latest)
    return marked.transform(_tiling_flag).drop("_minute", "_stale")


# Per (cluster, minute, namespace): the latest reports' ranges, sorted, chain from 0 to 0xffffffff (the window's
# checks folded over the sorted list); a group with a null bound or with no latest rows is left to the window.
_CHAIN = f"""aggregate(
    array_sort(collect_list(CASE WHEN NOT _stale THEN struct(range_lower, range_upper, bundle) END)),
    named_struct('m', CAST(-1 AS BIGINT), 'ok', count_if(NOT _stale AND (range_lower IS NULL OR range_upper IS NULL)) = 0),
    (acc, x) -> named_struct('m', greatest(acc.m, x.range_upper),
                             'ok', acc.ok AND x.range_lower = IF(acc.m = -1, 0, acc.m)),
    acc -> acc.ok AND acc.m = {MAX_HASH})"""


def _tiling_build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
    """Per (cluster, minute, namespace), over each broker's latest report of the minute (report versions sit at
    their own times; a snapshot lists every broker at one time), ranges sorted by lower bound must chain from
    0x00000000 to 0xffffffff: each lower bound equals the highest upper bound before it (NamespaceBundles:
    boundaries partition the ring). Rows of a broker's earlier versions in the minute are not checked.

    From ``storage.LARGE_SCAN_BYTES`` on, each group is first checked in one aggregation (:data:`_CHAIN`); only the
    groups it does not pass get the window that says, per row, where the gap or overlap is (a fifth of the time at
    size M when all pass)."""
    if not is_large(df):  # a small table: the window alone
        return _tiling_by_window(df)
    source = df
    # each broker's latest report time in the minute: an aggregation broadcast back (one row per broker and minute:
    # 0.5 M for a week of 50 brokers), not a second window over every row
    df = df.withColumn("_minute", _minute())
    latest = df.groupBy("cluster", "_minute", "broker").agg(F.max("ts").alias("_latest"))
    df = df.join(F.broadcast(latest), ["cluster", "_minute", "broker"]).withColumn("_stale", F.col("ts") < F.col("_latest"))
    group = ["cluster", "_minute", "namespace"]
    untiled = df.groupBy(*group).agg(F.expr(_CHAIN).alias("_tiled")).where(~F.col("_tiled")).select(*group)
    if not untiled.limit(1).collect():  # every group tiles: the rows as given, none flagged
        return source.withColumn("_v_ranges_tile_namespace", F.lit(None).cast("string"))
    exact = df.join(F.broadcast(untiled), group, "left_semi").transform(_tiling_flag)
    rest = df.join(F.broadcast(untiled), group, "left_anti").withColumn("_v_ranges_tile_namespace",
                                                                         F.lit(None).cast("string"))
    return exact.unionByName(rest).drop("_minute", "_stale", "_latest")


def _alive_builder(ref: Table, within_minutes: int = 0) -> Builder:
    """The reporting broker has a ``ref`` row at the row's ts (rows of one report share its time) or, with
    ``within_minutes``, one in the same or a neighbouring window of that many minutes (a separate report written at
    its own time, e.g. TopBundlesLoadData beside BrokerLoadData: ``TopBundleLoadDataReporter`` and
    ``BrokerLoadDataReporter`` write independently, the latter only on a 10 % change or every
    ``loadBalancerReportUpdateMaxIntervalMinutes``, 15 by default)."""
    key = "_window" if within_minutes else "ts"
    where = f"within {within_minutes} minutes" if within_minutes else "at this ts"

    def window(offset: int = 0) -> Column:
        return (F.floor(F.unix_seconds(F.col("ts")) / (60 * within_minutes)) + offset).alias("_window")

    def build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
        frame = ctx.frames.get(ref.name)
        if frame is None:
            frame = ctx.spark.createDataFrame([], "cluster STRING, ts TIMESTAMP, broker STRING")
        if within_minutes:
            frame = frame.select("cluster", "broker", F.explode(F.array(window(-1), window(), window(1))).alias(key))
            df = df.withColumn(key, window())
        alive = frame.select("cluster", key, "broker").distinct().withColumn("_alive", F.lit(True))
        joined = df.join(alive, ["cluster", key, "broker"], "left")
        msg = F.concat(F.lit(f"no {ref.name} row for broker "), F.col("broker"), F.lit(f" {where}"))
        flagged = joined.withColumn("_v_reporting_broker_alive", F.when(F.col("_alive").isNull(), msg))
        return flagged.drop("_alive", "_window")

    return build


def _consistent_flag(df: DataFrame) -> DataFrame:
    lo, hi = _hex(F.col("range_lower")), _hex(F.col("range_upper"))
    expected = F.concat(F.col("namespace"), F.lit("/"), lo, F.lit("_"), hi)
    bad = F.col("bundle").rlike(BUNDLE_NAME_REGEX) & (expected.isNull() | (expected != F.col("bundle")))
    msg = F.concat(F.lit("namespace/range columns give "), F.coalesce(expected, F.lit("null")))
    return df.withColumn("_v_bundle_name_consistent", F.when(bad, msg))


def _consistent_build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
    """From ``storage.LARGE_SCAN_BYTES`` on, checked first over the distinct (bundle, namespace, range) rows (a
    bundle repeats every minute): when none disagrees, no row is flagged and no name is rebuilt per row."""
    if not is_large(df):
        return _consistent_flag(df)
    names = df.select("bundle", "namespace", "range_lower", "range_upper").distinct().transform(_consistent_flag)
    # an aggregate over the distinct rows, not a filter: a filter would be pushed below the distinct
    if not names.agg(F.count_if(F.col("_v_bundle_name_consistent").isNotNull())).collect()[0][0]:
        return df.withColumn("_v_bundle_name_consistent", F.lit(None).cast("string"))
    return _consistent_flag(df)


def _boundaries_build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
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


def _float_range_build(df: DataFrame, ctx: SuiteContext) -> DataFrame:
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
        Rule("reporting_broker_alive", "flag", ("broker",), build=_alive_builder(BROKER_LOAD_DATA_EXT, within_minutes=30)),
    ),
    TOP_BUNDLES_PUBLICATION.name: (
        *_key_rules(TOP_BUNDLES_PUBLICATION),
        *_non_negative("listed"),
    ),
    LEADER_ELECTION.name: (
        *_key_rules(LEADER_ELECTION),
        Rule("broker_not_null", "not_null", ("broker",)),
    ),
    SHEDDING_RUN.name: (*_key_rules(SHEDDING_RUN),),
    LEADER_PLACEMENT.name: (*_key_rules(LEADER_PLACEMENT),),
    BROKER_DEPARTURE.name: (
        *_key_rules(BROKER_DEPARTURE),
        Rule("broker_not_null", "not_null", ("broker",)),
    ),
}

