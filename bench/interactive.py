"""Interactive-use benchmark: cold and warm ``lbreplay`` commands, each as its own CLI process.

Warm: the lake's warm command server (``lbreplay.warm_server``) running; its start is measured on its own line
(``server_start``: the first warm command, ``validate --cluster``, which the replays need anyway). Cold:
``LBREPLAY_WARM=0`` (each process starts its embedded Spark). Cases: ``sql "SELECT 1"``, a KPI query over
``lbreplay.run_metrics``, and a replay of the cluster (an S scenario: ``lbreplay generate --scenario steady --size S``).

Prints JSON lines: one per command (case, mode, seconds, seconds to its first output line, the load averages
``uptime`` shows), then one summary per case with the median cold and warm seconds and their ratio warm / cold, all
measured in this run. The lake's server is stopped (by pid) at the end.

    python bench/interactive.py --lake LAKE --cluster CLUSTER [--generate] [--repeat 2] [--replay-repeat 1]
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

from lbreplay.lake.presence import is_local_lake, require_local_lake  # noqa: E402
from lbreplay.spark import lake_path  # noqa: E402
from lbreplay.warm_server import stop_server  # noqa: E402

TARGET_WARM_SECONDS = 3.0


def cases(cluster: str) -> dict[str, list[str]]:
    return {
        "sql_select_1": ["sql", "SELECT 1"],
        "sql_kpi": ["sql", "SELECT run_id, metric, value FROM lbreplay.run_metrics WHERE metric LIKE '%move%' "
                           "ORDER BY run_id, metric LIMIT 50"],
        "replay_s": ["replay", "--cluster", cluster, "--config", "threshold-lltmr"],
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(argv: list[str], lake: str, warm: bool) -> tuple[float, float]:
    """Wall seconds of ``lbreplay *argv --lake lake`` as a process, and seconds until its first output (stdout and
    stderr merged: a replay's first progress line says its work began); exits on a failed command."""
    env = {**os.environ, "LBREPLAY_WARM": "1" if warm else "0"}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "lbreplay.cli", *argv, "--lake", lake], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    assert proc.stdout is not None
    first = proc.stdout.read1(65536)
    first_seconds = time.monotonic() - started
    rest = proc.stdout.read()
    seconds = time.monotonic() - started
    if proc.wait() != 0:
        text = (first + rest).decode(errors="replace").strip()[-500:]
        sys.exit(f"bench/interactive.py: {' '.join(argv)} exited {proc.returncode}: {text}")
    return seconds, first_seconds


def emit(**fields: object) -> None:
    print(json.dumps({**fields, "load_avg": _load()}), flush=True)


def measure(name: str, argv: list[str], lake: str, warm: bool, n: int, times: dict[tuple[str, str], list[float]],
            ) -> None:
    mode = "warm" if warm else "cold"
    for i in range(n):
        run = ["--run-id", f"bench-interactive-{mode}-{i + 1}"] if argv[0] == "replay" else []
        seconds, first = timed([*argv, *run], lake, warm)
        times.setdefault((name, mode), []).append(seconds)
        emit(case=name, mode=mode, seconds=round(seconds, 2), first_output_s=round(first, 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.environ.get("LBREPLAY_LAKE", "data/lake"))
    parser.add_argument("--cluster", required=True, help="the cluster the replay case replays (size S)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each sql case per mode")
    parser.add_argument("--replay-repeat", type=int, default=1, help="runs of the replay per mode")
    parser.add_argument("--generate", action="store_true",
                        help="no lake at --lake: generate the S scenario `steady` into it first (not measured)")
    args = parser.parse_args()
    lake = lake_path(args.lake)
    if args.generate and not is_local_lake(lake):  # set-up, not measured
        subprocess.run([sys.executable, "-m", "lbreplay.cli", "generate", "--scenario", "steady", "--size", "S",
                        "--cluster", args.cluster, "--lake", lake, "--quiet"], check=True,
                       env={**os.environ, "LBREPLAY_WARM": "0"})
    require_local_lake(lake)
    stop_server(lake)
    todo = cases(args.cluster)
    times: dict[tuple[str, str], list[float]] = {}
    try:
        started, _ = timed(["validate", "--cluster", args.cluster, "--quiet"], lake, warm=True)
        emit(case="server_start", mode="warm", seconds=round(started, 2), command="validate")
        for warm in (True, False):
            if not warm:
                stop_server(lake)
            for name, argv in todo.items():
                measure(name, argv, lake, warm, args.replay_repeat if name == "replay_s" else args.repeat, times)
    finally:
        stop_server(lake)
    for name in todo:
        cold, warm = statistics.median(times[(name, "cold")]), statistics.median(times[(name, "warm")])
        emit(case=name, summary=True, cold_median_s=round(cold, 2), warm_median_s=round(warm, 2),
             ratio_warm_cold=round(warm / cold, 3), target_warm_s=TARGET_WARM_SECONDS)


if __name__ == "__main__":
    main()
