"""Time ``lbreplay generate`` at size M (50 brokers, 2,000 bundles, 20,000 topics, 1,440 one-minute ticks).

Usage: ``python bench/generate_m.py [--scenario steady] [--seed 42] [--lake DIR] [--master local[*]]``.
Generates into a temporary lake (deleted afterwards unless ``--lake`` is given) and prints one JSON object:
``{"scenario": ..., "size": "M", "seconds": <generation time>, "spark_start_seconds": ..., "rows": <total>,
"tables": {table: rows}}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="steady")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--lake", default=None, help="keep the generated lake here (default: a temporary one)")
    parser.add_argument("--master", default=None)
    parser.add_argument("--driver-memory", default="3g")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)

    from lbreplay.lake.generator import generate
    from lbreplay.spark import get_spark

    tmp = None if args.lake else tempfile.mkdtemp(prefix="lbreplay-bench-")
    lake = args.lake or f"{tmp}/lake"
    try:
        t0 = time.time()
        spark = get_spark(lake, master=args.master, conf={"spark.driver.memory": args.driver_memory,
                                                          "spark.ui.enabled": "false"})
        started = time.time() - t0
        log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.verbose else None
        result = generate(spark, lake, args.scenario, "bench", seed=args.seed, size="M", log=log)
        spark.stop()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"scenario": args.scenario, "size": "M", "seconds": round(result.seconds, 1),
                      "spark_start_seconds": round(started, 1), "rows": sum(result.rows.values()),
                      "tables": result.rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
