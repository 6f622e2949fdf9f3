"""A whole lbreplay_daily run under a real Airflow 3 (``dag.test()``) against local Spark on the sample dumps.

Source: issue 5, item 3 — "a full ``dag.test()`` run against local Spark on the sample data that produces the
report"; done when "the DAG run leaves a report and run rows in the lake"; the DAG passes "the data interval as
arguments" and its tasks are idempotent. The cluster is the shipped ``sample-modular`` entry with a test-only
``clusters.yaml``: its dump directory holds the sample (``data/samples/modular-3brokers``: 3 brokers, 3 reports
each on 2023-08-02) plus the same dumps one day later (2023-08-03), and a 2-point candidate grid keeps the sweep small.
The run's logical date 2023-08-03 00:00 UTC makes its data interval the day 2023-08-02: every run id ends in
``20230802``, ingest loads only that day's 9 reports of the 18, and every run records that window.
Spark, Python, conf dir and lake come from Airflow Variables set as ``AIRFLOW_VAR_*`` (issue 31 item 4): the
project's environment and its pyspark, the checkout's ``conf/``, a fresh lake; the runs leave the ``lake`` parameter
empty, so the Variable is the lake they use.

Spark start-ups dominate (five spark-submits, one re-run spark-submit, one ``lbreplay sql``): the lake is
queried once, after the re-run, and every JVM of the test runs with the C1 JIT only (``JAVA_TOOL_OPTIONS``,
inherited by spark-submit through the operator's environment) — short-lived JVMs start 2-3x faster on a
busy machine without C2 compiling in the background; nothing the jobs compute depends on it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DAGS, PROJECT_VENV, REPO

from tests.dump_days import shift_dumps

CLUSTER = "sample-modular"
DAY = "20230802"
BASELINE = f"baseline-{CLUSTER}-{DAY}"
# the test grid: ThresholdShedder at 5 % and 20 % (candidates.yaml's base, placement left at its default)
SWEEP = [f"sweep-{CLUSTER}-{DAY}-{i:02d}" for i in range(1, 3)]
LOGICAL_DATE = dt.datetime(2023, 8, 3, tzinfo=dt.timezone.utc)
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WINDOW = {"from": "2023-08-02T00:00:00Z", "to": "2023-08-03T00:00:00Z"}
SAMPLE = REPO / "data" / "samples" / "modular-3brokers"


def lbreplay_sql(query: str, lake: Path) -> list[dict[str, Any]]:
    """``lbreplay sql ... --format json`` in the project's environment: one JSON object per line."""
    out = subprocess.run(
        [str(PROJECT_VENV / "bin" / "lbreplay"), "sql", query, "--lake", str(lake), "--format", "json"],
        capture_output=True, text=True, cwd=lake.parent,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip().startswith("{")]


def _test_config(work: Path) -> Path:
    """clusters.yaml for the test: the shipped cluster with two days of dumps, a 2-point grid, a light Spark."""
    doc = yaml.safe_load((REPO / "airflow/conf/clusters.yaml").read_text())
    shutil.copytree(SAMPLE, work / "dumps")
    shift_dumps(SAMPLE, work / "dumps", 1)  # the next day's dumps, outside the run's interval
    grid = yaml.safe_load((REPO / "airflow/conf/candidates.yaml").read_text())
    grid["grid"] = {"loadBalancerBrokerThresholdShedderPercentage": [5, 20]}
    (work / "grid.yaml").write_text(yaml.safe_dump(grid))
    doc["clusters"][CLUSTER].update({"source": str(work / "dumps"), "grid": str(work / "grid.yaml")})
    doc["spark_conf"] = {"spark.ui.enabled": "false", "spark.default.parallelism": "2"}
    clusters = work / "clusters.yaml"
    clusters.write_text(yaml.safe_dump(doc))
    return clusters


def _dag_test(dag: Any, reports: Path, **kwargs: Any) -> Any:
    """A run whose lake is the Variable lbreplay_lake's (the run parameter ``lake`` left empty)."""
    return dag.test(logical_date=LOGICAL_DATE, run_conf={"reports_dir": str(reports)}, **kwargs)


def _variables(lake: Path) -> dict[str, str]:
    """The Airflow Variables of a one-machine setup (issue 31 item 4): the project's environment as the driver's
    and executors' Python (local[2]: no packed environment), its pyspark as the Spark distribution, its conf/."""
    (spark_home,) = PROJECT_VENV.glob("lib/python3.*/site-packages/pyspark")
    return {"lbreplay_python": str(PROJECT_VENV / "bin" / "python"), "lbreplay_spark_home": str(spark_home),
            "lbreplay_conf_dir": str(REPO / "conf"), "lbreplay_lake": str(lake)}


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Migrate Airflow's metadata DB; one full ``dag.test()`` run on a fresh lake; then a re-run of the same day's
    baseline (everything else marked success); then one query of the lake."""
    assert (PROJECT_VENV / "bin" / "spark-submit").is_file(), "the project's environment is needed (make warm)"
    work = tmp_path_factory.mktemp("daily")
    lake, reports = work / "lake", work / "reports"
    mp = pytest.MonkeyPatch()
    mp.setenv("LBREPLAY_CLUSTERS", str(_test_config(work)))
    mp.setenv("JAVA_TOOL_OPTIONS", FAST_JVM)
    for name, value in _variables(lake).items():  # Airflow reads AIRFLOW_VAR_<NAME> as the Variable <name>
        mp.setenv(f"AIRFLOW_VAR_{name.upper()}", value)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True,
                   env=os.environ.copy())
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.dags["lbreplay_daily"]
    run = _dag_test(dag, reports)
    # dag.test() replaces a run of the same logical date: keep the first run's task states before re-running
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    rerun_at = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    rerun = _dag_test(dag, reports, mark_success_pattern=rf"{CLUSTER}\.(ingest|validate|sweep_candidates|report)")
    rows = lbreplay_sql(
        "SELECT r.run_id, r.cluster, r.status, r.ticks, r.config, r.replay_options, "
        f"r.started_at > TIMESTAMP '{rerun_at}' AS rewritten, "
        "(SELECT count(*) FROM lbreplay.runs x WHERE x.run_id = r.run_id) AS copies, "
        "(SELECT count(*) FROM lbreplay.broker_ticks b WHERE b.run_id = r.run_id) AS broker_ticks, "
        f"(SELECT count(*) FROM lbreplay.broker_load WHERE cluster = '{CLUSTER}') AS input_rows, "
        f"(SELECT concat_ws(',', sort_array(collect_set(string(date)))) FROM lbreplay.broker_load "
        f"WHERE cluster = '{CLUSTER}') AS input_days "
        "FROM lbreplay.runs r",
        lake,
    )
    yield {"dag": dag, "run": run, "states": states, "rerun": rerun, "lake": lake, "reports": reports,
           "runs": {r["run_id"]: r for r in rows}}
    mp.undo()


def test_every_task_succeeds(daily: dict[str, Any]) -> None:
    """The run ends in success with all five tasks successful (ingest, validate, baseline, sweep, report)."""
    assert daily["run"].state == "success"
    assert daily["states"] == {f"{CLUSTER}.{s}": "success"
                               for s in ("ingest", "validate", "replay_baseline", "sweep_candidates", "report")}


def test_report_is_written(daily: dict[str, Any]) -> None:
    """The report lands at <reports_dir>/<cluster>/lbreplay-<cluster>-<day>.html and names the runs compared."""
    report = daily["reports"] / CLUSTER / f"lbreplay-{CLUSTER}-{DAY}.html"
    assert report.is_file()
    html = report.read_text(encoding="utf-8")
    assert "<html" in html.lower()
    assert BASELINE in html
    assert all(rid in html for rid in SWEEP)


def test_lake_has_the_run_rows(daily: dict[str, Any]) -> None:
    """`lbreplay sql` on the lake: the baseline and the two candidates, succeeded, with per-tick rows; the
    baseline carries the cluster's broker.conf (ThresholdShedder at 10 %), the candidates the grid values."""
    runs = daily["runs"]
    assert sorted(runs) == sorted([BASELINE, *SWEEP])
    for r in runs.values():
        assert r["cluster"] == CLUSTER
        assert r["status"] == "succeeded"
        assert r["ticks"] == 9  # the sample's 9 report versions (3 brokers x 3 minutes, each at its own second)
        assert r["broker_ticks"] == 24  # brokers held after each write: 1, 2, then 3 x 7
    base = json.loads(runs[BASELINE]["config"])
    assert str(base["loadBalancerBrokerThresholdShedderPercentage"]) == "10"
    assert base["loadBalancerLoadSheddingStrategy"].endswith(".ThresholdShedder")
    thresholds = sorted(str(json.loads(runs[r]["config"])["loadBalancerBrokerThresholdShedderPercentage"]) for r in SWEEP)
    assert thresholds == ["20", "5"]


def test_data_interval_reaches_every_job(daily: dict[str, Any]) -> None:
    """ingest --since/--until: of the 18 reports in the dump directory (2023-08-02 and 2023-08-03) only the
    interval's 9 were loaded; replay and sweep --from/--to: every run records the window [2023-08-02, 2023-08-03)."""
    for r in daily["runs"].values():
        assert (r["input_rows"], r["input_days"]) == (9, "2023-08-02")
        assert json.loads(r["replay_options"])["window"] == WINDOW


def test_rerunning_the_day_is_idempotent(daily: dict[str, Any]) -> None:
    """Re-running the same day's baseline (everything else marked success) replaces exactly its rows: one runs row
    per run id, the baseline's rewritten by the re-run with the same tick counts, the sweep's left as they were."""
    assert daily["rerun"].state == "success"
    runs = daily["runs"]
    assert {k: (v["copies"], v["rewritten"]) for k, v in runs.items()} == {
        BASELINE: (1, True), **{rid: (1, False) for rid in SWEEP}}
    assert (runs[BASELINE]["ticks"], runs[BASELINE]["broker_ticks"]) == (9, 24)


def test_no_single_process_metastore_in_the_lake(daily: dict[str, Any]) -> None:
    """The tasks' sessions keep their catalogs in memory (lbreplay.spark): no Derby metastore that would admit one
    driver at a time, so the DAG's parallel branches cannot collide on it."""
    assert not (daily["lake"] / "_catalog" / "metastore_db").exists()
