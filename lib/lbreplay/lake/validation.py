"""``lbreplay validate``: the suites of :mod:`lbreplay.lake.expectations` run over the input tables, quarantine,
validation status.

One suite per table, run once per table on the rows of the clusters being validated, read at a pinned Delta
version (:mod:`lbreplay.lake.delta_log`).
On failure every failing rule is reported as ``table=… column=… rule=… failing=N`` (N = GE's unexpected count)
with up to 5 sample rows, failing rows go to the ``quarantine`` table (the validated clusters' previous quarantine
rows are replaced), and :func:`validate_command` raises :class:`~lbreplay.errors.InvalidInputError` (exit 3).
Each validation appends one ``validation_runs`` row per (cluster, table with rows) with the Delta version and a
content fingerprint; :func:`is_validated` / :func:`require_validated` let replays refuse input that was never
validated, failed, or changed since.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from typing import TYPE_CHECKING, Any, Iterable, Literal

from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from lbreplay.errors import InvalidInputError
from lbreplay.lake.delta_log import cluster_untouched, delta_version
from lbreplay.lake.dump_tables import VALIDATION_RUNS
from lbreplay.lake.expectations import SUITES, VALIDATED_TABLES, Rule, SuiteContext
from lbreplay.lake.ingest import check_cluster, rows_frame
from lbreplay.lake.storage import run_concurrently
from lbreplay.lake.table_scan import (
    empty_fingerprint,
    fingerprint,
    fingerprints,
    hash_sums,
    may_have_duplicates,
    row_hash,
    value_predicate,
)
from lbreplay.lake.tables import QUARANTINE, Table, conform, ensure_table, replace_partitions, table_location
from lbreplay.progress import Progress
from lbreplay.spark import get_spark, lake_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SAMPLE_ROWS = 5
PASSED = "passed"
FAILED = "failed"



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


def check_schema(table: Table, df: DataFrame, where: str) -> None:
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


def _read(spark: SparkSession, lake: str, table: Table, version: int, clusters: list[str] | None) -> DataFrame:
    df = spark.read.format("delta").option("versionAsOf", version).load(table_location(lake, table.name))
    return df.where(F.col("cluster").isin(clusters)) if clusters is not None else df


# ----------------------------------------------------------------------------------------------------------------
# Great Expectations runner


class _GX:
    """An ephemeral GE context with one Spark datasource; a dataframe asset + suite per table and suite run. One per
    Spark session (:meth:`of`): making it takes seconds, and every validation of the process reuses it."""

    _by_session: dict[str, _GX] = {}

    def __init__(self) -> None:
        # Great Expectations takes seconds to import: only a validation run pays it, not the replays importing
        # this module for require_validated
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
        self.runs = 0

    @classmethod
    def of(cls, spark: SparkSession) -> _GX:
        sc = spark.sparkContext
        key = f"{sc.applicationId}@{sc.startTime}"  # a stopped session's successor gets a context of its own
        if key not in cls._by_session:
            cls._by_session[key] = cls()
        return cls._by_session[key]

    def run(self, name: str, df: DataFrame, rules: tuple[Rule, ...]) -> list[tuple[bool, int, str | None]]:
        """Validate ``df`` with ``rules``: (success, unexpected count, error) per rule, in order.

        A cheap BOOLEAN_ONLY pass decides success; a BASIC pass over the failed expectations only gets counts."""
        self.runs += 1  # names unique within the context
        asset = self.source.add_dataframe_asset(name=f"{name}_{self.runs}")
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df})
        out: list[tuple[bool, int, str | None]] = [(True, 0, None)] * len(rules)
        indices = list(range(len(rules)))
        formats: tuple[Literal["BOOLEAN_ONLY", "BASIC"], ...] = ("BOOLEAN_ONLY", "BASIC")
        for rnd, fmt in enumerate(formats):
            if not indices:
                break
            suite = self.ctx.suites.add(
                self.gx.ExpectationSuite(name=f"{name}_{self.runs}_{rnd}",
                                         expectations=[rules[i].expectation(i) for i in indices])
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


def _clusters_in(spark: SparkSession, lake: str, versions: dict[str, int]) -> list[str]:
    frames = [
        _read(spark, lake, t, versions[t.name], None).select("cluster") for t in VALIDATED_TABLES if t.name in versions
    ]
    if not frames:
        return []
    return sorted(r["cluster"] for r in reduce(lambda a, b: a.unionByName(b), frames).distinct().collect())


def _sql_list(values: Iterable[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


@dataclass
class _Pinned:
    """What one validation reads: each table's Delta version, the clusters, their rows and fingerprints."""

    versions: dict[str, int]
    clusters: list[str]
    frames: dict[str, DataFrame]
    prints: dict[tuple[str, str], tuple[int, str]]

    def has_rows(self, table: Table) -> bool:
        return any((table.name, c) in self.prints for c in self.clusters)


def _pin(spark: SparkSession, lake: str, cluster: str | None) -> _Pinned:
    """The tables' Delta versions, the clusters and their rows (schemas checked); the fingerprints come with the
    suites' scan (:meth:`_SuiteRuns.scan`)."""
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
    return _Pinned(versions, clusters, frames, {})


@dataclass
class _Scan:
    """One table's rows with every rule's helper and flag columns, and what one aggregation over them found."""

    flagged: DataFrame
    any_failing: Column  # a row fails at least one rule (the rules' Spark predicates)
    prints: dict[tuple[str, str], tuple[int, str]]
    failing_rows: int


@dataclass
class _SuiteRuns:
    """The outcome of the suites, table by table: results, quarantined rows, warnings, and rules GE failed whose
    rows the Spark predicate does not find (blamed on every validated cluster)."""

    ctx: SuiteContext
    validated_at: datetime
    gx: _GX | None = None  # made at the first suite run (importing Great Expectations takes seconds)
    results: list[RuleResult] = field(default_factory=list)
    quarantine: list[DataFrame] = field(default_factory=list)
    warned: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    unattributed: dict[str, set[str]] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)

    def scan(self, table: Table, df: DataFrame) -> _Scan:
        """The rules' flag columns and, in one aggregation, each cluster's rows and fingerprint and the rows failing
        some rule. The duplicate-key count (a window over every row) is only built when a hash of the key repeats."""
        rules = SUITES[table.name]
        source = df  # the probes below read the table's own columns: no builder's join or window under them
        for builder in dict.fromkeys(r.build for r in rules if r.build is not None and r.kind != "unique"):
            df = df.transform(builder, self.ctx)
        for rule in rules:
            if rule.kind == "unique" and "_n_unique_key" not in df.columns:
                if rule.build is not None and may_have_duplicates(source, rule.columns):
                    df = df.transform(rule.build, self.ctx)
                else:
                    df = df.withColumn("_n_unique_key", F.lit(1).cast("long"))
        any_failing = reduce(lambda a, b: a | b, [F.coalesce(value_predicate(source, r), F.lit(False)) for r in rules])
        agg = df.groupBy("cluster").agg(
            F.count(F.lit(1)).alias("n"), *hash_sums(row_hash(table)),
            F.sum(F.when(any_failing, 1).otherwise(0)).alias("failing"),
        ).collect()
        prints = {(table.name, r["cluster"]): (int(r["n"]), fingerprint(int(r["n"]), r["_h_hi"], r["_h_lo"]))
                  for r in agg}
        return _Scan(df, any_failing, prints, sum(int(r["failing"]) for r in agg))

    def run(self, table: Table, scan: _Scan) -> bool:
        """The table's Great Expectations suite over the rows some rule's predicate flags: every expectation's
        unexpected rows are among them, so GE's verdicts and counts are those of the whole table, without a pass over
        it per expectation. A table no predicate flags passes every rule without a GE run (over zero rows every
        expectation succeeds). True when the suite ran."""
        rules = SUITES[table.name]
        if not scan.failing_rows:
            # no row is flagged: GE would validate zero rows, where every expectation of the suites succeeds
            self.results.extend(RuleResult(table.name, r.name, r.label, r.severity, True, 0) for r in rules)
            return False
        df = scan.flagged.where(scan.any_failing).persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        if self.gx is None:
            self.gx = _GX.of(self.ctx.spark)
        for rule, (success, count, error) in zip(rules, self.gx.run(table.name, df, rules)):
            res = RuleResult(table.name, rule.name, rule.label, rule.severity, success, count, error)
            self.results.append(res)
            if not success:
                self.failed(table, rule, res, df.where(rule.failing()))
        return True

    def failed(self, table: Table, rule: Rule, res: RuleResult, bad: DataFrame) -> None:
        """Samples of the failing rows; their clusters warned (a warning) or the rows quarantined (an error)."""
        original = _row_json(table)
        if rule.name in ("finite", "float_range"):
            cols = {c for r in bad.select(rule.flag).distinct().collect() for c in r[0].split(",")}
            res.column = ",".join(c for c in rule.columns if c in cols) or res.column
        extra = [F.col(rule.flag)] if rule.kind == "flag" else []
        for row in bad.orderBy(*table.key).select(original.alias("j"), *extra).limit(SAMPLE_ROWS).collect():
            res.samples.append(row["j"] + (f"  <- {row[1]}" if extra else ""))
        if not res.samples:  # GE and the Spark predicate disagree: blame every validated cluster
            self.unattributed.setdefault(table.name, set()).add(rule.name)
        if rule.severity == "warning":
            for r in bad.select("cluster").distinct().collect():
                self.warned.setdefault((r["cluster"], table.name), set()).add(rule.name)
            return
        self.quarantine.append(
            bad.select(
                F.col("cluster"),
                F.lit(table.name).alias("table_name"),
                F.lit(rule.name).alias("rule"),
                F.lit(res.column).alias("column_name"),
                original.alias("row_json"),
                F.lit(self.validated_at).alias("validated_at"),
            )
        )

    def unpersist(self) -> None:
        for df in self.cached:
            df.unpersist()


def _row_json(table: Table) -> Column:
    """A row as it is stored: its contract columns as one JSON object."""
    return F.to_json(F.struct(*[F.col(c.name) for c in table.columns]))


def _write_quarantine(spark: SparkSession, lake: str, clusters: list[str],
                      parts: list[DataFrame]) -> dict[tuple[str, str], tuple[list[str], int]]:
    """Replace the validated clusters' quarantine rows (an empty write clears earlier ones, if any); (cluster,
    table) -> (failed rules, failing rows)."""
    where = f"cluster IN ({_sql_list(clusters)})"
    if not parts:
        ensure_table(spark, lake, QUARANTINE)
        old = spark.read.format("delta").load(table_location(lake, QUARANTINE.name)).where(where)
        if old.limit(1).count():
            replace_partitions(spark, lake, QUARANTINE, rows_frame(spark, QUARANTINE, []), where)
        return {}
    qdf = reduce(lambda a, b: a.unionByName(b), parts)
    replace_partitions(spark, lake, QUARANTINE, qdf, where)
    return {
        (r["cluster"], r["table_name"]): (sorted(r["rules"]), int(r["rows"]))
        for r in spark.read.format("delta")
        .load(table_location(lake, QUARANTINE.name))
        .where(where)  # exactly the rows just written for these clusters
        .groupBy("cluster", "table_name")
        .agg(F.collect_set("rule").alias("rules"), F.countDistinct("row_json").alias("rows"))
        .collect()
    }


def _statuses(pinned: _Pinned, runs: _SuiteRuns,
              qsummary: dict[tuple[str, str], tuple[list[str], int]]) -> list[TableStatus]:
    statuses = []
    for table in VALIDATED_TABLES:
        for c in pinned.clusters:
            if (table.name, c) not in pinned.prints:
                continue
            rows, fp = pinned.prints[(table.name, c)]
            failed_rules, failing_rows = qsummary.get((c, table.name), ([], 0))
            failed_rules = sorted(set(failed_rules) | runs.unattributed.get(table.name, set()))
            statuses.append(
                TableStatus(
                    c,
                    table.name,
                    pinned.versions[table.name],
                    rows,
                    fp,
                    FAILED if failed_rules else PASSED,
                    failed_rules,
                    sorted(runs.warned.get((c, table.name), set())),
                    failing_rows,
                )
            )
    return statuses


def _never_written(spark: SparkSession, lake: str, pinned: _Pinned, table: Table) -> bool:
    """No validated cluster has ever had a file in ``table`` up to its pinned version (its Delta log's add/remove
    actions, no Spark job): the scan would find no row of theirs."""
    version = pinned.versions[table.name]
    return all(cluster_untouched(spark, lake, table, c, -1, version) for c in pinned.clusters)


def validate(spark: SparkSession, lake: str, cluster: str | None = None,
             progress: Callable[[str], None] | None = None) -> ValidationReport:
    """Run every table's suite for ``cluster`` (default: every cluster in the lake), write the quarantine and the
    ``validation_runs`` rows, and return the report. Raises InvalidInputError if there is nothing to validate.
    ``progress`` gets a line as each table's scan and each Great Expectations suite run ends."""
    say = progress or (lambda _line: None)
    pinned = _pin(spark, lake, cluster)
    validated_at = datetime.now(timezone.utc)
    runs = _SuiteRuns(SuiteContext(spark, pinned.frames), validated_at)
    # the tables' scans are independent Spark actions: their fixed driver-side costs overlap; a table none of the
    # clusters ever had a file in holds no row of theirs (read from its Delta log): nothing to scan
    names = [t for t in VALIDATED_TABLES if t.name in pinned.frames and not _never_written(spark, lake, pinned, t)]
    say(f"scanning {len(names)} tables of {', '.join(pinned.clusters) or 'no cluster'}")

    def scan(table: Table) -> _Scan:
        done = runs.scan(table, pinned.frames[table.name])
        rows = sum(n for n, _ in done.prints.values())
        say(f"{table.name}: {rows} rows, {done.failing_rows} flagged by the rules' predicates")
        return done

    scans = dict(zip((t.name for t in names), run_concurrently(*[functools.partial(scan, t) for t in names])))
    for done in scans.values():
        pinned.prints.update(done.prints)
    if cluster is not None and not pinned.prints:
        raise InvalidInputError(f"cluster {cluster}: no input rows in {lake}")
    for table in VALIDATED_TABLES:
        if pinned.has_rows(table):
            if runs.run(table, scans[table.name]):
                say(f"{table.name}: Great Expectations suite run over its {scans[table.name].failing_rows} flagged rows")
    qsummary = _write_quarantine(spark, lake, pinned.clusters, runs.quarantine)
    runs.unpersist()
    statuses = _statuses(pinned, runs, qsummary)
    ensure_table(spark, lake, VALIDATION_RUNS)
    rows = rows_frame(
        spark,
        VALIDATION_RUNS,
        [{**s.__dict__, "table_name": s.table, "validated_at": validated_at} for s in statuses],
    )
    conform(rows, VALIDATION_RUNS).write.format("delta").mode("append").save(table_location(lake, VALIDATION_RUNS.name))
    return ValidationReport(pinned.clusters, runs.results, statuses)


def validate_command(cluster: str | None, lake: str, master: str | None = None, quiet: bool = False) -> None:
    """CLI ``lbreplay validate [--cluster NAME]``: print the outcome; exit 3 (InvalidInputError) on failure.
    Progress on stderr unless ``quiet``."""
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    shown = Progress("validate", len(VALIDATED_TABLES), "tables", quiet=quiet)  # its log() is safe from the scan threads
    report = validate(spark, lake_abs, cluster, progress=lambda line: shown.log(f"validate: {line}"))
    details = report.details()
    if details:
        print("\n".join(details), file=sys.stderr)
    if not report.passed:
        raise InvalidInputError(report.summary())
    print(report.summary())


# ----------------------------------------------------------------------------------------------------------------
# validation status, for replays


def validation_problems(spark: SparkSession, lake: str, cluster: str, tables: Iterable[str] | None = None) -> list[str]:
    """Why ``cluster``'s input may not be replayed (empty = validated). Every table with rows for the cluster must
    have a latest ``validation_runs`` row that passed and still matches the data (same Delta version, or same
    content fingerprint); ``tables`` must additionally have rows."""
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
        only touched other clusters; or, never validated, the cluster has never had a file in the table (both read
        from the Delta log, no fingerprint scan)."""
        now, run = current[table.name], latest.get(table.name)
        if now is None:
            return False
        if run is None or run["delta_version"] is None:
            return run is None and cluster_untouched(spark, lake, table, cluster, -1, now)
        seen = int(run["delta_version"])
        return seen == now or 0 <= seen < now and cluster_untouched(spark, lake, table, cluster, seen, now)

    stale = {
        t.name: _read(spark, lake, t, v, [cluster])
        for t in VALIDATED_TABLES
        if (v := current[t.name]) is not None and not validated_data(t)
    }
    for t in VALIDATED_TABLES:  # a table changed since validation whose schema drifted: say so, not crash
        if t.name in stale:
            check_schema(t, stale[t.name], table_location(lake, t.name))
    prints = fingerprints(stale)
    problems = []
    any_rows = False
    for table in VALIDATED_TABLES:
        run = latest.get(table.name)
        if table.name in stale:
            rows, fp = prints.get((table.name, cluster), (0, empty_fingerprint()))
        elif run is not None and current[table.name] is not None:  # the validated data (version, or untouched)
            rows, fp = int(run["row_count"] or 0), run["fingerprint"]
        else:
            rows, fp = 0, empty_fingerprint()
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


def is_validated(spark: SparkSession, lake: str, cluster: str, tables: Iterable[str] | None = None) -> bool:
    """True when every input table of ``cluster`` passed validation and is unchanged since."""
    return not validation_problems(spark, lake, cluster, tables)


def require_validated(spark: SparkSession, lake: str, cluster: str, tables: Iterable[str] | None = None) -> None:
    """Raise InvalidInputError (exit 3) unless ``is_validated``; the message says what to run."""
    problems = validation_problems(spark, lake, cluster, tables)
    if problems:
        raise InvalidInputError(
            f"cluster {cluster}: input not validated: {'; '.join(problems)} "
            f"(run: lbreplay validate --cluster {cluster})"
        )
