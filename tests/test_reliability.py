"""Crash safety, concurrency and execution-shape determinism on one small lake (issue: reliability).

The lake holds the ``tiny`` scenario (3 brokers, 4 bundles, 12 ticks, a broker leaving at tick 6), generated,
validated and replayed in-process on the test session (``local[2]``, 2 shuffle partitions): the references are a
sweep of the grid (``ref-01`` threshold 5, ``ref-02`` threshold 10, what-if), an audit (``audit-2``: observed
mode, seed 7, 2 tick slices) and a sample dump ingested as cluster ``ing-ref``. The killed commands and the
audit's re-run run as their own ``lbreplay`` processes (``local[1]``), as a user or the Airflow DAG starts them;
outcomes are compared by content hash (``harness.run_ids_content``: every output table's rows of the run, sorted,
without ``run_id``):

* Crash: an ``ingest`` of another cluster, an audit ``replay`` and a ``sweep`` start together and each is killed
  (``kill -9`` of its process group: Python and its JVM) at a point of a seeded schedule: after its k-th progress
  line (k = 0 is its start) plus a seeded delay, so the kills fall in every phase (Spark start, tick-stream
  preparation, replay, table commits) whatever the machine's speed. ``LBREPLAY_CRASH_POINTS`` points per command:
  1 in ``make test``, 10 in ``make test-crash``. Between the kill and the re-run the views show nothing of a run
  that is not complete, and a run is never ``succeeded`` unless complete.
* Concurrency: the same three commands again, at the same time, on the tick stream the killed ones published or
  left half-written: the audit as its own process; once it holds its run id, a second writer of that run id (it
  fails at once with one line); then, in the test's own process, the sweep through the same entry point and,
  alongside it, the ingest of the other cluster through its driver function: two replays of one cluster and an
  ingest writing one lake from two processes (the DAG's parallel ``replay_baseline`` and ``sweep_candidates`` as a
  parallel executor would run them), without a cold JVM start per command. All finish, the lake equals the
  undisturbed references, one ``succeeded`` runs row per run id. (Two cold preparations of one stream at once,
  each into its own directory, the first manifest published standing: ``tests/replay/test_spark_replay.py``.)
* Determinism: the audit is the same as 1 tick slice (``local[1]``, 8 shuffle partitions: the process above) and
  as 2 slices (``local[2]``, 2 shuffle partitions); the sweep's what-if runs (one task each, whatever the master)
  are the same with the CLI's 8 shuffle partitions and the test session's 2; and in-process, with 5 shuffle
  partitions, the audit and a what-if run are unchanged.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lbreplay.lake.views import VIEW_NAMES
from tests.hostile.harness import REPO, Outcome, cli, finish, on_lake, rows_by, run_ids_content, runs_rows, spawn

SCENARIO = "brokers: 3\nnamespaces: 1\nbundles_per_namespace: 4\ntopics: 40\nticks: 12\nevents:\n  - {at_tick: 6, leave: 1}\n"
GRID = ("pulsar:\n  loadBalancerLoadSheddingStrategy: org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\n"
        "grid:\n  loadBalancerBrokerThresholdShedderPercentage: [5, 10]\n")
BASE = ["--set", "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        "--set", "loadBalancerBrokerThresholdShedderPercentage=5"]
AUDIT = [*BASE, "--mode", "observed", "--seed", "7"]
SAMPLES = REPO / "data" / "samples" / "modular-3brokers"
CRASH_POINTS = int(os.environ.get("LBREPLAY_CRASH_POINTS", "1"))
LOCAL1 = ["--master", "local[1]"]
# Each command's progress lines on stderr (replay / sweep: spark_replay.execute; ingest: ingest.ingest): a kill
# point is "after the k-th of them", k = 0 meaning from the start.
PHASES = {
    "ingest": [r"^ingest: read ", r"^ingest: \w+: ", r"^ingest: \w+: ", r"^ingest: \w+: "],
    "audit": [r"^preparing tick stream", r"^tick stream ready", r"^replayed .* writing tables"],
    "sweep": [r"^preparing tick stream", r"^tick stream ready", r"^replayed .* writing tables"],
}


def _ok(outcome: Any) -> None:
    assert outcome.code == 0, outcome.err[-3000:]


def _commands(lake: str, grid: str, i: int) -> dict[str, list[str]]:
    return {"ingest": ["ingest", "--source", str(SAMPLES), "--cluster", f"ing-crash-{i}", "--lake", lake, *LOCAL1],
            "audit": ["replay", "--cluster", "a", *AUDIT, "--run-id", f"crash-audit-{i}", "--lake", lake, *LOCAL1],
            "sweep": ["sweep", "--cluster", "a", "--grid", grid, "--run-id-prefix", f"crash-sweep-{i}", "--lake", lake,
                      *LOCAL1]}


@pytest.fixture(scope="module")
def tiny(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lake (path with a space), the grid file, and the references' content (the sweep and the audit replayed
    by the driver function the commands call, in one job)."""
    from lbreplay.replay.run_config import expand_grid, resolve_run_config
    from lbreplay.replay.spark_replay import execute

    work = tmp_path_factory.mktemp("reliability")
    lake = str(work / "tiny lake")
    (work / "tiny.yaml").write_text(SCENARIO, encoding="utf-8")
    grid = work / "grid.yaml"
    grid.write_text(GRID, encoding="utf-8")
    with on_lake(spark, lake):
        _ok(cli(spark, "generate", "--scenario", str(work / "tiny.yaml"), "--cluster", "a", "--lake", lake, "--quiet"))
        _ok(cli(spark, "validate", "--cluster", "a", "--lake", lake))
        # the sweep's two what-if runs and the audit (--mode observed --seed 7) in one replay job
        audit = resolve_run_config(None, None, [*BASE[1::2], "replay.mode=observed", "replay.seed=7"])
        execute(spark, lake, "a", [*expand_grid(str(grid)), audit], run_ids=["ref-01", "ref-02", "audit-2"],
                quiet=True)
        _ok(cli(spark, "ingest", "--source", str(SAMPLES), "--cluster", "ing-ref", "--lake", lake, "--quiet"))
    return {"lake": lake, "grid": str(grid), **run_ids_content(spark, lake, ["ref-01", "ref-02", "audit-2"])}


def _input_content(spark: Any, lake: str, clusters: list[str]) -> dict[str, dict[str, list[str]]]:
    """Per cluster, every ingest table's rows (sorted JSON, without the cluster), each table read once."""
    from lbreplay.lake.ingest import INGEST_TABLES
    from lbreplay.lake.tables import table_location

    present = [t.name for t in INGEST_TABLES if (Path(table_location(lake, t.name)) / "_delta_log").is_dir()]
    return rows_by(spark, lake, present, "cluster", clusters)


def _kill_at(argv: list[str], markers: list[str], phase: int, delay: float) -> tuple[bool, bool, Outcome]:
    """Start ``lbreplay argv``; after its ``phase``-th progress line (``markers``) and ``delay`` seconds more,
    SIGKILL its process group. (still running then, its phase-th progress line was seen, the outcome)."""
    proc = spawn(*argv)
    reached, on_schedule = threading.Event(), threading.Event()
    err: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        seen = 0
        for line in proc.stderr:
            err.append(line)
            if seen < phase and re.search(markers[seen], line):
                seen += 1
            if seen >= phase:
                on_schedule.set()
                reached.set()
        reached.set()  # end of stderr: the process is ending

    if phase == 0:
        on_schedule.set()
        reached.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reached.wait()
    deadline = time.time() + delay
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    alive = proc.poll() is None
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    out = proc.stdout.read() if proc.stdout is not None else ""
    proc.wait(timeout=120)
    reader.join(timeout=30)
    return alive, on_schedule.is_set(), Outcome(proc.returncode, out, "".join(err))


def _visible(spark: Any, lake: str, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """Per run id, the rows each view shows of it (they show only succeeded runs)."""
    from lbreplay.lake.views import ensure_views

    out = {rid: dict.fromkeys(VIEW_NAMES, 0) for rid in run_ids}
    listed = ", ".join(f"'{rid}'" for rid in run_ids)
    with on_lake(spark, lake):
        ensure_views(spark, lake)
        for v in VIEW_NAMES:
            for r in spark.sql(f"SELECT run_id, count(*) AS n FROM lbreplay.{v} WHERE run_id IN ({listed}) "
                               "GROUP BY run_id").collect():
                out[r["run_id"]][v] = r["n"]
    return out


def _rerun_together(spark: Any, lake: str, argv: dict[str, list[str]], audit_id: str) -> dict[str, Outcome]:
    """The same commands again, at the same time: the audit as its own process; once it holds its run id, a second
    writer of that run id (it must fail at once), then in this process the sweep (the same entry point, the test
    session's master) and, alongside it, the ingest of the other cluster (its driver function, as the command
    calls it): two replays of cluster a and an ingest writing the lake together, from two processes."""
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.locks import _lock_file

    audit = spawn(*argv["audit"])
    lock = _lock_file(lake, audit_id)
    while not (lock.is_file() and lock.read_text().startswith(f"pid {audit.pid}")):
        assert audit.poll() is None, finish(audit).err[-2000:]
        time.sleep(0.2)
    twin = finish(spawn(*argv["audit"]))
    assert twin.code == 1
    assert twin.last.startswith(f"lbreplay: run id '{audit_id}' is being written by another lbreplay process")
    assert twin.err.count("\n") == 1
    flags = dict(zip(argv["ingest"][1::2], argv["ingest"][2::2]))  # ingest --source S --cluster C --lake L …
    with on_lake(spark, lake), ThreadPoolExecutor(1) as here:
        ingested = here.submit(ingest, spark, lake, flags["--source"], flags["--cluster"])
        assert audit.poll() is None  # the audit still replays (it held its lock a moment ago) as the sweep starts
        results = {"sweep": cli(spark, *argv["sweep"][:-2])}  # the test session's own master, not local[1]
        ingested.result()
    results["audit"] = finish(audit)
    return results


def test_kill_9_then_rerun_together_leaves_the_undisturbed_result(spark: Any, tiny: dict[str, Any]) -> None:
    lake = tiny["lake"]
    rng = random.Random(20261126)
    landed: list[tuple[str, int, float]] = []
    for i in range(CRASH_POINTS):
        argv = _commands(lake, tiny["grid"], i)
        audit_id, sweep_ids = f"crash-audit-{i}", [f"crash-sweep-{i}-01", f"crash-sweep-{i}-02"]
        # k-th progress line, then a delay: long from the start (Spark's start-up), short after a phase began
        plan = {}
        for name in argv:
            phase = rng.randrange(len(PHASES[name]) + 1)
            plan[name] = (phase, rng.uniform(0.0, 20.0 if phase == 0 else 2.5))
        if i == 0:  # the killed audit and sweep prepare the tick stream from scratch
            shutil.rmtree(Path(lake) / "_replay_cache", ignore_errors=True)
        with ThreadPoolExecutor(len(argv)) as pool:
            kills = dict(zip(argv, pool.map(_kill_at, argv.values(), [PHASES[n] for n in argv],
                                            *zip(*(plan[n] for n in argv)))))
        # every command printed the progress line its kill point waits for (else the schedule is stale)
        assert all(seen for _, seen, _ in kills.values()), {n: k[2].err[-2000:] for n, k in kills.items() if not k[1]}
        landed += [(name, *plan[name]) for name, (alive, _, _) in kills.items() if alive]
        # between the kill and the re-run: a run is succeeded and complete, or absent from the views
        visible = _visible(spark, lake, [audit_id, *sweep_ids])
        for rid, ref in ((audit_id, "audit-2"), (sweep_ids[0], "ref-01"), (sweep_ids[1], "ref-02")):
            rows = runs_rows(spark, lake, rid)
            if rows:  # killed after the runs row: then the run is complete
                assert [r["status"] for r in rows] == ["succeeded"], (rid, plan)
                assert run_ids_content(spark, lake, [rid])[rid] == tiny[ref], (rid, plan)
            else:
                assert visible[rid] == dict.fromkeys(VIEW_NAMES, 0), f"orphan rows of {rid} @{plan}"
        results = _rerun_together(spark, lake, argv, audit_id)
        for name, res in results.items():
            assert res.code == 0, (name, plan, res.err[-3000:])
        # Spark's start-up chatter is off by default (conf/spark/log4j2.properties): no log4j lines on the stderr
        # of the audit's process
        chatter = [ln for ln in results["audit"].err.splitlines() if " WARN " in ln or "log4j" in ln or " INFO " in ln]
        assert chatter == [], chatter[:5]
        assert results["sweep"].out.split() == sweep_ids
        inputs = _input_content(spark, lake, [f"ing-crash-{i}", "ing-ref"])
        assert inputs[f"ing-crash-{i}"] == inputs["ing-ref"], plan
        # the audit: local[1] (1 tick slice, 8 shuffle partitions) equals local[2] (2 slices, 2 shuffle partitions)
        content = run_ids_content(spark, lake, [audit_id, *sweep_ids])
        assert content[audit_id] == tiny["audit-2"], plan
        assert content[sweep_ids[0]] == tiny["ref-01"], plan
        assert content[sweep_ids[1]] == tiny["ref-02"], plan
        for rid in (audit_id, *sweep_ids):
            assert [r["status"] for r in runs_rows(spark, lake, rid)] == ["succeeded"], (rid, plan)
        visible = _visible(spark, lake, [audit_id, "audit-2"])
        assert visible[audit_id] == visible["audit-2"]
    print(f"kill -9 landed while running: {landed}")
    assert landed  # at least one kill fell while its command ran
    with on_lake(spark, lake):
        query = cli(spark, "sql", "SELECT r.run_id, r.status, "
                    "(SELECT count(*) FROM lbreplay.strategy_comparison c WHERE c.run_id = r.run_id) AS compared, "
                    "(SELECT count(*) > 0 FROM lbreplay.validation_runs v WHERE v.cluster = 'a') AS validated "
                    "FROM lbreplay.runs r WHERE r.run_id = 'crash-sweep-0-02'", "--format", "csv", "--lake", lake)
    assert query.out.splitlines() == ["run_id,status,compared,validated", "crash-sweep-0-02,succeeded,1,true"]


def test_same_decisions_whatever_the_shuffle_partitions(spark: Any, tiny: dict[str, Any]) -> None:
    """The CLI's sessions use 8 shuffle partitions and the test session 2: the driver function itself with 5."""
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.replay.spark_replay import execute

    lake = tiny["lake"]
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    sets = BASE[1::2]
    what_if = resolve_run_config(None, None, sets)
    observed = resolve_run_config(None, None, [*sets, "replay.mode=observed", "replay.seed=7"])
    try:
        with on_lake(spark, lake):
            spark.conf.set("spark.sql.shuffle.partitions", "5")
            execute(spark, lake, "a", [what_if, observed], run_ids=["shape-cl", "shape-p5"], quiet=True)
            assert spark.conf.get("spark.sql.shuffle.partitions") == "5"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    content = run_ids_content(spark, lake, ["shape-p5", "shape-cl"])
    assert content["shape-p5"] == tiny["audit-2"]
    assert content["shape-cl"] == tiny["ref-01"]
