"""Running lbreplay's real entry point (``lbreplay.cli:main``) in-process or as a process, on any lake.

In-process runs reuse the test session's SparkSession. Its catalog is in memory (``lbreplay.spark``): a lake's
tables are registered per session, so :func:`on_lake` swaps the registrations to another lake for the duration
of a block, and the home lake's come back when the test module ends (dropping an external table's registration
never touches its files).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

REPO = Path(__file__).resolve().parents[2]
LBREPLAY = [sys.executable, "-m", "lbreplay.cli"]


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def last(self) -> str:
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


def _drop_registrations(spark: Any) -> None:
    from lbreplay.lake.tables import DATABASE

    if not spark.catalog.databaseExists(DATABASE):
        return
    for t in spark.catalog.listTables(DATABASE):
        kind = "VIEW" if (t.tableType or "").upper() == "VIEW" else "TABLE"
        spark.sql(f"DROP {kind} IF EXISTS {DATABASE}.`{t.name}`")


_UNREGISTERED_HOMES: dict[str, Any] = {}  # home lake -> session: on_lake dropped its registrations


@contextlib.contextmanager
def on_lake(spark: Any, lake: str) -> Iterator[str]:
    """Within the block the session's ``lbreplay`` database registers ``lake``'s tables (by each command). The home
    lake's registrations come back once, when the test module ends (:func:`register_home_again`), not after every
    block: registering ~20 Delta tables and the views takes 1-2 s, and commands register what they use."""
    home = spark.conf.get("lbreplay.lake")
    _drop_registrations(spark)
    spark.conf.set("lbreplay.lake", lake)
    try:
        yield lake
    finally:
        _drop_registrations(spark)
        spark.conf.set("lbreplay.lake", home)
        _UNREGISTERED_HOMES[home] = spark


def register_home_again() -> None:
    """Register the home lakes' tables and views that :func:`on_lake` blocks left unregistered."""
    from lbreplay.lake.tables import ensure_tables
    from lbreplay.lake.views import ensure_views

    while _UNREGISTERED_HOMES:
        home, spark = _UNREGISTERED_HOMES.popitem()
        ensure_tables(spark, home)
        ensure_views(spark, home)


def cli(spark: Any | None, *argv: str, stdin: str | None = None) -> Outcome:
    """``lbreplay *argv`` through ``lbreplay.cli:main`` in this interpreter (stdout/stderr captured)."""
    from lbreplay import cli as cli_mod

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.stdin
    partitions = spark.conf.get("spark.sql.shuffle.partitions") if spark is not None else None
    sys.argv = ["lbreplay", *argv]
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli_mod.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv, sys.stdin = saved
        if spark is not None and partitions is not None:
            spark.conf.set("spark.sql.shuffle.partitions", partitions)
    return Outcome(code, out.getvalue(), err.getvalue())


def env() -> dict[str, str]:
    lib = str(REPO / "lib")
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": lib + (os.pathsep + path if path else "")}


def spawn(*argv: str, **kw: Any) -> subprocess.Popen[str]:
    """``lbreplay *argv`` as its own process (own session / process group, so it can be killed whole)."""
    return subprocess.Popen([*LBREPLAY, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), cwd=str(REPO), start_new_session=True, **kw)


def finish(proc: subprocess.Popen[str], timeout: float = 1200) -> Outcome:
    out, err = proc.communicate(timeout=timeout)
    return Outcome(proc.returncode, out, err)


def rows_by(spark: Any, lake: str, tables: Iterable[str], key: str, values: list[str],
            where: dict[str, str] | None = None) -> dict[str, dict[str, list[str]]]:
    """Per value of column ``key``, each table's rows with it (sorted JSON, ``key`` left out), each table read
    once; ``where`` adds a filter per table name."""
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import table_location

    out: dict[str, dict[str, list[str]]] = {v: {} for v in values}
    for name in tables:
        df = spark.read.format("delta").load(table_location(lake, name)).where(F.col(key).isin(values))
        if where and name in where:
            df = df.where(where[name])
        for v in values:
            out[v][name] = []
        for r in df.collect():
            d = r.asDict(recursive=True)
            out[d.pop(key)][name].append(json.dumps(d, sort_keys=True, default=str))
    return {v: {name: sorted(rows) for name, rows in by_table.items()} for v, by_table in out.items()}


def run_ids_content(spark: Any, lake: str, run_ids: list[str]) -> dict[str, dict[str, str]]:
    """Content hash per output table of each run (rows sorted, run_id and wall-clock columns left out, and the
    task's peak RSS: a measurement of the process, not an outcome of the replay), each table read once."""
    from lbreplay.lake.tables import OUTPUT_TABLES

    rows = rows_by(spark, lake, [n for n in OUTPUT_TABLES if n != "runs"], "run_id", run_ids,
                   where={"run_metrics": "metric != 'task_peak_rss_mb'"})
    return {rid: {name: hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16] for name, lines in by_table.items()}
            for rid, by_table in rows.items()}


def runs_rows(spark: Any, lake: str, run_id: str) -> list[dict[str, Any]]:
    from lbreplay.lake.tables import table_location

    path = table_location(lake, "runs")
    if not (Path(path) / "_delta_log").is_dir():
        return []
    return [r.asDict() for r in spark.read.format("delta").load(path).where(f"run_id = '{run_id}'").collect()]
