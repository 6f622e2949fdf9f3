"""The lbreplay_daily DAG parses cleanly under a real Airflow 3 and has the shape issue 5 asks for.

Source: issue 5, item 3 ("a DagBag import test with no errors"); the Airflow 3 authoring rules it lists
(``airflow.sdk``, explicit schedule, ``catchup=False``, no pyspark import at module top).
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import DAGS, REPO

DAG_FILE = DAGS / "lbreplay_daily.py"
CLUSTER = "sample-modular"
STEPS = ("ingest", "validate", "replay_baseline", "sweep_candidates", "report")


def _dagbag() -> Any:
    """Parse airflow/dags. Airflow 3.3's DagBag has no ``include_examples``: examples are a separate DAG bundle,
    off here (AIRFLOW__CORE__LOAD_EXAMPLES=False), so the folder alone is parsed."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


@pytest.fixture(scope="module")
def dag() -> Any:
    bag = _dagbag()
    assert bag.import_errors == {}
    return bag.dags["lbreplay_daily"]


def _render(task: Any, dag: Any, field: str, *, day: dt.datetime, params: dict[str, Any],
            interval: bool = True) -> Any:
    """Render one templated operator field with the context a run of the data interval ``day`` would see
    (``interval=False``: a manual run without a logical date, whose context has no data_interval_* keys)."""
    from airflow.sdk.execution_time.context import MacrosAccessor, VariableAccessor

    context = {
        "params": params,
        "macros": MacrosAccessor(),
        "var": {"value": VariableAccessor(deserialize_json=False)},  # Variables: AIRFLOW_VAR_* in the environment
        "dag_run": type("Run", (), {"run_after": day + dt.timedelta(days=1)})(),
    }
    if interval:
        context.update({"data_interval_start": day, "data_interval_end": day + dt.timedelta(days=1)})
    return task.render_template(getattr(task, field), context, jinja_env=dag.get_template_env())


def test_dagbag_has_no_import_errors() -> None:
    """DagBag over airflow/dags (examples off): no import errors, exactly our DAG."""
    bag = _dagbag()
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["lbreplay_daily"]


def test_dag_module_does_not_import_spark_or_lbreplay() -> None:
    """Issue 5: no pyspark import at module top (Airflow's environment has neither pyspark 4.1 nor lbreplay)."""
    tree = ast.parse(DAG_FILE.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"pyspark", "lbreplay", "delta"}
    # and parsing it in a fresh interpreter loads no pyspark module either
    code = textwrap.dedent(
        f"""
        import sys
        from airflow.dag_processing.dagbag import DagBag
        bag = DagBag(dag_folder={str(DAGS)!r})
        assert bag.import_errors == {{}}, bag.import_errors
        print(sorted(m for m in sys.modules if m == "pyspark" or m.startswith(("pyspark.", "lbreplay"))))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_airflow3_schedule_and_run_policy(dag: Any) -> None:
    """Explicit daily UTC schedule whose data interval is the previous day; no catch-up; one run at a time."""
    from airflow.sdk import CronTriggerTimetable
    from airflow.serialization.encoders import coerce_to_core_timetable

    assert isinstance(dag.timetable, CronTriggerTimetable)
    assert dag.timetable.expression == "0 0 * * *"
    assert str(dag.timetable.timezone) == "UTC"
    # a run at 2023-08-03 00:00 covers the day 2023-08-02 (what the scheduler hands the tasks as the interval)
    interval = coerce_to_core_timetable(dag.timetable).infer_manual_data_interval(
        run_after=dt.datetime(2023, 8, 3, tzinfo=dt.timezone.utc))
    assert (interval.start, interval.end) == (dt.datetime(2023, 8, 2, tzinfo=dt.timezone.utc),
                                              dt.datetime(2023, 8, 3, tzinfo=dt.timezone.utc))
    assert dag.catchup is False
    # a manual run for the samples' day (2023-08-02) gets tasks: none exist before the start date
    assert dag.start_date <= dt.datetime(2023, 8, 2, tzinfo=dt.timezone.utc)
    assert dag.max_active_runs == 1
    # the replay_baseline and sweep_candidates branches run at the same time (per-session in-memory catalogs)
    assert dag.max_active_tasks >= 2


def test_task_ids_and_dependencies(dag: Any) -> None:
    """Per cluster: ingest -> validate -> {replay_baseline, sweep_candidates} -> report."""
    ids = {f"{CLUSTER}.{s}" for s in STEPS}
    assert set(dag.task_ids) == ids
    t = {s: dag.get_task(f"{CLUSTER}.{s}") for s in STEPS}
    assert t["ingest"].upstream_task_ids == set()
    assert t["ingest"].downstream_task_ids == {f"{CLUSTER}.validate"}
    assert t["validate"].downstream_task_ids == {f"{CLUSTER}.replay_baseline", f"{CLUSTER}.sweep_candidates"}
    assert t["replay_baseline"].downstream_task_ids == {f"{CLUSTER}.report"}
    assert t["sweep_candidates"].downstream_task_ids == {f"{CLUSTER}.report"}
    assert t["report"].upstream_task_ids == {f"{CLUSTER}.replay_baseline", f"{CLUSTER}.sweep_candidates"}
    assert t["report"].downstream_task_ids == set()


VARIABLES = {
    "lbreplay_python": "/opt/lbreplay/bin/python",
    "lbreplay_env_archive": "hdfs:///apps/lbreplay/lbreplay-env.tar.gz",
    "lbreplay_spark_home": "/opt/spark-4.1.4",
    "lbreplay_conf_dir": "/opt/lbreplay/conf",
    "lbreplay_lake": "s3a://bucket/lake",
    "lbreplay_jobs_dir": "/opt/lbreplay/jobs",
}
DAY = dt.datetime(2023, 8, 2, tzinfo=dt.timezone.utc)


def _rendered(task: Any, dag: Any, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields the Variables drive, rendered for DAY, then settled as the operator does before spark-submit."""
    settle = sys.modules[type(task).__module__].settle  # the DAG module as the DagBag loaded it
    r = {f: _render(task, dag, f, day=DAY, params=params or {"lake": "", "reports_dir": ""})
         for f in ("application", "conf", "env_vars", "application_args")}
    r["conf"], r["env_vars"] = settle(r["conf"], r["env_vars"])
    return r


def test_tasks_are_spark_submits_of_the_project_jobs(dag: Any) -> None:
    """Every task is a SparkSubmitOperator running jobs/<cmd>.py with Delta; with no Variable set: the jobs beside
    the DAG folder, python3 as driver and executor Python, no archive, spark-submit from PATH, the default lake."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    jobs = {"ingest": "ingest", "validate": "validate", "replay_baseline": "replay",
            "sweep_candidates": "sweep", "report": "report"}
    for step, job in jobs.items():
        task = dag.get_task(f"{CLUSTER}.{step}")
        assert isinstance(task, SparkSubmitOperator)
        r = _rendered(task, dag)
        assert Path(r["application"]) == REPO / "jobs" / f"{job}.py"
        assert Path(r["application"]).is_file()
        assert r["conf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
        assert r["conf"]["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        assert (r["conf"]["spark.pyspark.python"], r["conf"]["spark.pyspark.driver.python"]) == ("python3", "python3")
        assert not {"spark.archives", "spark.executorEnv.LBREPLAY_CONF_DIR"} & set(r["conf"])
        assert r["env_vars"]["PYSPARK_DRIVER_PYTHON"] == "python3"
        assert not {"SPARK_HOME", "PATH", "LBREPLAY_CONF_DIR", "PYSPARK_PYTHON"} & set(r["env_vars"])
        assert task.jars or task.packages == "io.delta:delta-spark_4.1_2.13:4.4.0"
        assert r["application_args"][-2:] == ["--lake", str(REPO / "data" / "lake")]


def test_variables_set_python_archive_spark_and_lake(dag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 4 of issue 31: the driver Python, the executors' packed environment, the Spark distribution, lbreplay's
    conf dir, the lake and the jobs come from Airflow Variables; the run parameter lake still wins."""
    for name, value in VARIABLES.items():
        monkeypatch.setenv(f"AIRFLOW_VAR_{name.upper()}", value)
    r = _rendered(dag.get_task(f"{CLUSTER}.replay_baseline"), dag)
    assert r["application"] == "/opt/lbreplay/jobs/replay.py"
    conf = r["conf"]
    assert conf["spark.archives"] == "hdfs:///apps/lbreplay/lbreplay-env.tar.gz#environment"
    assert conf["spark.pyspark.python"] == "./environment/bin/python"
    assert conf["spark.executorEnv.LBREPLAY_CONF_DIR"] == "./environment/conf"
    assert conf["spark.pyspark.driver.python"] == "/opt/lbreplay/bin/python"
    assert "spark.driver.extraJavaOptions" not in conf  # a URI lake: no Derby home
    env = r["env_vars"]
    assert (env["SPARK_HOME"], env["LBREPLAY_CONF_DIR"], env["PYSPARK_DRIVER_PYTHON"]) == (
        "/opt/spark-4.1.4", "/opt/lbreplay/conf", "/opt/lbreplay/bin/python")
    assert env["PATH"].split(":")[0] == "/opt/spark-4.1.4/bin"
    assert r["application_args"][-2:] == ["--lake", "s3a://bucket/lake"]
    report = _rendered(dag.get_task(f"{CLUSTER}.report"), dag)["application_args"]
    assert report[3] == "s3a://bucket/lake/reports/sample-modular/lbreplay-sample-modular-20230802.html"
    local = _rendered(dag.get_task(f"{CLUSTER}.validate"), dag, {"lake": "/data/lake", "reports_dir": ""})
    assert local["application_args"][-2:] == ["--lake", "/data/lake"]
    assert local["conf"]["spark.driver.extraJavaOptions"] == "-Dderby.system.home=/data/lake/_catalog"


def test_dag_names_no_path_of_a_machine() -> None:
    """The DAG file hard-codes no environment or lake: no .venv, no absolute path (paths come from the Variables,
    clusters.yaml and the DAG file's own location)."""
    text = DAG_FILE.read_text(encoding="utf-8")
    assert ".venv" not in text
    assert not re.search(r"""["'](/(home|opt|usr|tmp|work|root|data)\b)""", text)


def test_arguments_carry_the_data_interval_in_run_ids(dag: Any) -> None:
    """Issue 5 item 3: every data task gets the data interval as flags (ingest --since/--until, replay and sweep
    --from/--to, ISO-8601 UTC); run ids and the report path are keyed by the interval's day, so re-running a day
    replaces it."""
    day = dt.datetime(2023, 8, 2, tzinfo=dt.timezone.utc)
    params = {"lake": "/lake", "reports_dir": ""}
    args = {s: _render(dag.get_task(f"{CLUSTER}.{s}"), dag, "application_args", day=day, params=params)
            for s in STEPS}
    start, end = "2023-08-02T00:00:00+00:00", "2023-08-03T00:00:00+00:00"
    assert args["ingest"] == ["--source", str(REPO / "data/samples/modular-3brokers"), "--cluster", CLUSTER,
                              "--since", start, "--until", end, "--lake", "/lake"]
    assert args["validate"] == ["--cluster", CLUSTER, "--lake", "/lake"]
    assert args["replay_baseline"] == [
        "--cluster", CLUSTER, "--broker-conf", str(REPO / "airflow/conf/sample-modular-broker.conf"),
        "--run-id", "baseline-sample-modular-20230802", "--from", start, "--to", end, "--lake", "/lake"]
    assert args["sweep_candidates"] == [
        "--cluster", CLUSTER, "--grid", str(REPO / "airflow/conf/candidates.yaml"),
        "--broker-conf", str(REPO / "airflow/conf/sample-modular-broker.conf"), "--run-id-prefix", "sweep-sample-modular-20230802", "--from", start, "--to", end, "--lake", "/lake"]
    # candidates.yaml: 2 thresholds x 2 placement strategies = 4 sweep runs, numbered from 01
    assert args["report"] == [
        "--runs", "baseline-sample-modular-20230802," + ",".join(f"sweep-sample-modular-20230802-0{i}" for i in range(1, 5)),
        "--out", "/lake/reports/sample-modular/lbreplay-sample-modular-20230802.html", "--lake", "/lake"]
    other = _render(dag.get_task(f"{CLUSTER}.report"), dag, "application_args",
                    day=dt.datetime(2023, 8, 3, tzinfo=dt.timezone.utc),
                    params={"lake": "/lake", "reports_dir": "/reports"})
    assert other[3] == "/reports/sample-modular/lbreplay-sample-modular-20230803.html"


def test_run_without_data_interval_covers_the_day_before_run_after(dag: Any) -> None:
    """A manual run with no logical date has no data_interval_* in its context (the DAG's StrictUndefined would
    reject a bare reference): its tasks cover [run_after - 1 day, run_after), and its run ids name that day."""
    day = dt.datetime(2023, 8, 2, tzinfo=dt.timezone.utc)
    args = _render(dag.get_task(f"{CLUSTER}.sweep_candidates"), dag, "application_args", day=day,
                   params={"lake": "/lake", "reports_dir": ""}, interval=False)
    assert args[-7:] == ["sweep-sample-modular-20230802", "--from", "2023-08-02T00:00:00+00:00",
                         "--to", "2023-08-03T00:00:00+00:00", "--lake", "/lake"]


@pytest.mark.parametrize("archive", [False, True])
def test_spark_connection_builds_the_submit_command(dag: Any, monkeypatch: pytest.MonkeyPatch, archive: bool) -> None:
    """The spark_default connection (AIRFLOW_CONN_SPARK_DEFAULT) yields `spark-submit --master local[2]` with Delta,
    the rendered settings and job arguments (SparkSubmitHook._build_spark_submit_command); the packed environment
    only when lbreplay_env_archive is set."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    if archive:
        monkeypatch.setenv("AIRFLOW_VAR_LBREPLAY_ENV_ARCHIVE", "/shared/lbreplay-env.tar.gz")
    task = dag.get_task(f"{CLUSTER}.validate")
    r = _rendered(task, dag, {"lake": "/lake", "reports_dir": ""})
    hook = SparkSubmitHook(conn_id=task._conn_id, conf=r["conf"], jars=task.jars, packages=task.packages,
                           env_vars=r["env_vars"], name=task.name, application_args=r["application_args"])
    cmd = hook._build_spark_submit_command(r["application"])
    assert cmd[:3] == ["spark-submit", "--master", "local[2]"]
    assert cmd[-5:] == [str(REPO / "jobs/validate.py"), "--cluster", CLUSTER, "--lake", "/lake"]
    assert "--jars" in cmd or "--packages" in cmd
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in cmd
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    if archive:
        assert "spark.archives=/shared/lbreplay-env.tar.gz#environment" in confs
        assert "spark.pyspark.python=./environment/bin/python" in confs
    else:
        assert not any(c.startswith(("spark.archives=", "spark.executorEnv.")) for c in confs)
        assert "spark.pyspark.python=python3" in confs


def test_clusters_file_drives_the_task_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clusters in clusters.yaml -> two task groups; the grid size sets the report's run list;
    relative paths resolve against the project root; spark_conf reaches every task."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("grid:\n  loadBalancerBrokerThresholdShedderPercentage: [5, 10, 20]\n")
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(
        "spark_conf:\n  spark.driver.memory: 1g\n"
        "defaults:\n  broker_conf: airflow/conf/sample-modular-broker.conf\n"
        f"  grid: {grid}\n"
        "clusters:\n  east:\n    source: data/samples/modular-3brokers\n"
        "  west:\n    source: data/samples/extensible-3brokers\n"
    )
    monkeypatch.setenv("LBREPLAY_CLUSTERS", str(clusters))
    bag = _dagbag()
    assert bag.import_errors == {}
    dag = bag.dags["lbreplay_daily"]
    assert set(dag.task_ids) == {f"{c}.{s}" for c in ("east", "west") for s in STEPS}
    assert dag.get_task("west.ingest").application_args[1] == str(REPO / "data/samples/extensible-3brokers")
    assert dag.get_task("east.replay_baseline").application_args[3] == str(REPO / "airflow/conf/sample-modular-broker.conf")
    runs = _render(dag.get_task("east.report"), dag, "application_args",
                   day=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), params={"lake": "/l", "reports_dir": ""})[1]
    assert runs.split(",") == ["baseline-east-20240101"] + [f"sweep-east-20240101-0{i}" for i in (1, 2, 3)]
    assert all(dag.get_task(f"{c}.{s}").conf["spark.driver.memory"] == "1g" for c in ("east", "west") for s in STEPS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: {}\n", "non-empty clusters"),
        ("clusters:\n  bad name:\n    source: x\n    broker_conf: y\n    grid: z\n", "must match"),
        ("clusters:\n  c1:\n    source: x\n", "missing broker_conf, grid"),
    ],
)
def test_bad_clusters_file_is_an_import_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              text: str, message: str) -> None:
    """A broken clusters.yaml surfaces as a DagBag import error naming the problem."""
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(text)
    monkeypatch.setenv("LBREPLAY_CLUSTERS", str(clusters))
    errors = _dagbag().import_errors
    assert len(errors) == 1
    assert message in next(iter(errors.values()))


def test_delta_jars_come_from_the_cache_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached jars (lbreplay.spark's manifest format: one file:// URI per line) become --jars; a missing jar
    or manifest falls back to --packages with the cache's Ivy settings (as lbreplay.spark.delta_jar_conf)."""
    jar = tmp_path / "ivy" / "jars" / "io.delta_delta-spark_4.1_2.13-4.4.0.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    manifest = tmp_path / "jars" / "io.delta_delta-spark_4.1_2.13_4.4.0.txt"
    manifest.parent.mkdir()
    manifest.write_text(f"file://{jar}\n\n")
    (tmp_path / "ivysettings.xml").write_text("<ivysettings/>")
    monkeypatch.setenv("LBREPLAY_CACHE_DIR", str(tmp_path))
    bag = _dagbag()
    task = bag.dags["lbreplay_daily"].get_task(f"{CLUSTER}.ingest")
    assert task.jars == f"file://{jar}"
    assert task.packages is None

    jar.unlink()
    task = _dagbag().dags["lbreplay_daily"].get_task(f"{CLUSTER}.ingest")
    assert task.jars is None
    assert task.packages == "io.delta:delta-spark_4.1_2.13:4.4.0"
    assert task.conf["spark.jars.ivySettings"] == str(tmp_path / "ivysettings.xml")
    assert task.conf["spark.jars.ivy"] == str(tmp_path / "ivy")


def test_requirements_are_exact_pins() -> None:
    """airflow/requirements-airflow.txt pins every package exactly and keeps pyspark 4.1 out."""
    lines = [ln.strip() for ln in (REPO / "airflow/requirements-airflow.txt").read_text().splitlines()]
    reqs = [ln for ln in lines if ln and not ln.startswith("#")]
    assert reqs and all("==" in r and not any(op in r for op in (">", "<", "~", "!")) for r in reqs)
    names = {r.split("==")[0].lower(): r.split("==")[1] for r in reqs}
    assert names["apache-airflow"].startswith("3.")
    assert "apache-airflow-providers-apache-spark" in names
    assert "pyspark" not in names
