"""``lbreplay sql``: output formats (DESIGN.md §3: table, csv, json one object per line) and usage errors."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest

from lbreplay.errors import UsageError
from lbreplay.lake import sql as sqlmod
from lbreplay.lake.sql import print_result, render_table, run_query, sql_command, write_csv, write_json_lines

LITERALS = ("SELECT 1 AS n, 'a,b' AS s, CAST('2024-01-01 00:00:00' AS TIMESTAMP) AS ts, array(1, 2) AS arr, "
            "CAST(NULL AS STRING) AS missing, 2.5D AS x")


def test_render_table_is_compact_and_right_aligns_numbers() -> None:
    """Header, a rule as wide as each column, numbers right-aligned, no truncation of long values."""
    text = render_table(["name", "n"], [("broker-00:8080", 11), ("b", 7), (None, None)], [False, True])
    # widths: name 14 ("broker-00:8080"), n 4 ("NULL"); two spaces between columns
    assert text.splitlines() == [
        "name" + " " * 12 + "n",
        "-" * 14 + "  " + "-" * 4,
        "broker-00:8080" + "    11",
        "b" + " " * 18 + "7",
        "NULL" + " " * 12 + "NULL",
    ]


def test_csv_and_json_lines_writers() -> None:
    """csv quotes separators and leaves NULL empty; json is one object per line with real JSON types."""
    out = io.StringIO()
    write_csv(["a", "b"], [("x,y", None), (1.5, True)], out)
    assert out.getvalue() == 'a,b\n"x,y",\n1.5,true\n'
    out = io.StringIO()
    write_json_lines(["a", "b"], [("x", [1, 2]), (None, float("inf"))], out)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"a": "x", "b": [1, 2]},
                                                                          {"a": None, "b": "inf"}]


@pytest.mark.spark
def test_formats_of_one_row(spark) -> None:  # type: ignore[no-untyped-def]
    """Timestamps print in the session time zone (UTC); arrays as JSON; NULL as NULL / empty / null."""
    df = run_query(spark, LITERALS)
    out = io.StringIO()
    assert print_result(df, "table", out) == 1
    assert out.getvalue().splitlines() == [
        "n  s    ts                   arr    missing  x",
        "-  ---  -------------------  -----  -------  ---",
        "1  a,b  2024-01-01 00:00:00  [1,2]  NULL     2.5",
        "(1 row)",
    ]
    out = io.StringIO()
    print_result(run_query(spark, LITERALS), "csv", out)
    assert out.getvalue() == 'n,s,ts,arr,missing,x\n1,"a,b",2024-01-01 00:00:00,"[1,2]",,2.5\n'
    out = io.StringIO()
    print_result(run_query(spark, LITERALS + " UNION ALL " + LITERALS.replace("1 AS n", "2 AS n")), "json", out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == {"n": 1, "s": "a,b", "ts": "2024-01-01 00:00:00", "arr": [1, 2], "missing": None,
                                    "x": 2.5}
    assert json.loads(lines[1])["n"] == 2


@pytest.mark.spark
def test_table_format_caps_rows(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sqlmod, "TABLE_ROW_LIMIT", 3)
    out = io.StringIO()
    assert print_result(spark.range(5), "table", out) == 3
    lines = out.getvalue().splitlines()
    assert lines[2:5] == [" 0", " 1", " 2"]  # right-aligned under "id"
    assert lines[5].startswith("(only the first 3 rows shown")


@pytest.mark.spark
def test_sql_command_queries_registered_tables(spark, lake, capsys) -> None:  # type: ignore[no-untyped-def]
    """The input tables are registered in the `lbreplay` database; a query over broker_load counts brokers."""
    from lbreplay.lake.tables import BROKER_LOAD, replace_partitions

    rows = [("sqltest", datetime(2024, 1, 1, 0, m), f"broker-{b}:8080") for m in range(2) for b in range(3)]
    df = spark.createDataFrame(rows, "cluster string, ts timestamp, broker string")
    replace_partitions(spark, lake, BROKER_LOAD, df, "cluster = 'sqltest'")
    n = sql_command("SELECT count(DISTINCT broker) AS brokers, count(*) AS reports FROM lbreplay.broker_load "
                    "WHERE cluster = 'sqltest';", "csv", lake)
    assert n == 1
    assert capsys.readouterr().out.splitlines() == ["brokers,reports", "3,6"]
    sql_command("SHOW TABLES IN lbreplay", "json", lake)
    names = {json.loads(line)["tableName"] for line in capsys.readouterr().out.splitlines()}
    assert {"broker_load", "bundle_load", "topic_load", "namespace_policy", "quarantine"} <= names


@pytest.mark.spark
@pytest.mark.parametrize("query, fragment", [
    ("SELEC 1", "PARSE_SYNTAX_ERROR"),
    ("SELECT * FROM lbreplay.no_such_table", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT no_such_column FROM lbreplay.broker_load", "UNRESOLVED_COLUMN"),
    ("SELECT 1 / 0", "DIVIDE_BY_ZERO"),
])
def test_bad_query_is_a_one_line_usage_error(spark, lake, query: str, fragment: str,  # type: ignore[no-untyped-def]
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """A bad query -> exit 2 (UsageError) with a one-line reason naming Spark's error class, and nothing else:
    pyspark's JSON record of the error (``SQLQueryContextLogger``, the JVM stack in it) is not printed."""
    from lbreplay.lake.tables import BROKER_LOAD, ensure_table

    ensure_table(spark, lake, BROKER_LOAD)  # a lake (sql refuses a path that is not one)
    with pytest.raises(UsageError) as info:
        sql_command(query, "table", lake)
    message = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in message
    assert message.startswith("bad query: ") and fragment in message
    assert "QueryContextLogger" not in capfd.readouterr().err


def test_usage_errors_before_spark() -> None:
    with pytest.raises(UsageError, match="--format must be one of table, csv, json"):
        sql_command("SELECT 1", "xml", "/nonexistent/lake")
    with pytest.raises(UsageError, match="empty query"):
        sql_command("   ", "table", "/nonexistent/lake")


@pytest.mark.spark
def test_several_statements_print_one_result_each(spark, lake) -> None:  # type: ignore[no-untyped-def]
    """Statements split on ``;`` outside quotes; each result printed in turn (tables separated by a blank line)."""
    from lbreplay.lake.tables import BROKER_LOAD, ensure_table
    from tests.hostile.harness import cli

    ensure_table(spark, lake, BROKER_LOAD)
    outcome = cli(spark, "sql", "SELECT 1 AS a; SELECT 'x;y' AS `b;c`;\n-- done;\n", "--lake", lake)
    assert outcome.code == 0, outcome.err
    assert outcome.out.splitlines() == ["a", "-", "1", "(1 row)", "", "b;c", "---", "x;y", "(1 row)"]
    outcome = cli(spark, "sql", "SELECT 1 AS a; SELECT 2 AS a", "--format", "csv", "--lake", lake)
    assert outcome.out.splitlines() == ["a", "1", "a", "2"]
    outcome = cli(spark, "sql", "SELECT 1 AS a; SELEC 2", "--lake", lake)
    assert outcome.code == 2 and "bad query: " in outcome.err and outcome.out.splitlines()[:3] == ["a", "-", "1"]


@pytest.mark.spark
def test_shell_reads_statements_from_piped_stdin(spark, lake) -> None:  # type: ignore[no-untyped-def]
    """No statement: a shell over stdin (no prompt when it is not a terminal); a statement may span lines, a bad one
    is reported and the shell goes on (exit 2 at the end), ``.quit`` leaves."""
    from lbreplay.lake.tables import BROKER_LOAD, ensure_table
    from tests.hostile.harness import cli

    ensure_table(spark, lake, BROKER_LOAD)
    stdin = "SELECT 1\n  AS a;\nSELEC 2;\nSELECT 'q;' AS b; SELECT 3 AS c\n;\n.quit\nSELECT 4 AS d;\n"
    outcome = cli(spark, "sql", "--lake", lake, stdin=stdin)
    assert outcome.code == 2
    assert outcome.out.splitlines() == ["a", "-", "1", "(1 row)", "b", "--", "q;", "(1 row)", "c", "-", "3",
                                        "(1 row)"]
    assert [ln for ln in outcome.err.splitlines() if ln.startswith("lbreplay: ")][0].startswith(
        "lbreplay: bad query: ")
    assert outcome.err.strip().splitlines()[-1] == "lbreplay: 1 statement failed"
    outcome = cli(spark, "sql", "--lake", lake, "--format", "json", stdin="SELECT 5 AS e")  # EOF ends the last one
    assert (outcome.code, outcome.out) == (0, '{"e":5}\n')
