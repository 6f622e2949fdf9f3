"""lbreplay.spark's catalog choice: an in-memory catalog per session for local lakes (no metastore file that
admits one process), the submitter's catalog where it sets one. Checked on the builder in a fresh interpreter
(no JVM needed: only the options the factory puts on a ``SparkSession.Builder``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hostile.harness import env

PROBE = """
import json, sys
from pyspark.sql import SparkSession
from lbreplay.spark import configure_lbreplay
conf = json.loads(sys.argv[2])
b = configure_lbreplay(SparkSession.builder, sys.argv[1], master="local[1]", conf=conf or None)
print(json.dumps({k: v for k, v in b._options.items() if "catalog" in k or "warehouse" in k or "derby" in k.lower()
                  or "ConnectionURL" in k or "shuffle" in k}))
"""


def _options(lake: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", PROBE, lake, json.dumps(conf or {})], capture_output=True, text=True,
                         env=env(), timeout=120, check=True).stdout
    return json.loads(out)


def test_local_lake_gets_an_in_memory_catalog_and_its_warehouse_in_the_lake(tmp_path: Path) -> None:
    lake = str(tmp_path / "a lake")
    opts = _options(lake)
    assert opts["spark.sql.catalogImplementation"] == "in-memory"
    assert opts["spark.sql.warehouse.dir"] == f"{lake}/_catalog/warehouse"
    assert not any("ConnectionURL" in k or "derby" in v for k, v in opts.items())
    assert opts["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def test_a_catalog_set_by_the_caller_is_kept(tmp_path: Path) -> None:
    opts = _options(str(tmp_path / "lake"), {"spark.sql.catalogImplementation": "hive"})
    assert opts["spark.sql.catalogImplementation"] == "hive"
    assert "spark.sql.warehouse.dir" not in opts


def test_uri_lake_leaves_the_catalog_to_the_cluster() -> None:
    opts = _options("s3a://bucket/lake")
    assert "spark.sql.catalogImplementation" not in opts


def test_spark_submit_conf_keeps_the_submitters_catalog(tmp_path: Path) -> None:
    """Under spark-submit (as on a cluster) a ``--conf spark.sql.catalogImplementation=hive`` of the submitter is
    read from the launched JVM and kept; without it the local lake still gets the in-memory catalog."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    submit = str(Path(sys.executable).with_name("spark-submit"))
    lake = str(tmp_path / "lake")
    bindir = str(Path(sys.executable).parent)
    submit_env = {**env(), "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "PYSPARK_PYTHON": sys.executable,
                  "PYSPARK_DRIVER_PYTHON": sys.executable}
    got = []
    for extra in (["--conf", "spark.sql.catalogImplementation=hive", "--conf", "spark.sql.shuffle.partitions=3"], []):
        out = subprocess.run([submit, "--master", "local[1]", *extra, str(probe), lake, "{}"], capture_output=True,
                             text=True, env=submit_env, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        got.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "spark.sql.catalogImplementation" not in got[0]  # the builder leaves the submitter's hive alone
    assert "spark.sql.shuffle.partitions" not in got[0]  # and its shuffle partitions
    assert got[1]["spark.sql.catalogImplementation"] == "in-memory"
