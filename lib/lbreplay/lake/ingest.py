"""``lbreplay ingest``: load a directory of real Pulsar load-balancer dumps into the lake's input tables.

Accepted files (``*.json`` anywhere under ``--source``; other files are ignored), each detected by content:

==========================  ==========================================================  ========================
type                        recognised by                                               rows go to
==========================  ==========================================================  ========================
LocalBrokerData (modular)   ``loadReportType == "LocalBrokerData"``, or ``lastStats`` /  ``broker_load`` (+ its
                            ``bundleStats``                                             ``lastStats`` ->
                                                                                        ``bundle_load``)
BundleData                  ``shortTermData`` / ``longTermData``                        ``bundle_data``
TimeAverageBrokerData       ``shortTermMsgRateIn`` … ``longTermMsgThroughputOut``       ``broker_time_average``
BrokerLoadData (extensible) ``weightedMaxEMA`` / ``updatedAt`` / ``bundleCount``        ``broker_load_data_ext``
TopBundlesLoadData          ``topBundlesLoadData``                                      ``top_bundles_load_data``
==========================  ==========================================================  ========================

Beside them, ``collect``'s record ``collect/metadata-versions.jsonl`` (when the tree has one): each version of
``/loadbalance/leader`` -> one ``leader_election`` row (its ``ctime``, its ``brokerId``): the election that starts
the leader's shedding timer (:mod:`lbreplay.kernel.leader_election`); each ``absent`` record (a broker's znode
deleted) -> one ``broker_departure`` row: the moment the leader drops that broker.

A file may also hold a JSON object mapping keys to objects of one of these types (e.g. a dump of every
``/loadbalance/brokers/<broker>`` child in one file, or DESIGN.md §5's ``{"broker-1:8080": {BrokerLoadData}}``);
the key is then the broker id (broker types) or the bundle name (BundleData). The SimpleLoadManager's
``LoadReport`` (``loadReportType == "LoadReport"``) is rejected.

**Broker id** (``host:port``, the key under ``/loadbalance/brokers``): the report's ``brokerId``, else the host:port
of ``webServiceUrl`` (then ``webServiceUrlTls``), else the map key, else the path: the file stem, then each parent
directory (innermost first) — the first part that reads ``host:port`` or ``host_port`` (``_`` stands for ``:`` so
names stay portable), also as the part before ``@`` or ``__`` in a name like ``broker-1_8080__1690977600000.json``.

**Bundle name** of a BundleData file: the map key, else the path ``…/<tenant>/<namespace>/<0x%08x_0x%08x>[.json]``
(the range is the file stem or a directory; the two components before it are tenant and namespace).

**Snapshot time**: the report's own time — ``lastUpdate`` (LocalBrokerData) or ``updatedAt`` (BrokerLoadData), in
epoch milliseconds, when positive — else a timestamp in the path (file stem first, then parent directories
innermost first, the source directory's own name last). Accepted path timestamps: ISO-8601 UTC in basic or
extended form with seconds (``20230802T120000Z``, ``2023-08-02T12:00:00Z``, ``2023-08-02T12-00-00Z``,
``20230802-120000``, ``2023-08-02_12-00-00``; optional fraction; a missing ``Z`` still means UTC), a 13-digit epoch
in milliseconds, or a 10-digit epoch in seconds. A file with no time at all is an error naming the file.

**Ticks**: ``ts`` is the exact snapshot time (UTC, to the millisecond): a report's own ``lastUpdate`` /
``updatedAt``, else the timestamp in its path. The leader acts on report versions (``ModularLoadManagerImpl``
refreshes its view on every write of a ``/loadbalance/brokers/<broker>`` node), so each version is its own row:
two versions of one broker's report written in the same minute are two rows, and only the same version dumped
twice is a duplicate ``(cluster, ts, broker)`` that ``lbreplay validate`` rejects. Rows of one report share its
time (a ``LocalBrokerData``'s ``broker_load`` row and its ``lastStats`` ``bundle_load`` rows); ``BundleData``,
``TimeAverageBrokerData`` and ``TopBundlesLoadData``, which carry no time of their own, take their path's.
Snapshot dumps whose reports all sit on whole minutes (e.g. ``lbreplay generate``'s) keep one tick per minute.

Ingest is strict about structure (bad JSON, a missing required field, a value of the wrong type ->
:class:`~lbreplay.errors.InvalidInputError` naming the file and the JSON path) and faithful about content:
negative or non-finite numbers, malformed bundle names and overlapping ranges are loaded as they are and left to
``lbreplay validate``. Numbers Jackson writes as strings (``"NaN"``, ``"Infinity"``) are read as floats. Fields
Pulsar's objects default (NamespaceBundleStats counters, LocalBrokerData totals) take Pulsar's default when absent:
0 for counters, and for LocalBrokerData totals the sums over ``lastStats`` (``LocalBrokerData.updateBundleData``).

The tables ingest writes are the registry's ingested ones (:data:`lbreplay.lake.registry.INGESTED`: each declares
the dump sources above it is filled from). Every table ingest writes is replaced for the cluster as a whole
(``replace_partitions`` where ``cluster = …``), including tables the dump has no rows for;
``namespace_policy`` is not touched. ``collect``'s per-topic polls (``collect/admin/*.jsonl``,
``broker-stats/topics``) -> ``topic_load`` rows at each report's time (``dump_rows.topic_stats_rows``).
With ``--since`` / ``--until`` (a half-open UTC window ``[since, until)``, see
:mod:`lbreplay.lake.window`) only snapshots whose tick falls in the window are loaded, and only the cluster's
rows in the window are replaced (``replaceWhere`` on cluster, the ``date`` partitions and the ``ts`` range; one
commit per table), so ingesting day D keeps day D-1; ``leader_election`` takes every election before the window's
end and keeps those the lake holds (an election on day D-1 times the leader's shedding on day D). A window no
snapshot falls in is a usage error and leaves the lake untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from lbreplay.collect.leader_log import shedding_runs
from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.lake.dump_rows import (
    INGEST_TABLES,
    DumpRows,
    broker_departures,
    leader_elections,
    leader_log_lines,
    leader_placement_rows,
    load_data_tombstones,
    parse_file,
    shedding_run_rows,
    top_bundles_tombstones,
    topic_stats_rows,
)
from lbreplay.lake.dump_tables import LEADER_ELECTION
from lbreplay.lake.dump_tree import BROKER_LOAD_DATA, TOP_BUNDLES_KIND, dump_files, tick_of
from lbreplay.lake.storage import run_concurrently
from lbreplay.lake.tables import Table, ensure_table, replace_partitions, table_location
from lbreplay.lake.window import TimeWindow, window_from_flags
from lbreplay.progress import Progress
from lbreplay.spark import get_spark, lake_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_CLUSTER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")
MODULAR_FAMILY, EXTENSIBLE_FAMILY = "modular", "extensible"
EXTENSIBLE_KINDS = frozenset({BROKER_LOAD_DATA, TOP_BUNDLES_KIND})


def read_dumps(source: str | Path, cluster: str) -> DumpRows:
    """Parse every dump under ``source`` into row dicts (no Spark). Raises UsageError / InvalidInputError."""
    check_cluster(cluster)
    root = Path(source)
    if not root.is_dir():
        raise UsageError(f"--source {source}: not a directory")
    files = dump_files(root)
    if not files:
        raise InvalidInputError(f"{source}: no *.json dump files found")
    out = DumpRows()
    first: dict[str, Path] = {}  # load manager family -> first file of it
    for f in files:
        before = dict(out.reports)
        parse_file(f, root, cluster, out)
        out.files += 1
        for kind, n in out.reports.items():
            if n > before.get(kind, 0):
                first.setdefault(EXTENSIBLE_FAMILY if kind in EXTENSIBLE_KINDS else MODULAR_FAMILY, f)
    if len(first) > 1:
        raise InvalidInputError(
            f"{source}: mixes the modular load manager's reports ({first[MODULAR_FAMILY]}) and the extensible one's "
            f"({first[EXTENSIBLE_FAMILY]}); a cluster runs one load manager: ingest each tree as its own --cluster")
    lines = leader_log_lines(root)  # the leader's log, read once: its runs time the timer and the audit's ticks
    runs = shedding_runs(lines)
    leader_elections(root, cluster, out, runs)
    shedding_run_rows(runs, cluster, out, lines)  # after the reports: a run's printed reports are among them
    leader_placement_rows(lines, cluster, out)
    load_data_tombstones(root, cluster, out)
    top_bundles_tombstones(root, cluster, out)
    topic_stats_rows(root, cluster, out)  # after the reports: topics are stamped at their times
    broker_departures(root, cluster, out)
    return out


def in_window(dump: DumpRows, window: TimeWindow, source: str | Path) -> DumpRows:
    """The rows of ``dump`` whose tick (``ts``) is in ``window`` (leader elections: every one before its end, as
    they time the leader's tasks after them); a UsageError naming the flags when no snapshot is."""
    rows = {name: [r for r in table_rows if _window_of(name, window).contains(r["ts"])]
            for name, table_rows in dump.rows.items()}
    kept = sum(map(len, rows.values()))
    if not kept:
        raise UsageError(f"{window.flag_text()}: no snapshot under {source} falls in {window.describe()}")
    total = sum(map(len, dump.rows.values()))
    return DumpRows(rows=rows, reports=dump.reports, files=dump.files, outside=total - kept)


def _window_of(table: str, window: TimeWindow) -> TimeWindow:
    """The part of the time line a windowed ingest replaces in ``table``."""
    return TimeWindow(None, window.end, window.flags) if table == LEADER_ELECTION.name else window


def _with_earlier_elections(spark: SparkSession, lake: str, rows: list[dict[str, Any]],
                            where: str) -> list[dict[str, Any]]:
    """A windowed ingest replaces the elections before the window's end: those the lake already holds stay (a
    day's dump may lack an earlier day's election), the dump's are added; one row per election time."""
    ensure_table(spark, lake, LEADER_ELECTION)
    held = (spark.read.format("delta").load(table_location(lake, LEADER_ELECTION.name)).where(where)
            .selectExpr("cluster", "unix_millis(ts) AS ms", "broker").collect())
    by_ts = {tick_of(r["ms"]): {"cluster": r["cluster"], "ts": tick_of(r["ms"]), "broker": r["broker"]} for r in held}
    by_ts.update({r["ts"]: r for r in rows})
    return list(by_ts.values())


def check_cluster(cluster: str) -> str:
    """Cluster names are plain identifiers (letters, digits, ``.``, ``_``, ``-``): they go into SQL predicates."""
    if not cluster or not _CLUSTER_RE.fullmatch(cluster):
        raise UsageError(f"--cluster {cluster!r}: use letters, digits, '.', '_' or '-'")
    return cluster


# ----------------------------------------------------------------------------------------------------------------
# Spark side


def rows_frame(spark: SparkSession, table: Table, rows: list[dict[str, Any]]) -> DataFrame:
    """A DataFrame of ``rows`` with ``table``'s columns (except the derived ``date``), typed as the table."""
    cols = [c for c in table.columns if c.name != "date"]
    schema = StructType([StructField(c.name, _parse_datatype_string(c.type), True) for c in cols])
    return spark.createDataFrame([tuple(r.get(c.name) for c in cols) for r in rows], schema)


def ingest(spark: SparkSession, lake: str, source: str | Path, cluster: str, window: TimeWindow | None = None,
           progress: Callable[[str], None] | None = None) -> DumpRows:
    """Read the dumps under ``source`` and replace ``cluster``'s rows in every ingest table (one commit each; the
    tables are written concurrently); with ``window``, only the snapshots and the rows in it. ``progress`` gets a
    line after the dumps are read and after each table's commit."""
    say = progress or (lambda _line: None)
    dump = read_dumps(source, cluster)
    if window is not None:
        dump = in_window(dump, window, source)
    say(f"read {dump.files} files ({dump.ticks} ticks) under {source}; writing {len(INGEST_TABLES)} tables")

    def replace(table: Table) -> None:
        rows = dump.rows[table.name]
        where = f"cluster = '{cluster}'" + (f" AND {_window_of(table.name, window).predicate()}" if window else "")
        if window is not None and table.name == LEADER_ELECTION.name:
            rows = _with_earlier_elections(spark, lake, rows, where)
        if not rows:  # only clear old rows (no empty commit, so other clusters' validations stay on the fast path)
            ensure_table(spark, lake, table)
            if not spark.read.format("delta").load(table_location(lake, table.name)).where(where).limit(1).count():
                say(f"{table.name}: no rows")
                return
        if any(c.name == "ts" for c in table.columns):  # time-ordered files: the replay task streams them in order
            rows = sorted(rows, key=lambda r: r["ts"])  # stable: a snapshot keeps its rows' order
        replace_partitions(spark, lake, table, rows_frame(spark, table, rows), where)
        say(f"{table.name}: {len(rows)} rows committed")

    run_concurrently(*(partial(replace, table) for table in INGEST_TABLES))
    return dump


def ingest_command(source: str | Path, cluster: str, lake: str, master: str | None = None,
                   since: str | None = None, until: str | None = None, quiet: bool = False) -> None:
    """CLI ``lbreplay ingest --source DIR --cluster NAME [--since TS] [--until TS]``: ingest, print what was loaded
    (progress on stderr unless ``quiet``)."""
    check_cluster(cluster)
    window = window_from_flags(since, until, ("--since", "--until"))
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    shown = Progress("ingest", len(INGEST_TABLES), "tables", quiet=quiet)  # its log() is safe from the writer threads
    dump = ingest(spark, lake_abs, source, cluster, window, progress=lambda line: shown.log(f"ingest: {line}"))
    kinds = ", ".join(f"{k}={n}" for k, n in dump.reports.items() if n)
    tables = ", ".join(f"{t.name}={len(dump.rows[t.name])}" for t in INGEST_TABLES)
    span = f" in {window.describe()} ({dump.outside} rows outside skipped)" if window else ""
    print(f"ingested {dump.files} files ({kinds}) from {source} into cluster {cluster}: {dump.ticks} ticks{span}")
    print(f"rows: {tables}")
    print(f"lake: {lake_abs}  (next: lbreplay validate --cluster {cluster})")
