"""Concurrency, crash safety and execution-shape determinism on one small lake (issue: reliability).

The lake holds the ``tiny`` scenario (3 brokers, 4 bundles, 12 ticks, a broker leaving at tick 6) generated,
validated, replayed (the reference run ``solo``) and a sample dump ingested (the reference ``ing-ref``), all
in-process on the test session (``local[2]``). The commands under test run as their own ``lbreplay`` processes
(``local[1]``), as a user or the Airflow DAG starts them, and are compared by content hash
(``harness.run_id_content``: every output table's rows of the run, sorted, without ``run_id``) with the reference.

* Concurrency: a ``replay`` (the DAG's ``replay_baseline``), a ``sweep`` (``sweep_candidates``) and an ``ingest``
  of another cluster start together on a cold tick-stream cache: the replay and the sweep both prepare it (each
  into its own directory; the first manifest published stands); all finish and equal the references. A second
  writer of the baseline's run id fails at once with one line; the first one wins.
* Crash: ``kill -9`` of the whole driver (Python and its JVM, one process group) at seeded random points of an
  ``ingest``, a ``replay`` and a ``sweep`` running together (``LBREPLAY_CRASH_POINTS`` per command: 1 in
  ``make test``, 10 in ``make test-crash``), then the same commands again: the lake ends identical to the
  undisturbed runs, one ``runs`` row per run id, and between the kill and the re-run the views show nothing of a
  run that is not complete.
* Determinism: the what-if run is the same in ``local[1]`` (the concurrent replay) and ``local[2]`` (``solo``), and
  with 5 shuffle partitions instead of 8; an audit (observed mode) is the same replayed as 1 tick slice
  (``local[1]``), as 2 slices (``local[2]``) and with 5 shuffle partitions.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.harness import REPO, Outcome, cli, finish, on_lake, run_id_content, runs_rows, spawn

SCENARIO = "brokers: 3\nnamespaces: 1\nbundles_per_namespace: 4\ntopics: 40\nticks: 12\nevents:\n  - {at_tick: 6, leave: 1}\n"
GRID = ("pulsar:\n  loadBalancerLoadSheddingStrategy: org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\n"
        "grid:\n  loadBalancerBrokerThresholdShedderPercentage: [5, 10]\n")
BASE = ["--set", "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        "--set", "loadBalancerBrokerThresholdShedderPercentage=5"]
SAMPLES = REPO / "data" / "samples" / "modular-3brokers"
CRASH_POINTS = int(os.environ.get("LBREPLAY_CRASH_POINTS", "1"))
LOCAL1 = ["--master", "local[1]", "--quiet"]


def _ok(outcome: Any) -> None:
    assert outcome.code == 0, outcome.err[-3000:]


def _replay(lake: str, run_id: str) -> list[str]:
    return ["replay", "--cluster", "a", *BASE, "--run-id", run_id, "--lake", lake, *LOCAL1]


def _sweep(lake: str, grid: str, prefix: str) -> list[str]:
    return ["sweep", "--cluster", "a", "--grid", grid, "--run-id-prefix", prefix, "--lake", lake, *LOCAL1]


def _ingest(lake: str, cluster: str) -> list[str]:
    return ["ingest", "--source", str(SAMPLES), "--cluster", cluster, "--lake", lake, "--master", "local[1]"]


@pytest.fixture(scope="module")
def tiny(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lake (path with a space), the grid file, and the reference runs' content."""
    work = tmp_path_factory.mktemp("reliability")
    lake = str(work / "tiny lake")
    (work / "tiny.yaml").write_text(SCENARIO, encoding="utf-8")
    grid = work / "grid.yaml"
    grid.write_text(GRID, encoding="utf-8")
    with on_lake(spark, lake):
        _ok(cli(spark, "generate", "--scenario", str(work / "tiny.yaml"), "--cluster", "a", "--lake", lake, "--quiet"))
        _ok(cli(spark, "validate", "--cluster", "a", "--lake", lake))
        _ok(cli(spark, "replay", "--cluster", "a", *BASE, "--run-id", "solo", "--lake", lake, "--quiet"))
        _ok(cli(spark, "ingest", "--source", str(SAMPLES), "--cluster", "ing-ref", "--lake", lake))
    return {"lake": lake, "grid": str(grid), "work": work, "solo": run_id_content(spark, lake, "solo"),
            "durations": {}}


def _finish_together(procs: dict[str, Any]) -> dict[str, tuple[Outcome, float]]:
    """Wait for every process; each one's outcome and seconds from now to its exit."""
    t0 = time.time()

    def wait(proc: Any) -> tuple[Outcome, float]:
        out = finish(proc)
        return out, time.time() - t0

    with ThreadPoolExecutor(len(procs)) as pool:
        return dict(zip(procs, pool.map(wait, procs.values())))


def _input_content(spark: Any, lake: str, cluster: str) -> dict[str, list[str]]:
    import json

    from lbreplay.lake.ingest import INGEST_TABLES
    from lbreplay.lake.tables import table_location

    out = {}
    for t in INGEST_TABLES:
        path = table_location(lake, t.name)
        if not (Path(path) / "_delta_log").is_dir():
            continue
        df = spark.read.format("delta").load(path).where(f"cluster = '{cluster}'").drop("cluster")
        out[t.name] = sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in df.collect())
    return out


def test_parallel_commands_on_one_lake(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    shutil.rmtree(Path(lake) / "_replay_cache", ignore_errors=True)  # the replay and the sweep both prepare it
    procs = {"baseline": spawn(*_replay(lake, "conc-base")),
             "sweep": spawn(*_sweep(lake, tiny["grid"], "conc-sweep")),
             "ingest": spawn(*_ingest(lake, "b"))}
    # a second writer of the baseline's run id while the first holds it: fails at once, writes nothing
    from lbreplay.lake.locks import _lock_file

    lock = _lock_file(lake, "conc-base")
    baseline = procs["baseline"]
    while not (lock.is_file() and lock.read_text().startswith(f"pid {baseline.pid}")):
        assert baseline.poll() is None, finish(baseline).err[-2000:]
        time.sleep(0.2)
    twin = finish(spawn(*_replay(lake, "conc-base")))
    assert twin.code == 1
    assert twin.last.startswith("lbreplay: run id 'conc-base' is being written by another lbreplay process")
    assert twin.err.count("\n") == 1
    results = _finish_together(procs)
    for name, (res, _) in results.items():
        assert res.code == 0, (name, res.err[-3000:])
        # Spark's start-up chatter is off by default (conf/spark/log4j2.properties): no log4j lines on stderr
        chatter = [ln for ln in res.err.splitlines() if " WARN " in ln or "log4j" in ln or " INFO " in ln]
        assert chatter == [], (name, chatter[:5])
    assert results["sweep"][0].out.split() == ["conc-sweep-01", "conc-sweep-02"]
    assert run_id_content(spark, lake, "conc-base") == tiny["solo"]  # local[1] equals local[2]
    # grid point 01 is the baseline's config (threshold 5): same tables; point 02 (threshold 10) is its own run
    assert run_id_content(spark, lake, "conc-sweep-01") == tiny["solo"]
    for rid in ("conc-base", "conc-sweep-01", "conc-sweep-02"):
        assert [r["status"] for r in runs_rows(spark, lake, rid)] == ["succeeded"]
    assert _input_content(spark, lake, "b") == _input_content(spark, lake, "ing-ref")
    with on_lake(spark, lake):
        query = cli(spark, "sql", "SELECT r.run_id, r.status, "
                    "(SELECT count(*) FROM lbreplay.strategy_comparison c WHERE c.run_id = r.run_id) AS compared, "
                    "(SELECT count(*) > 0 FROM lbreplay.validation_runs v WHERE v.cluster = 'a') AS validated "
                    "FROM lbreplay.runs r WHERE r.run_id = 'conc-base'", "--format", "csv", "--lake", lake)
    assert query.out.splitlines() == ["run_id,status,compared,validated", "conc-base,succeeded,1,true"]
    tiny["sweep_ref"] = {rid: run_id_content(spark, lake, f"conc-sweep-{rid}") for rid in ("01", "02")}
    tiny["durations"] = {name: seconds for name, (_, seconds) in results.items()}
    print(f"parallel commands: {tiny['durations']}")


def _kill_at(argv: list[str], after: float) -> bool:
    """Start ``lbreplay argv``, SIGKILL its process group ``after`` seconds later; True when it was still running."""
    proc = spawn(*argv)
    deadline = time.time() + after
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    alive = proc.poll() is None
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    return alive


def _visible(spark: Any, lake: str, run_id: str) -> dict[str, int]:
    """Rows of ``run_id`` the views show (they show only succeeded runs)."""
    from lbreplay.lake.views import VIEW_NAMES, ensure_views

    with on_lake(spark, lake):
        ensure_views(spark, lake)
        return {v: spark.sql(f"SELECT count(*) AS n FROM lbreplay.{v} WHERE run_id = '{run_id}'").first()["n"]
                for v in VIEW_NAMES}


def test_kill_9_then_rerun_leaves_the_undisturbed_result(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    if "sweep_ref" not in tiny:
        pytest.skip("needs the parallel-commands test's sweep as reference")
    rng = random.Random(20261125)
    killed = 0
    ref_visible = _visible(spark, lake, "solo")
    for i in range(CRASH_POINTS):
        rid, prefix = f"crash-replay-{i}", f"crash-sweep-{i}"
        argv = {"ingest": _ingest(lake, f"ing-crash-{i}"), "baseline": _replay(lake, rid),
                "sweep": _sweep(lake, tiny["grid"], prefix)}
        # the three commands run together, as in the parallel-commands test whose durations place the kills
        at = {name: rng.uniform(0.05, 0.95) * tiny["durations"][name] for name in argv}
        with ThreadPoolExecutor(len(argv)) as pool:
            killed += sum(pool.map(_kill_at, argv.values(), [at[name] for name in argv]))
        rows = runs_rows(spark, lake, rid)
        if rows:  # killed after the runs row: then the run is complete
            assert [r["status"] for r in rows] == ["succeeded"] and run_id_content(spark, lake, rid) == tiny["solo"]
            assert _visible(spark, lake, rid) == ref_visible
        else:
            assert _visible(spark, lake, rid) == {v: 0 for v in ref_visible}, f"orphan rows visible @{at}"
        for p in ("01", "02"):
            assert [r["status"] for r in runs_rows(spark, lake, f"{prefix}-{p}")] in ([], ["succeeded"])
        # the same commands again
        results = _finish_together({name: spawn(*args) for name, args in argv.items()})
        for res, _ in results.values():
            _ok(res)
        assert _input_content(spark, lake, f"ing-crash-{i}") == _input_content(spark, lake, "ing-ref"), f"ingest @{at}"
        assert run_id_content(spark, lake, rid) == tiny["solo"], f"replay killed @{at}"
        assert [r["status"] for r in runs_rows(spark, lake, rid)] == ["succeeded"]
        assert _visible(spark, lake, rid) == ref_visible
        for p in ("01", "02"):
            assert run_id_content(spark, lake, f"{prefix}-{p}") == tiny["sweep_ref"][p], f"sweep killed @{at}"
            assert [r["status"] for r in runs_rows(spark, lake, f"{prefix}-{p}")] == ["succeeded"]
    assert killed >= 1  # at least one kill landed while the command ran (the schedule spans its duration)


def test_same_decisions_whatever_the_execution_shape(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    audit = [*BASE, "--mode", "observed", "--seed", "7"]
    one = spawn("replay", "--cluster", "a", *audit, "--run-id", "shape-1", "--lake", lake, *LOCAL1)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        with on_lake(spark, lake):
            _ok(cli(spark, "replay", "--cluster", "a", *audit, "--run-id", "shape-2", "--lake", lake, "--quiet"))
            # the CLI's session defaults set 8 shuffle partitions: the driver function itself runs with 5
            from lbreplay.replay.run_config import resolve_run_config
            from lbreplay.replay.spark_replay import execute

            sets = BASE[1::2]
            what_if = resolve_run_config(None, None, sets)
            observed = resolve_run_config(None, None, [*sets, "replay.mode=observed"])
            spark.conf.set("spark.sql.shuffle.partitions", "5")
            execute(spark, lake, "a", [what_if], run_ids=["shape-cl"], quiet=True)
            execute(spark, lake, "a", [observed], run_ids=["shape-p5"], seed=7, quiet=True)
            assert spark.conf.get("spark.sql.shuffle.partitions") == "5"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    _ok(finish(one))
    ref = run_id_content(spark, lake, "shape-1")  # 1 slice, 8 shuffle partitions
    assert run_id_content(spark, lake, "shape-2") == ref  # 2 slices
    assert run_id_content(spark, lake, "shape-p5") == ref  # 2 slices, 5 shuffle partitions
    assert run_id_content(spark, lake, "shape-cl") == tiny["solo"]  # what-if: 5 vs 8 shuffle partitions
