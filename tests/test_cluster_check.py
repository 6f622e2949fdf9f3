"""lbreplay.cluster_check: a spark-submitted job stops (exit 2, one line) on a cluster whose Spark major.minor is not
the one lbreplay pins (setup.cfg ``pyspark==``); ``make test-cluster`` runs the check against a real standalone
cluster."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbreplay import cluster_check
from lbreplay.cluster_check import major_minor, require_supported_spark, spark_mismatch, supported_spark
from lbreplay.errors import EXIT_USAGE, UsageError

SETUP_CFG = Path(__file__).resolve().parents[1] / "setup.cfg"


def _pinned_spark() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    pin = next(ln.strip() for ln in cfg["options"]["install_requires"].splitlines() if ln.strip().startswith("pyspark=="))
    return ".".join(pin.split("==")[1].split(".")[:2])


def test_supported_spark_is_the_setup_cfg_pin() -> None:
    assert supported_spark() == _pinned_spark() == "4.1"


@pytest.mark.parametrize(
    ("cluster", "supported", "message"),
    [
        ("4.1.4", "4.1", None),
        ("4.1.0", "4.1.4", None),
        ("4.1.9-SNAPSHOT", "4.1", None),
        ("4.0.1", "4.1", "cluster runs Spark 4.0.1, lbreplay needs Spark 4.1"),
        ("3.5.3", "4.1.4", "cluster runs Spark 3.5.3, lbreplay needs Spark 4.1"),
        ("4.10.0", "4.1", "cluster runs Spark 4.10.0, lbreplay needs Spark 4.1"),
        ("5.1.0", "4.1", "cluster runs Spark 5.1.0, lbreplay needs Spark 4.1"),
        ("unknown", "4.1", "cluster runs Spark unknown, lbreplay needs Spark 4.1"),
    ],
)
def test_spark_mismatch(cluster: str, supported: str, message: str | None) -> None:
    assert spark_mismatch(cluster, supported) == message


@given(st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)),
       st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)))
def test_mismatch_iff_major_minor_differ(a: tuple[int, int, int], b: tuple[int, int, int]) -> None:
    cluster, supported = ".".join(map(str, a)), ".".join(map(str, b))
    assert (spark_mismatch(cluster, supported) is None) == (a[:2] == b[:2])
    assert major_minor(cluster) == f"{a[0]}.{a[1]}"


def test_require_refuses_another_spark_with_exit_2() -> None:
    with pytest.raises(UsageError) as err:
        require_supported_spark("3.5.1")
    assert str(err.value) == "cluster runs Spark 3.5.1, lbreplay needs Spark 4.1"
    assert err.value.exit_code == EXIT_USAGE


def test_outside_spark_submit_nothing_is_checked() -> None:
    """A plain interpreter (no spark-submit gateway, no context): no version to check, no error, no JVM started."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    code = ("from lbreplay.cluster_check import require_supported_spark, submitted_spark_version; "
            "require_supported_spark(); from pyspark import SparkContext; "
            "print(submitted_spark_version(), SparkContext._jvm)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]


@pytest.mark.spark
def test_the_running_jvm_passes(spark: Any) -> None:
    """The session's own JVM (the installed pyspark's) reports the supported version and passes the check."""
    version = cluster_check.submitted_spark_version()
    assert version == spark.version
    assert major_minor(version) == "4.1"
    require_supported_spark()
