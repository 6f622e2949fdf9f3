"""Oracle check throughput: the same seeded cases through the Pulsar oracle one request at a time
(``run_case``: the kernel waits for the JVM and the JVM for the kernel) and pipelined (``run_cases``: the JVM
answers the next requests while the kernel answers this one).

One JSON line per strategy with cases, both wall times and their ratio, measured in the same run on the same
oracle JVM (warmed by a first pass that is not timed); then a total line with the 1-minute load average.

    .venv/bin/python bench/verify_pipeline.py [--pulsar-version 4.0] [--cases 100] [--seed 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from lbreplay.verify import PULSAR_LINES, STRATEGIES, Oracle, line_strategies, run_case, run_cases  # noqa: E402
from lbreplay.verify import cases as seeded_cases  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pulsar-version", default="4.0")
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    jar, profile, java = PULSAR_LINES[args.pulsar_version]
    available = line_strategies(args.pulsar_version)
    totals = {"sequential_s": 0.0, "pipelined_s": 0.0, "cases": 0}
    with Oracle(jar, java, extensible="TransferShedder" in available) as oracle:
        for strategy in STRATEGIES:
            if strategy not in available:
                continue
            batch = [(f"{strategy}-{k}", c) for k, c in
                     enumerate(seeded_cases(args.seed, strategy, args.cases, profile))]
            # warm both sides; each pass has its own sequence ids (the oracle keeps strategy instances per id)
            list(run_cases(oracle, [(f"warm-{cid}", case) for cid, case in batch[: max(1, len(batch) // 5)]]))
            t0 = time.perf_counter()
            sequential = [run_case(oracle, case, f"seq-{cid}") for cid, case in batch]
            t1 = time.perf_counter()
            pipelined = list(run_cases(oracle, [(f"pipe-{cid}", case) for cid, case in batch]))
            t2 = time.perf_counter()
            assert sequential == pipelined, f"{strategy}: the two ways disagree"
            row = {"strategy": strategy, "cases": len(batch), "sequential_s": round(t1 - t0, 3),
                   "pipelined_s": round(t2 - t1, 3), "ratio": round((t1 - t0) / (t2 - t1), 2),
                   "disagreeing": sum(1 for d in pipelined if d)}
            print(json.dumps(row), flush=True)
            totals["sequential_s"] += t1 - t0
            totals["pipelined_s"] += t2 - t1
            totals["cases"] += len(batch)
    print(json.dumps({"pulsarVersion": jar, "cases": totals["cases"],
                      "sequential_s": round(totals["sequential_s"], 2), "pipelined_s": round(totals["pipelined_s"], 2),
                      "ratio": round(totals["sequential_s"] / totals["pipelined_s"], 2),
                      "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
