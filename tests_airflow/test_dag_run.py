"""A whole lbreplay_daily run under a real Airflow 3 (``dag.test()``) against local Spark on the sample dumps.

Source: issue 5, item 3 — "a full ``dag.test()`` run against local Spark on the sample data that produces the
report"; done when "the DAG run leaves a report and run rows in the lake". The cluster is the shipped
``airflow/conf/clusters.yaml`` entry (``data/samples/modular-3brokers``: 3 brokers, 3 snapshots on
2023-08-02) with the Spark UI off; the run's logical date 2023-08-03 00:00 UTC makes its data interval the
day 2023-08-02, so every run id ends in ``20230802``.

Slow (five spark-submits, plus one re-run and two ``lbreplay sql`` queries): minutes, Spark start-up bound.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DAGS, PROJECT_VENV, REPO

CLUSTER = "sample-modular"
DAY = "20230802"
BASELINE = f"baseline-{CLUSTER}-{DAY}"
# airflow/conf/candidates.yaml: thresholds [5, 20] x placement [LeastLongTermMessageRate, LeastResourceUsageWithWeight]
SWEEP = [f"sweep-{CLUSTER}-{DAY}-{i:02d}" for i in range(1, 5)]
LOGICAL_DATE = dt.datetime(2023, 8, 3, tzinfo=dt.timezone.utc)


def lbreplay_sql(query: str, lake: Path) -> list[dict[str, Any]]:
    """``lbreplay sql ... --format json`` in the project's environment: one JSON object per line."""
    out = subprocess.run(
        [str(PROJECT_VENV / "bin" / "lbreplay"), "sql", query, "--lake", str(lake), "--format", "json"],
        capture_output=True, text=True, cwd=lake.parent,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip().startswith("{")]


def _run_summary(lake: Path) -> dict[str, dict[str, Any]]:
    rows = lbreplay_sql(
        "SELECT r.run_id, r.cluster, r.status, r.ticks, r.config, "
        "(SELECT count(*) FROM lbreplay.broker_ticks b WHERE b.run_id = r.run_id) AS broker_ticks "
        "FROM lbreplay.runs r",
        lake,
    )
    return {r["run_id"]: r for r in rows}


def _dag_test(dag: Any, lake: Path, reports: Path, **kwargs: Any) -> Any:
    run = dag.test(logical_date=LOGICAL_DATE, run_conf={"lake": str(lake), "reports_dir": str(reports)}, **kwargs)
    return run


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Migrate Airflow's metadata DB, then one full ``dag.test()`` run on a fresh lake."""
    assert (PROJECT_VENV / "bin" / "spark-submit").is_file(), "the project's environment is needed (make warm)"
    work = tmp_path_factory.mktemp("daily")
    lake, reports = work / "lake", work / "reports"
    # the shipped cluster list, plus Spark confs that keep the test light
    doc = yaml.safe_load((REPO / "airflow/conf/clusters.yaml").read_text())
    doc["spark_conf"] = {"spark.ui.enabled": "false", "spark.default.parallelism": "2"}
    clusters = work / "clusters.yaml"
    clusters.write_text(yaml.safe_dump(doc))
    mp = pytest.MonkeyPatch()
    mp.setenv("LBREPLAY_CLUSTERS", str(clusters))
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True,
                   env=os.environ.copy())
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.dags["lbreplay_daily"]
    run = _dag_test(dag, lake, reports)
    yield {"dag": dag, "run": run, "lake": lake, "reports": reports}
    mp.undo()


def test_every_task_succeeds(daily: dict[str, Any]) -> None:
    """The run ends in success with all five tasks successful (ingest, validate, baseline, sweep, report)."""
    run = daily["run"]
    assert run.state == "success"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {f"{CLUSTER}.{s}": "success"
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
    """`lbreplay sql` on the lake: the baseline and the four candidates, succeeded, with per-tick rows; the
    baseline carries the cluster's broker.conf (ThresholdShedder at 10 %), the candidates the grid values."""
    runs = _run_summary(daily["lake"])
    assert sorted(runs) == sorted([BASELINE, *SWEEP])
    for r in runs.values():
        assert r["cluster"] == CLUSTER
        assert r["status"] == "succeeded"
        assert r["ticks"] == 3  # the sample's three snapshots
        assert r["broker_ticks"] == 9  # 3 brokers x 3 ticks
    base = json.loads(runs[BASELINE]["config"])
    assert str(base["loadBalancerBrokerThresholdShedderPercentage"]) == "10"
    assert base["loadBalancerLoadSheddingStrategy"].endswith(".ThresholdShedder")
    thresholds = sorted(str(json.loads(runs[r]["config"])["loadBalancerBrokerThresholdShedderPercentage"]) for r in SWEEP)
    assert thresholds == ["20", "20", "5", "5"]
    daily["summary"] = runs


def test_rerunning_the_day_is_idempotent(daily: dict[str, Any]) -> None:
    """Re-running the same day's baseline (everything else marked success) replaces its rows: same run ids,
    same row counts, no duplicates."""
    before = daily.get("summary") or _run_summary(daily["lake"])
    rerun = _dag_test(daily["dag"], daily["lake"], daily["reports"],
                      mark_success_pattern=rf"{CLUSTER}\.(ingest|validate|sweep_candidates|report)")
    assert rerun.state == "success"
    after = _run_summary(daily["lake"])
    assert sorted(after) == sorted(before)
    assert {k: (v["ticks"], v["broker_ticks"]) for k, v in after.items()} == \
        {k: (v["ticks"], v["broker_ticks"]) for k, v in before.items()}


def test_derby_logs_under_the_lake(daily: dict[str, Any]) -> None:
    """Derby (the embedded lake's catalog) logs under the lake: the driver JVM gets ``-Dderby.system.home``
    from the DAG, since under spark-submit it starts before lbreplay.spark could set it."""
    assert (daily["lake"] / "_catalog" / "derby.log").is_file()
