"""``lbreplay sql``: Spark SQL against the lake's registered tables, printed as a table, CSV or JSON lines.

The lake's tables and views are registered first (``tables.ensure_tables``, ``views.ensure_views``: the session's
catalog is in memory, see ``lbreplay.spark``), so a fresh process sees everything the lake holds. Timestamps
print in UTC (the session time zone) as ``yyyy-MM-dd HH:mm:ss[.SSS]``; dates as ``yyyy-MM-dd``. The table
format shows at most :data:`TABLE_ROW_LIMIT` rows (say so when it cuts); csv and json stream every row.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from decimal import Decimal
from typing import Any, Iterable, TextIO

from lbreplay.errors import UsageError

FORMATS = ("table", "csv", "json")
TABLE_ROW_LIMIT = 10_000


def _printable(df: Any) -> Any:
    """Cast top-level timestamp and date columns to strings in the session time zone (UTC)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, (TimestampType, TimestampNTZType, DateType)):
            cols.append(F.col(f"`{f.name}`").cast("string").alias(f.name))
        else:
            cols.append(F.col(f"`{f.name}`"))
    return df.select(*cols)


def _plain(value: Any) -> Any:
    """JSON-friendly value: Rows to dicts, Decimals to numbers, non-finite floats to strings."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if value is not None and not isinstance(value, (str, int, float, bool)):
        return str(value)
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple, dict)) or hasattr(value, "asDict"):
        return json.dumps(_plain(value), separators=(",", ":"))
    return str(value)


def render_table(columns: list[str], rows: Iterable[tuple], numeric: list[bool]) -> str:
    """A compact text table: header, a rule, one line per row; numbers right-aligned, no truncation."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    sep = "  "

    def line(values: list[str], header: bool = False) -> str:
        parts = [v.rjust(w) if (numeric[i] and not header) else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        return sep.join(parts).rstrip()

    out = [line(columns, header=True), sep.join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def write_csv(columns: list[str], rows: Iterable[tuple], out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _cell(v) for v in row])


def write_json_lines(columns: list[str], rows: Iterable[tuple], out: TextIO) -> None:
    for row in rows:
        out.write(json.dumps({c: _plain(v) for c, v in zip(columns, row)}, separators=(",", ":")) + "\n")


def _query_error(exc: Exception) -> UsageError | None:
    """A UsageError for errors the query's author caused: parse/analysis errors and SQL data exceptions
    (SQLSTATE classes 42 and 22, e.g. a missing table or a division by zero); None for anything else. Spark's
    errors alike from an embedded session and through Spark Connect."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException

    if not isinstance(exc, PySparkException):
        return None
    state = ""
    try:
        state = exc.getSqlState() or ""
    except Exception:  # noqa: BLE001 - older error classes carry no state
        state = ""
    if not (isinstance(exc, (ParseException, AnalysisException)) or state[:2] in ("42", "22")):
        return None
    lines = str(exc).strip().splitlines()
    return UsageError(f"bad query: {lines[0] if lines else type(exc).__name__}")


def run_query(spark: Any, query: str) -> Any:
    """``spark.sql(query)``; parse and analysis errors become a one-line UsageError (exit 2)."""
    text = query.strip().rstrip(";").strip()
    if not text:
        raise UsageError("empty query")
    try:
        return spark.sql(text)
    except Exception as exc:
        err = _query_error(exc)
        if err is None:
            raise
        raise err from None


def print_result(df: Any, fmt: str = "table", out: TextIO | None = None) -> int:
    """Print ``df`` in ``fmt``; returns the number of rows printed."""
    from pyspark.sql.types import DecimalType, NumericType

    out = out or sys.stdout
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    df = _printable(df)
    columns = df.columns
    if fmt == "table":
        numeric = [isinstance(f.dataType, (NumericType, DecimalType)) for f in df.schema.fields]
        rows = [tuple(r) for r in df.limit(TABLE_ROW_LIMIT + 1).collect()]
        more = len(rows) > TABLE_ROW_LIMIT
        rows = rows[:TABLE_ROW_LIMIT]
        out.write(render_table(columns, rows, numeric) + "\n")
        if more:
            out.write(f"(only the first {TABLE_ROW_LIMIT} rows shown; use --format csv or json for all)\n")
        else:
            out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")
        return len(rows)
    rows_iter = (tuple(r) for r in df.toLocalIterator())
    count = 0

    def counted(it: Iterable[tuple]) -> Iterable[tuple]:
        nonlocal count
        for r in it:
            count += 1
            yield r

    if fmt == "csv":
        write_csv(columns, counted(rows_iter), out)
    else:
        write_json_lines(columns, counted(rows_iter), out)
    out.flush()
    return count


def register_existing(spark: Any, lake: str, present: set[str] | None = None) -> list[str]:
    """Register the lake's other Delta tables that exist (the dump tables, ``validation_runs``) without creating
    missing ones, skipping those in ``present`` (already in the catalog); returns their names."""
    from lbreplay.lake.dump_tables import DUMP_TABLES, VALIDATION_RUNS
    from lbreplay.lake.presence import table_exists
    from lbreplay.lake.tables import ensure_table

    found = []
    for table in {**DUMP_TABLES, VALIDATION_RUNS.name: VALIDATION_RUNS}.values():
        if table.name not in (present or set()) and table_exists(spark, lake, table.name):
            ensure_table(spark, lake, table)
            found.append(table.name)
    return found


def register_lake(spark: Any, lake: str) -> None:
    """The lake's tables (``tables.ensure_tables``), its other existing Delta tables and the views; only those the
    catalog does not hold yet (a warm server's catalog keeps them between commands)."""
    from lbreplay.lake.tables import ALL_TABLES, DATABASE, ensure_tables
    from lbreplay.lake.views import VIEW_NAMES, ensure_views

    present = {str(r[1]) for r in spark.sql(f"SHOW TABLES IN {DATABASE}").collect()}
    missing = {n: t for n, t in ALL_TABLES.items() if n not in present}
    if missing:  # (ensure_tables of an empty dict would mean every table)
        ensure_tables(spark, lake, missing)
    register_existing(spark, lake, present)
    if not set(VIEW_NAMES) <= present:
        ensure_views(spark, lake="")


def run_statement(spark: Any, statement: str, fmt: str, out: TextIO | None = None) -> int:
    """Run one statement and print its result; returns the rows printed."""
    df = run_query(spark, statement)
    try:
        return print_result(df, fmt, out)
    except Exception as exc:
        err = _query_error(exc)
        if err is None:
            raise
        raise err from None


def run_shell(spark: Any, fmt: str, stdin: TextIO, out: TextIO) -> None:
    """The interactive shell (``lake.sql_shell``): a statement's error is printed and the shell goes on; the
    command then ends with exit 2 naming how many failed."""
    from lbreplay.errors import LbReplayError
    from lbreplay.lake.sql_shell import shell

    failed: list[str] = []

    def run(statement: str) -> bool:
        try:
            run_statement(spark, statement, fmt, out)
            return True
        except LbReplayError as exc:
            out.flush()
            print(f"lbreplay: {exc}", file=sys.stderr)
            failed.append(statement)
            return False

    shell(run, stdin, out, interactive=stdin.isatty())
    if failed:
        raise UsageError(f"{len(failed)} statement{'s' if len(failed) > 1 else ''} failed")


def sql_command(query: str | None, fmt: str = "table", lake: str | None = None, master: str | None = None) -> int:
    """CLI entry point of ``lbreplay sql``: register the lake's tables, run each statement of ``query`` (split on
    ``;`` outside quotes) and print its result; with no ``query`` the shell reads statements from stdin. The lake
    must exist (exit 2 otherwise); the session is the lake's warm server's where enabled (``warm_server``)."""
    from lbreplay.lake.sql_shell import statements_of
    from lbreplay.paths import DEFAULT_LAKE
    from lbreplay.spark import existing_lake, lake_path
    from lbreplay.warm_server import lake_session

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    statements = None if query is None else statements_of(query)
    if statements == []:
        raise UsageError("empty query")
    lake = lake_path(lake or DEFAULT_LAKE)
    with existing_lake():
        spark = lake_session(lake, master)
    register_lake(spark, lake)
    if statements is None:
        run_shell(spark, fmt, sys.stdin, sys.stdout)
        return 0
    rows = 0
    for i, statement in enumerate(statements):
        if i and fmt == "table":
            sys.stdout.write("\n")
        rows += run_statement(spark, statement, fmt)
    return rows
