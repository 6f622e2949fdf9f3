"""Concurrency, crash safety and execution-shape determinism on one small lake (issue: reliability).

The lake holds the ``tiny`` scenario (3 brokers, 4 bundles, 12 ticks, a broker leaving at tick 6) generated and
validated in-process. Every other command runs as its own ``lbreplay`` process, as a user or the Airflow DAG
starts them, and is compared by content hash (``harness.run_id_content``: every output table's rows of the run,
sorted, without ``run_id``) with a run that nothing disturbed.

* Concurrency: a ``replay`` (the DAG's ``replay_baseline``), a ``sweep`` (``sweep_candidates``), an ``ingest`` of
  another cluster and a ``sql`` start together; all finish and equal their solo runs. Two replays of one cluster on
  a cold tick-stream cache both prepare it (each into its own directory; the first manifest published stands).
  A second writer of the baseline's run id fails at once with one line; the first one wins.
* Crash: ``kill -9`` of the whole driver (Python and its JVM, one process group) at seeded random points of an
  ``ingest``, a ``replay`` and a ``sweep`` (``LBREPLAY_CRASH_POINTS`` per command: 1 in ``make test``, 10 in
  ``make test-crash``), then the same command again: the lake ends identical to the undisturbed run, one ``runs``
  row per run id, and between the kill and the re-run the views show nothing of a run that is not complete.
* Determinism: an audit (observed mode) replayed as 1, 2 and 3 tick slices (``local[1]``, the test session's
  ``local[2]``, ``local[3]``) and with 2, 8 and 5 shuffle partitions gives identical tables; so does a what-if
  run in ``local[1]`` and ``local[2]``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.harness import REPO, cli, finish, on_lake, run_id_content, runs_rows, spawn

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


@pytest.fixture(scope="module")
def tiny(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lake (path with a space), the grid file, and the solo runs' content and durations."""
    work = tmp_path_factory.mktemp("reliability")
    lake = str(work / "tiny lake")
    (work / "tiny.yaml").write_text(SCENARIO, encoding="utf-8")
    grid = work / "grid.yaml"
    grid.write_text(GRID, encoding="utf-8")
    with on_lake(spark, lake):
        _ok(cli(spark, "generate", "--scenario", str(work / "tiny.yaml"), "--cluster", "a", "--lake", lake, "--quiet"))
        _ok(cli(spark, "validate", "--cluster", "a", "--lake", lake))
    t0 = time.time()
    _ok(finish(spawn("replay", "--cluster", "a", *BASE, "--run-id", "solo", "--lake", lake, *LOCAL1)))
    replay_s = time.time() - t0
    t0 = time.time()
    _ok(finish(spawn("ingest", "--source", str(SAMPLES), "--cluster", "ing-ref", "--lake", lake, "--master", "local[1]")))
    ingest_s = time.time() - t0
    return {"lake": lake, "grid": str(grid), "work": work, "solo": run_id_content(spark, lake, "solo"),
            "durations": {"replay": replay_s, "ingest": ingest_s}}


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
    t0 = time.time()  # the solo run prepared the tick stream (_replay_cache): both replays read it
    baseline = spawn("replay", "--cluster", "a", *BASE, "--run-id", "conc-base", "--lake", lake, *LOCAL1)
    sweep = spawn("sweep", "--cluster", "a", "--grid", tiny["grid"], "--run-id-prefix", "conc-sweep", "--lake", lake,
                  *LOCAL1)
    ingest = spawn("ingest", "--source", str(SAMPLES), "--cluster", "b", "--lake", lake, "--master", "local[1]")
    query = spawn("sql", "SELECT r.run_id, r.status, "
                  "(SELECT count(*) FROM lbreplay.strategy_comparison c WHERE c.run_id = r.run_id) AS compared, "
                  "(SELECT count(*) > 0 FROM lbreplay.validation_runs v WHERE v.cluster = 'a') AS validated "
                  "FROM lbreplay.runs r WHERE r.run_id = 'solo'", "--format", "csv",
                  "--lake", lake, "--master", "local[1]")
    # a second writer of the baseline's run id while the first holds it: fails at once, writes nothing
    from lbreplay.lake.locks import _lock_file

    lock = _lock_file(lake, "conc-base")
    while not (lock.is_file() and lock.read_text().startswith(f"pid {baseline.pid}")):
        assert baseline.poll() is None, finish(baseline).err[-2000:]
        time.sleep(0.2)
    twin = finish(spawn("replay", "--cluster", "a", *BASE, "--run-id", "conc-base", "--lake", lake, *LOCAL1))
    assert twin.code == 1
    assert twin.last.startswith("lbreplay: run id 'conc-base' is being written by another lbreplay process")
    assert twin.err.count("\n") == 1
    results = {name: finish(p) for name, p in
               (("baseline", baseline), ("sweep", sweep), ("ingest", ingest), ("sql", query))}
    for name, res in results.items():
        assert res.code == 0, (name, res.err[-3000:])
        # Spark's start-up chatter is off by default (conf/spark/log4j2.properties): no log4j lines on stderr
        chatter = [ln for ln in res.err.splitlines() if " WARN " in ln or "log4j" in ln or " INFO " in ln]
        assert chatter == [], (name, chatter[:5])
    wall = time.time() - t0
    assert results["sql"].out.splitlines() == ["run_id,status,compared,validated", "solo,succeeded,1,true"]
    assert results["sweep"].out.split() == ["conc-sweep-01", "conc-sweep-02"]
    assert run_id_content(spark, lake, "conc-base") == tiny["solo"]
    # grid point 01 is the baseline's config (threshold 5): same tables; point 02 (threshold 10) is its own run
    assert run_id_content(spark, lake, "conc-sweep-01") == tiny["solo"]
    for rid in ("conc-base", "conc-sweep-01", "conc-sweep-02"):
        assert [r["status"] for r in runs_rows(spark, lake, rid)] == ["succeeded"]
    assert _input_content(spark, lake, "b") == _input_content(spark, lake, "ing-ref")
    tiny["sweep_ref"] = {rid: run_id_content(spark, lake, f"conc-sweep-{rid}") for rid in ("01", "02")}
    tiny["durations"]["sweep"] = wall
    print(f"parallel commands: {wall:.1f}s wall")


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
        # ingest
        at = rng.uniform(0.05, 0.95) * tiny["durations"]["ingest"]
        argv = ["ingest", "--source", str(SAMPLES), "--cluster", f"ing-crash-{i}", "--lake", lake, "--master", "local[1]"]
        killed += _kill_at(argv, at)
        _ok(finish(spawn(*argv)))
        assert _input_content(spark, lake, f"ing-crash-{i}") == _input_content(spark, lake, "ing-ref"), f"ingest @{at:.1f}s"
        # replay
        rid = f"crash-replay-{i}"
        at = rng.uniform(0.05, 0.95) * tiny["durations"]["replay"]
        argv = ["replay", "--cluster", "a", *BASE, "--run-id", rid, "--lake", lake, *LOCAL1]
        killed += _kill_at(argv, at)
        rows = runs_rows(spark, lake, rid)
        if rows:  # killed after the runs row: then the run is complete
            assert [r["status"] for r in rows] == ["succeeded"] and run_id_content(spark, lake, rid) == tiny["solo"]
            assert _visible(spark, lake, rid) == ref_visible
        else:
            assert _visible(spark, lake, rid) == {v: 0 for v in ref_visible}, f"orphan rows visible @{at:.1f}s"
        _ok(finish(spawn(*argv)))
        assert run_id_content(spark, lake, rid) == tiny["solo"], f"replay killed @{at:.1f}s"
        assert [r["status"] for r in runs_rows(spark, lake, rid)] == ["succeeded"]
        assert _visible(spark, lake, rid) == ref_visible
        # sweep
        prefix = f"crash-sweep-{i}"
        at = rng.uniform(0.05, 0.95) * tiny["durations"]["sweep"]
        argv = ["sweep", "--cluster", "a", "--grid", tiny["grid"], "--run-id-prefix", prefix, "--lake", lake, *LOCAL1]
        killed += _kill_at(argv, at)
        for p in ("01", "02"):
            assert [r["status"] for r in runs_rows(spark, lake, f"{prefix}-{p}")] in ([], ["succeeded"])
        _ok(finish(spawn(*argv)))
        for p in ("01", "02"):
            assert run_id_content(spark, lake, f"{prefix}-{p}") == tiny["sweep_ref"][p], f"sweep killed @{at:.1f}s"
            assert [r["status"] for r in runs_rows(spark, lake, f"{prefix}-{p}")] == ["succeeded"]
    assert killed >= 1  # at least one kill landed while the command ran (the schedule spans its duration)


def test_same_decisions_whatever_the_execution_shape(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    audit = [*BASE, "--mode", "observed", "--seed", "7"]
    one = spawn("replay", "--cluster", "a", *audit, "--run-id", "shape-1", "--lake", lake, *LOCAL1)
    three = spawn("replay", "--cluster", "a", *audit, "--run-id", "shape-3", "--lake", lake, "--master", "local[3]",
                  "--quiet")
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
    _ok(finish(three))
    ref = run_id_content(spark, lake, "shape-1")  # 1 slice, 8 shuffle partitions
    assert run_id_content(spark, lake, "shape-2") == ref  # 2 slices
    assert run_id_content(spark, lake, "shape-3") == ref  # 3 slices
    assert run_id_content(spark, lake, "shape-p5") == ref  # 2 slices, 5 shuffle partitions
    assert run_id_content(spark, lake, "shape-cl") == tiny["solo"]  # what-if: local[2], 5 partitions vs local[1], 8


def test_two_replays_of_one_cluster_on_a_cold_cache(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    shutil.rmtree(Path(lake) / "_replay_cache", ignore_errors=True)
    first = spawn("replay", "--cluster", "a", *BASE, "--run-id", "cold-1", "--lake", lake, *LOCAL1)
    second = spawn("replay", "--cluster", "a", *BASE, "--run-id", "cold-2", "--lake", lake, *LOCAL1)
    try:
        results = [finish(first), finish(second)]
    finally:  # later tests prepare afresh
        shutil.rmtree(Path(lake) / "_replay_cache", ignore_errors=True)
    assert [r.code for r in results] == [0, 0], [r.last for r in results]
    assert run_id_content(spark, lake, "cold-1") == run_id_content(spark, lake, "cold-2") == tiny["solo"]
