"""No silent empty lakes (``lake.presence``, ``spark.existing_lake``): commands that read a lake refuse a path that
is not one (exit 2, nothing created), an unknown cluster and unknown run ids (exit 2, naming the known ones)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from lbreplay.errors import UsageError
from lbreplay.lake import presence
from lbreplay.paths import CONF_DIR
from tests.hostile.harness import cli

NO_LAKE = "no lake at {}; create one with `lbreplay generate …`, `lbreplay ingest …` or `lbreplay collect --lake …`"


@pytest.mark.spark
@pytest.mark.parametrize("argv", [
    ["sql", "SELECT 1"],
    ["report", "--runs", "r1", "--out", "{tmp}/r.html"],
    ["replay", "--cluster", "c1"],
    ["replay", "--cluster", "c1", "--run-id", "r1"],  # the run-id lock is taken under the lake: after the check
    ["sweep", "--cluster", "c1", "--grid", "{grid}", "--run-id-prefix", "p"],
    ["validate"],
])
@pytest.mark.parametrize("made", [False, True])
def test_a_path_that_is_not_a_lake_is_refused_and_left_alone(spark: Any, tmp_path: Path, argv: list[str],
                                                             made: bool) -> None:
    """A missing directory stays missing; an existing directory without lbreplay tables stays empty."""
    where = tmp_path / "not a lake"
    if made:
        where.mkdir()
    grid = CONF_DIR / "grids" / "cluster-smoke.yaml"
    outcome = cli(spark, *[a.format(tmp=tmp_path, grid=grid) for a in argv], "--lake", str(where))
    assert outcome.code == 2, outcome.err
    assert outcome.err.strip().splitlines() == ["lbreplay: " + NO_LAKE.format(where)]
    assert outcome.out == ""
    assert (list(where.iterdir()) == []) if made else not where.exists()


@pytest.fixture(scope="module")
def known_lake(spark: Any, lake: str) -> str:
    """The session lake with rows of cluster ``presence a/b`` (a name Hive escapes in partition paths)."""
    from lbreplay.lake.tables import BROKER_LOAD, replace_partitions

    rows = [("presence a/b", datetime(2024, 1, 1, 0, m), "broker-1:8080") for m in range(2)]
    df = spark.createDataFrame(rows, "cluster string, ts timestamp, broker string")
    replace_partitions(spark, lake, BROKER_LOAD, df, "cluster = 'presence a/b'")
    return lake


@pytest.mark.spark
def test_unknown_cluster_names_the_known_ones(spark: Any, known_lake: str) -> None:
    assert "presence a/b" in presence.known_clusters(spark, known_lake)
    presence.require_cluster(spark, known_lake, "presence a/b")
    for argv in (["validate", "--cluster", "nope"], ["replay", "--cluster", "nope"]):
        outcome = cli(spark, *argv, "--lake", known_lake)
        assert outcome.code == 2, outcome.err
        line = outcome.err.strip().splitlines()[-1]
        assert line.startswith(f"lbreplay: unknown cluster 'nope' in {known_lake}; known clusters: ")
        assert "presence a/b" in line


@pytest.mark.spark
def test_unknown_run_ids_name_the_known_ones(spark: Any, known_lake: str, tmp_path: Path) -> None:
    known = presence.known_runs(spark, known_lake)
    with pytest.raises(UsageError, match=r"unknown run ids nope-1, nope-2 in .*; (known runs: |no runs yet)"):
        presence.require_runs(spark, known_lake, ["nope-1", *known[:1], "nope-2"])
    outcome = cli(spark, "report", "--runs", "nope-1", "--out", str(tmp_path / "r.html"), "--lake", known_lake)
    assert outcome.code == 2, outcome.err
    assert f"unknown run id nope-1 in {known_lake}" in outcome.err
    assert not (tmp_path / "r.html").exists()


def test_what_makes_a_lake(tmp_path: Path) -> None:
    """A Delta log of one of lbreplay's tables; a catalog directory alone, or another table's log, is not one."""
    (tmp_path / "_catalog" / "warehouse").mkdir(parents=True)
    (tmp_path / "other_table" / "_delta_log").mkdir(parents=True)
    assert not presence.is_local_lake(str(tmp_path))
    with pytest.raises(UsageError, match="no lake at"):
        presence.require_local_lake(str(tmp_path))
    (tmp_path / "runs" / "_delta_log").mkdir(parents=True)
    assert presence.is_local_lake(str(tmp_path))
    assert presence.is_local_lake(f"file://{tmp_path}")


def test_partition_values_are_unescaped() -> None:
    """Hive escapes ``/`` and ``%`` in partition directories; a URI escapes the ``%`` once more."""
    assert presence._partition_value("/l/broker_load/cluster=a%2Fb/date=2024-01-01/p.parquet", "cluster") == "a/b"
    assert presence._partition_value("file:///l/broker_load/cluster=a%252Fb/date=x/p.parquet", "cluster") == "a/b"
    assert presence._partition_value("/l/broker_load/date=x/p.parquet", "cluster") is None
