"""Airflow tests: run with Airflow's own environment (``make test-airflow``), never with the project's.

Airflow reads its settings when first imported, so this module points it at a throw-away home (SQLite
metadata database, this repository's ``airflow/dags`` as the DAG folder, no examples) and defines the
``spark_default`` connection (local Spark, the ``spark-submit`` on the PATH the DAG sets) before any test
imports Airflow.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # stdlib-only helpers of tests/ (tests.dump_days); lbreplay itself is not installed here
DAGS = REPO / "airflow" / "dags"
PROJECT_VENV = REPO / ".venv"

_HOME = Path(tempfile.mkdtemp(prefix="lbreplay-airflow-home-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark-submit"}}
        ),
    }
)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    return _HOME

