"""Interactive-use benchmark: cold and warm ``lbreplay`` commands, each as its own CLI process.

Cold: ``LBREPLAY_WARM=0`` (each process starts its embedded Spark). Warm: the lake's warm Spark server
(``lbreplay.warm_server``) already running; the first warm command, which starts the server, is reported on its own
line (``server_start``). Cases: ``sql "SELECT 1"`` and a KPI query over ``lbreplay.run_metrics``. The replay is not
measured warm: it runs on an embedded Spark only (its driver code uses the JVM gateway, which Spark Connect lacks).

Prints JSON lines: one per command (case, mode, seconds, load averages), then one summary per case with the median
cold and warm seconds and their ratio warm / cold, all measured in this run. The lake's server is stopped (by pid) at
the end.

    python bench/interactive.py --lake data/lake [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from lbreplay.lake.presence import require_local_lake  # noqa: E402
from lbreplay.spark import lake_path  # noqa: E402
from lbreplay.warm_server import stop_server  # noqa: E402

CASES: dict[str, list[str]] = {
    "sql_select_1": ["sql", "SELECT 1"],
    "sql_kpi": ["sql", "SELECT run_id, metric, value FROM lbreplay.run_metrics WHERE metric LIKE '%moves%' "
                       "ORDER BY run_id, metric LIMIT 50"],
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(argv: list[str], lake: str, warm: bool) -> float:
    """Wall seconds of ``lbreplay *argv --lake lake`` as a process; exits on a failed command."""
    env = {**os.environ, "LBREPLAY_WARM": "1" if warm else "0"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lbreplay.cli", *argv, "--lake", lake], capture_output=True,
                          text=True, env=env)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"bench/interactive.py: {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds


def emit(**fields: object) -> None:
    print(json.dumps({**fields, "load_avg": _load()}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.environ.get("LBREPLAY_LAKE", "data/lake"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lake = lake_path(args.lake)
    require_local_lake(lake)
    stop_server(lake)
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for case, argv in CASES.items():
            for _ in range(args.repeat):
                times.setdefault((case, "cold"), []).append(s := timed(argv, lake, warm=False))
                emit(case=case, mode="cold", seconds=round(s, 2))
        emit(case="server_start", mode="warm", seconds=round(timed(CASES["sql_select_1"], lake, warm=True), 2))
        for case, argv in CASES.items():
            for _ in range(args.repeat):
                times.setdefault((case, "warm"), []).append(s := timed(argv, lake, warm=True))
                emit(case=case, mode="warm", seconds=round(s, 2))
    finally:
        stop_server(lake)
    for case in CASES:
        cold, warm = statistics.median(times[(case, "cold")]), statistics.median(times[(case, "warm")])
        emit(case=case, summary=True, cold_median_s=round(cold, 2), warm_median_s=round(warm, 2),
             ratio_warm_cold=round(warm / cold, 3), target_warm_s=3.0)


if __name__ == "__main__":
    main()
