"""The lake's tables (``lbreplay.lake.tables``): a lake made before a table gained a column keeps working."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.harness import on_lake


@pytest.mark.spark
def test_a_lake_made_before_a_new_column_gets_it_and_keeps_its_rows(spark: Any, tmp_path: Path) -> None:
    """``shedding_run`` gained ``read_at`` (2026-11-28): in a lake ingested before, ``CREATE TABLE IF NOT EXISTS``
    failed with DELTA_CREATE_TABLE_SCHEME_MISMATCH on the next ingest. ``ensure_table`` adds the new nullable
    column (one ``ALTER TABLE … ADD COLUMNS`` commit) and the old rows stay, with it null."""
    from lbreplay.lake.dump_tables import SHEDDING_RUN
    from lbreplay.lake.tables import ensure_table, replace_partitions, table_location

    lake = str(tmp_path / "old-lake")
    before = dataclasses.replace(SHEDDING_RUN, columns=SHEDDING_RUN.columns[:-1])  # the table as it was made
    assert [c.name for c in SHEDDING_RUN.columns[-1:]] == ["read_at"]
    old = spark.createDataFrame([("c", datetime(2026, 11, 28, 13, 43, 52, tzinfo=UTC), date(2026, 11, 28))],
                                "cluster STRING, ts TIMESTAMP, date DATE")
    with on_lake(spark, lake):
        replace_partitions(spark, lake, before, old, "cluster = 'c'")
        _drop_registration(spark, SHEDDING_RUN.name)  # a new process: nothing registered yet
        ensure_table(spark, lake, SHEDDING_RUN)
        got = spark.read.format("delta").load(table_location(lake, SHEDDING_RUN.name))
        assert got.columns == [c.name for c in SHEDDING_RUN.columns]
        assert [(r["cluster"], r["read_at"]) for r in got.collect()] == [("c", None)]
        new = spark.createDataFrame([("d", datetime(2026, 11, 28, 13, 44, tzinfo=UTC),
                                      datetime(2026, 11, 28, 13, 43, 59, tzinfo=UTC))],
                                    "cluster STRING, ts TIMESTAMP, read_at TIMESTAMP")
        replace_partitions(spark, lake, SHEDDING_RUN, new, "cluster = 'd'")
        rows = spark.read.format("delta").load(table_location(lake, SHEDDING_RUN.name)).orderBy("cluster").collect()
        assert [(r["cluster"], r["read_at"] is None) for r in rows] == [("c", True), ("d", False)]


def _drop_registration(spark: Any, name: str) -> None:
    from lbreplay.lake.tables import DATABASE

    spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.{name}")  # an external table: its files stay


@pytest.mark.spark
def test_decisions_made_before_drawn_among_gain_it_and_keep_their_rows(spark: Any, tmp_path: Path) -> None:
    """``decisions`` gained ``drawn_among`` (the brokers Pulsar's placement drew a destination from at random) at
    its end: a lake whose runs were written before gets the nullable column on the next run's write, its old rows
    read with it null, and the new run's KEEP row carries its draw."""
    from lbreplay.lake.tables import DECISIONS, replace_partitions, table_location

    lake = str(tmp_path / "old-lake")
    assert [c.name for c in DECISIONS.columns[-1:]] == ["drawn_among"]
    before = dataclasses.replace(DECISIONS, columns=DECISIONS.columns[:-1])
    schema = "run_id STRING, seq BIGINT, action STRING, bundle STRING"
    with on_lake(spark, lake):
        replace_partitions(spark, lake, before, spark.createDataFrame([("r1", 1, "UNLOAD", "t/n/a")], schema),
                           "run_id = 'r1'")
        _drop_registration(spark, DECISIONS.name)  # replace_partitions' ensure_table adds the column
        new = spark.createDataFrame([("r2", 1, "KEEP", "t/n/b", ["b1:8080", "b2:8080"])],
                                    schema + ", drawn_among ARRAY<STRING>")
        replace_partitions(spark, lake, DECISIONS, new, "run_id = 'r2'")
        got = spark.read.format("delta").load(table_location(lake, DECISIONS.name))
        assert got.columns == [c.name for c in DECISIONS.columns]
        rows = got.orderBy("run_id").collect()
        assert [(r["run_id"], r["action"], r["drawn_among"]) for r in rows] == [
            ("r1", "UNLOAD", None), ("r2", "KEEP", ["b1:8080", "b2:8080"])]
