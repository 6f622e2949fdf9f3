"""Generator and validation benchmark: ``lbreplay generate`` then ``lbreplay validate`` per size, one JSON line each.

Each line: scenario, size, brokers/bundles/topics/ticks, ``generate_s`` (Spark start excluded, measured
separately), total rows and rows per second, then -- in the same run, on the lake just generated --
``plain_scan_s`` (one plain Spark scan of every validated table's rows of the cluster, every column read; the mean
of one scan before and one after the validation), ``validate_s`` (the full validation: fingerprints, the Great
Expectations suites, quarantine and ``validation_runs``) and ``ratio`` = validate_s / plain_scan_s. The targets
(issue: ``generate --size M`` <= 90 s, L <= 10 min; validate of M <= 90 s and <= 3x one plain scan) and the
1-minute load averages before and after each step go with them (the machine is shared: compare figures only
with their load average).

    python bench/generate.py [--sizes S,M,L] [--scenario large] [--seed 42] [--ticks N] [--no-validate]
                             [--lake DIR] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

TARGET_S = {"M": 90.0, "L": 600.0}
VALIDATE_TARGET_S = {"M": 90.0}
VALIDATE_TARGET_RATIO = 3.0


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def plain_scan(spark: Any, lake: str, cluster: str) -> float:
    """Seconds of one plain scan (every column, no computation) of the cluster's rows of every validated table."""
    from pyspark.sql import functions as F

    from lbreplay.lake.delta_log import delta_version
    from lbreplay.lake.expectations import VALIDATED_TABLES
    from lbreplay.lake.tables import table_location

    t0 = time.time()
    for t in VALIDATED_TABLES:
        if delta_version(spark, lake, t) is None:
            continue
        df = spark.read.format("delta").load(table_location(lake, t.name)).where(F.col("cluster") == cluster)
        df.write.format("noop").mode("overwrite").save()
    return time.time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="S,M")
    ap.add_argument("--scenario", default="large", help="scenario name (default: large, which defines S, M and L)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ticks", type=int, default=None, help="override the size's ticks (a shorter history)")
    ap.add_argument("--no-validate", action="store_true", help="generation only")
    ap.add_argument("--lake", default=None, help="keep the lake here (default: a temporary one, removed after)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args(argv)

    from lbreplay.lake.generator import generate
    from lbreplay.lake.scenario import load_scenario_doc, resolve_scenario
    from lbreplay.lake.validation import validate
    from lbreplay.spark import get_spark

    tmp = None if args.lake else tempfile.mkdtemp(prefix="lbreplay-bench-gen-")
    lake = args.lake or f"{tmp}/lake"
    try:
        t0 = time.time()
        spark = get_spark(lake, master=args.master, conf={"spark.driver.memory": args.driver_memory,
                                                          "spark.ui.enabled": "false"})
        print(json.dumps({"step": "spark_start", "seconds": round(time.time() - t0, 1), "load_average": load_avg()}),
              flush=True)
        for size in [s.strip().upper() for s in args.sizes.split(",") if s.strip()]:
            name, doc = load_scenario_doc(args.scenario)
            if args.ticks is not None:
                sizes = dict(doc.get("sizes") or {})
                sizes[size] = {**(sizes.get(size) or {}), "ticks": args.ticks}
                doc["sizes"] = sizes
            doc["name"] = name
            sc = resolve_scenario(doc, size)
            cluster = f"gen{size.lower()}"
            line: dict[str, Any] = {"scenario": sc.name, "size": size, "brokers": sc.brokers,
                                    "bundles": sc.num_bundles, "topics": sc.topics, "ticks": sc.ticks,
                                    "load_average_before": load_avg()}
            result = generate(spark, lake, doc, cluster, seed=args.seed, size=size)
            rows = sum(result.rows.values())
            target = TARGET_S.get(size)
            line.update({"generate_s": round(result.seconds, 1), "rows": rows,
                         "rows_per_s": round(rows / max(result.seconds, 1e-9)), "tables": result.rows,
                         "generate_target_s": target,
                         "generate_within_target": None if target is None else result.seconds <= target,
                         "load_average_generate": load_avg()})
            if not args.no_validate:
                scan_before = plain_scan(spark, lake, cluster)
                v0 = time.time()
                report = validate(spark, lake, cluster)
                validate_s = time.time() - v0
                scan_after = plain_scan(spark, lake, cluster)
                scan_s = (scan_before + scan_after) / 2
                ratio = validate_s / max(scan_s, 1e-9)
                vtarget = VALIDATE_TARGET_S.get(size)
                line.update({"validate_s": round(validate_s, 1), "plain_scan_s": round(scan_s, 1),
                             "plain_scan_runs_s": [round(scan_before, 1), round(scan_after, 1)],
                             "ratio": round(ratio, 2), "validation_passed": report.passed,
                             "expectations": len(report.results), "validate_target_s": vtarget,
                             "validate_within_target": (ratio <= VALIDATE_TARGET_RATIO
                                                        and (vtarget is None or validate_s <= vtarget)),
                             "load_average_validate": load_avg()})
            line["load_average"] = load_avg()
            print(json.dumps(line), flush=True)
        spark.stop()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
