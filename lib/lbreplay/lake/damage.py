"""Damaged lake tables: Spark/Delta read errors that name a file of a lake table, as one-line input errors.

A deleted or corrupted Parquet file under a table, or a corrupt ``_delta_log`` entry, surfaces deep inside a Spark
job (``FileNotFoundException``, ``FAILED_READ_FILE``, a JSON parse error of a commit). :func:`unreadable_table`
turns such an error into an :class:`~lbreplay.errors.InvalidInputError` (exit 3) naming the table, the file and
what to do; anything else is left alone (None).
"""

from __future__ import annotations

import re

from lbreplay.errors import InvalidInputError

# <table>/_delta_log/<version>.json|.checkpoint... or <table>/[<partition>=<value>/...]part-...
_FILE = re.compile(r"/(?P<table>[A-Za-z0-9_]+)/(?P<rest>_delta_log/[0-9]+\.[A-Za-z0-9.]+|"
                   r"(?:[^/=\s]+=[^/]*/)*part-[^\s,'\"\]\[]+?)(?=[\s,'\"\]\[]|\.?$|\. )", re.M)
_SIGNS = ("FileNotFound", "FAILED_READ_FILE", "does not exist", "corrupt", "Corrupt", "not a Parquet file",
          "CANNOT_READ_FILE", "JsonParseException", "Unexpected end-of-input", "DELTA_", "MalformedJson",
          "Could not read footer", "expected magic number")


def _table_names() -> set[str]:
    from lbreplay.lake.dump_tables import DUMP_TABLES, VALIDATION_RUNS
    from lbreplay.lake.tables import ALL_TABLES

    return {*ALL_TABLES, *DUMP_TABLES, VALIDATION_RUNS.name}


def unreadable_table(exc: BaseException) -> InvalidInputError | None:
    """An InvalidInputError naming the lake table whose file ``exc`` failed to read, else None."""
    text = str(exc)
    if not any(s in text for s in _SIGNS):
        return None
    names = _table_names()
    for m in _FILE.finditer(text):
        table, path = m.group("table"), f"{m.group('table')}/{m.group('rest')}"
        if table not in names:
            continue
        what = "its Delta log entry" if "/_delta_log/" in path else "a data file"
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
        if len(first) > 200:
            first = first[:197] + "..."
        return InvalidInputError(
            f"table {table}: {what} is missing or corrupt: {path} ({first}); restore the file from a backup, or "
            f"re-create the rows (lbreplay ingest / generate for input tables, the replay for output tables)")
    return None
