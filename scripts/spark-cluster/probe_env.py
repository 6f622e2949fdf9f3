"""Part of ``make test-cluster`` (spark-submitted onto the standalone cluster with the packed environment).

The driver opens lbreplay's session (``lbreplay.spark.get_spark``: under spark-submit it first checks the cluster's
Spark against lbreplay's supported major.minor, ``lbreplay.cluster_check``), then runs one task per executor that
reports where its Python and modules come from. Checks, per executor:

* ``sys.executable`` and ``sys.prefix`` are inside ``environment/`` of the executor's working directory (the
  ``--archives ...#environment`` unpacked by Spark), not the driver's environment;
* lbreplay, numpy, pandas, pyarrow and yaml are imported from that environment, pyspark and py4j from the
  worker's own Spark (``$SPARK_HOME/python/lib/*.zip``: the archive carries none);
* ``LBREPLAY_CONF_DIR`` is the archive's ``conf/`` (lbreplay's Pulsar defaults are readable there).

Prints one JSON line per executor and a summary; exits 1 when a check fails.

    spark-submit ... --archives lbreplay-env.tar.gz#environment probe_env.py --lake LAKE --executors N
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

MODULES = ("lbreplay", "numpy", "pandas", "pyarrow", "yaml", "pyspark", "py4j")


def report(_: Iterator[Any]) -> Iterator[dict[str, Any]]:
    """Runs on an executor: its Python, the modules' files, the conf dir (sleeps so the tasks spread)."""
    import importlib

    time.sleep(2)
    from lbreplay.paths import CONF_DIR

    yield {
        "cwd": os.getcwd(), "executable": sys.executable, "prefix": sys.prefix,
        "spark_home": os.environ.get("SPARK_HOME", ""),
        "modules": {m: str(importlib.import_module(m).__file__) for m in MODULES},
        "conf_dir": str(CONF_DIR.resolve()), "conf_ok": (CONF_DIR / "pulsar").is_dir(),
    }


def problems(r: dict[str, Any]) -> list[str]:
    env = os.path.join(r["cwd"], "environment")
    out = []
    if not (r["executable"].startswith(env + os.sep) and os.path.realpath(r["prefix"]) == os.path.realpath(env)):
        out.append(f"python {r['executable']} (prefix {r['prefix']}) is not the unpacked archive {env}")
    for m, f in r["modules"].items():
        want = os.path.join(r["spark_home"], "python", "lib") if m in ("pyspark", "py4j") else env
        if not os.path.realpath(f).startswith(os.path.realpath(want) + os.sep):
            out.append(f"{m} imported from {f}, not from {want}")
    if not (r["conf_dir"].startswith(os.path.realpath(env)) and r["conf_ok"]):
        out.append(f"LBREPLAY_CONF_DIR {r['conf_dir']} is not the archive's conf/")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--executors", type=int, default=2)
    args = ap.parse_args()
    from lbreplay.cluster_check import supported_spark
    from lbreplay.spark import get_spark

    spark = get_spark(args.lake)  # the version check runs here, before the session exists
    print(json.dumps({"check": "spark_version", "cluster": spark.version, "supported": supported_spark(),
                      "result": "ok"}), flush=True)
    sc = spark.sparkContext
    rows = sc.parallelize(range(args.executors), args.executors).mapPartitions(report).collect()
    failures = []
    for r in rows:
        found = problems(r)
        failures += found
        print(json.dumps({"executor_cwd": r["cwd"], "executable": r["executable"],
                          "lbreplay": r["modules"]["lbreplay"], "pyspark": r["modules"]["pyspark"],
                          "conf_dir": r["conf_dir"], "ok": not found}), flush=True)
    cwds = {r["cwd"] for r in rows}
    if len(cwds) < args.executors:
        failures.append(f"{len(cwds)} executor working directories for {args.executors} tasks")
    print(json.dumps({"check": "packed_environment", "executors": len(cwds), "failures": failures}), flush=True)
    spark.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
