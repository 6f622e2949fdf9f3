"""Shared fixtures: one session-scoped SparkSession (local[2], few shuffle partitions, UI off) on a temp lake."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]

# No warm Spark server (lbreplay.warm_server) outlives a test: commands the tests run, in-process or as processes,
# use an embedded Spark; the warm server's own tests turn it on for their processes and stop it by pid.
os.environ["LBREPLAY_WARM"] = "0"


@pytest.fixture(scope="session")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="session")
def spark(lake: str) -> Iterator[object]:
    from lbreplay.spark import get_spark

    session = get_spark(
        lake,
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.databricks.delta.snapshotPartitions": "1",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="module", autouse=True)
def home_lake_registered() -> Iterator[None]:
    """After each module, the session's home lake registered again if a module switched lakes (``on_lake``)."""
    yield
    from tests.hostile.harness import register_home_again

    register_home_again()
