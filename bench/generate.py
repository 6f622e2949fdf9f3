"""Generator benchmark: ``lbreplay generate`` per size, one JSON line each.

Each line: scenario, size, brokers/bundles/topics/ticks, the generation seconds (Spark start excluded, measured
separately), total rows and rows per second, the executors' CPU seconds (from the session's status tracker is not
exposed, so the process CPU of the driver JVM is not counted -- wall time is the figure), the target
(``generate --size M`` <= 90 s, L <= 10 min) and the 1-minute load averages before and after (the machine is
shared: compare figures only with their load average).

    python bench/generate.py [--sizes S,M,L] [--scenario large] [--seed 42] [--lake DIR] [--master local[2]]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

TARGET_S = {"M": 90.0, "L": 600.0}


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="S,M")
    ap.add_argument("--scenario", default="large", help="scenario name (default: large, which defines S, M and L)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lake", default=None, help="keep the lake here (default: a temporary one, removed after)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args(argv)

    from lbreplay.lake.generator import generate
    from lbreplay.lake.scenario import resolve_scenario
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
            sc = resolve_scenario(args.scenario, size)
            before = load_avg()
            cpu0 = os.times()
            result = generate(spark, lake, args.scenario, f"gen{size.lower()}", seed=args.seed, size=size)
            cpu1 = os.times()
            rows = sum(result.rows.values())
            target = TARGET_S.get(size)
            print(json.dumps({
                "scenario": sc.name, "size": size, "brokers": sc.brokers, "bundles": sc.num_bundles,
                "topics": sc.topics, "ticks": sc.ticks, "seconds": round(result.seconds, 1), "rows": rows,
                "rows_per_s": round(rows / max(result.seconds, 1e-9)), "tables": result.rows,
                "driver_python_cpu_s": round((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), 1),
                "target_s": target, "within_target": None if target is None else result.seconds <= target,
                "load_average_before": before, "load_average": load_avg(),
            }), flush=True)
        spark.stop()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
