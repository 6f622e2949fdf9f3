"""lbreplay_daily: every day, per configured Pulsar cluster, ingest -> validate -> replay -> report.

For each cluster listed in ``airflow/conf/clusters.yaml`` (a task group named after the cluster):

1. ``ingest``          ``jobs/ingest.py --source <dump dir> --cluster C --since <start> --until <end>``
                        (loads the interval's snapshots, replacing only the cluster's rows in the interval);
2. ``validate``        ``jobs/validate.py --cluster C`` (fails the run on bad input: exit code 3);
3. ``replay_baseline`` ``jobs/replay.py --cluster C --broker-conf <the cluster's own broker.conf>
                        --run-id baseline-C-<day> --from <start> --to <end>``;
4. ``sweep_candidates`` ``jobs/sweep.py --cluster C --grid <candidates> --run-id-prefix sweep-C-<day>
                        --from <start> --to <end>`` (run ids ``sweep-C-<day>-01`` ... one per grid point);
5. ``report``          ``jobs/report.py --runs <baseline>,<sweep runs> --out <reports>/C/lbreplay-C-<day>.html``.

``<start>`` / ``<end>`` are the run's data interval (``data_interval_start`` / ``data_interval_end``, ISO-8601
UTC); a run without one (a manual run with no logical date) covers the day before its ``run_after``.

Every step is a ``SparkSubmitOperator`` (apache-airflow-providers-apache-spark) running the project's
``jobs/*.py`` with the project's own ``spark-submit`` and Python (pyspark 4.1 lives in the project's
virtual environment, not in Airflow's): the ``spark_default`` connection names the master and
``spark-submit`` as its binary, and each task puts ``<project venv>/bin`` first on ``PATH`` and sets
``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` to the venv's Python. Delta's jars come from the
project's jar cache when it has them (``~/.cache/lbreplay/jars/<artifact>.txt``, written by
``lbreplay.warm``), else from ``--packages`` through the cache's Ivy settings.

Idempotent: run ids derive from the data interval (``<day>`` = ``<start>`` as YYYYMMDD), a run's output rows
are replaced as a whole when it is re-run, ingest replaces only the interval's input rows (so day D's run keeps
day D-1's inputs), the replays read only the interval's ticks, and the report file is overwritten. The data
interval is one UTC day ending at the run's trigger time.

The embedded lake needs no shared catalog: each Spark driver registers the lake's path-based Delta tables in its
own in-memory catalog (``lbreplay.spark``), so ``replay_baseline`` and ``sweep_candidates`` run at the same time
(``max_active_tasks=4``) under any executor that runs tasks in parallel; their writes touch disjoint run ids.

Parsing is cheap and needs neither pyspark nor lbreplay: it reads ``clusters.yaml``, the grid files (to
count the sweep's runs) and the jar-cache manifest.

Environment (all optional): ``LBREPLAY_HOME`` (project root; default two levels above this file),
``LBREPLAY_VENV`` (default ``<root>/.venv``), ``LBREPLAY_CLUSTERS`` (default
``<root>/airflow/conf/clusters.yaml``), ``LBREPLAY_LAKE`` (default lake when ``clusters.yaml`` names none),
``LBREPLAY_CACHE_DIR`` (default ``~/.cache/lbreplay``), ``LBREPLAY_SPARK_CONN_ID`` (default ``spark_default``).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from pathlib import Path
from typing import Any

import yaml
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import CronTriggerTimetable, Param, TaskGroup, dag

PROJECT = Path(os.environ.get("LBREPLAY_HOME", Path(__file__).resolve().parents[2])).resolve()
VENV = Path(os.environ.get("LBREPLAY_VENV", PROJECT / ".venv"))
CLUSTERS_FILE = Path(os.environ.get("LBREPLAY_CLUSTERS", PROJECT / "airflow" / "conf" / "clusters.yaml"))
CACHE_DIR = Path(os.environ.get("LBREPLAY_CACHE_DIR", Path.home() / ".cache" / "lbreplay"))
SPARK_CONN_ID = os.environ.get("LBREPLAY_SPARK_CONN_ID", "spark_default")
# The project's pins (setup.cfg): pyspark 4.1 + delta-spark 4.4 for Scala 2.13.
DELTA_PACKAGE = "io.delta:delta-spark_4.1_2.13:4.4.0"
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

# The data interval [START, END) every task gets as flags; a run without one (a manual run with no logical date:
# the keys are then absent, and the DAG's StrictUndefined rejects a bare `or`) covers the day before run_after.
# START's day is the suffix of the run ids (re-running a day replaces that day's runs).
_START = ("(data_interval_start if data_interval_start is defined and data_interval_start "
          "else dag_run.run_after - macros.timedelta(days=1))")
_END = "(data_interval_end if data_interval_end is defined and data_interval_end else dag_run.run_after)"
START = "{{ %s | ts }}" % _START
END = "{{ %s | ts }}" % _END
DAY = "{{ %s | ds_nodash }}" % _START
LAKE = "{{ params.lake }}"
REPORTS = "{{ params.reports_dir or (params.lake ~ '/reports') }}"


def _path(value: str | os.PathLike[str]) -> str:
    """A path from the config: absolute as given, relative to the project root otherwise (URIs unchanged)."""
    text = str(value)
    if "://" in text:
        return text
    p = Path(text).expanduser()
    return str(p if p.is_absolute() else PROJECT / p)


def load_clusters(path: Path = CLUSTERS_FILE) -> dict[str, Any]:
    """``clusters.yaml``: ``clusters: {name: {source, broker_conf, grid, [config]}}``, optional ``defaults``
    (merged into every cluster), ``lake`` and ``spark_conf`` (extra ``--conf`` for every spark-submit)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    clusters = doc.get("clusters") or {}
    if not isinstance(clusters, dict) or not clusters:
        raise ValueError(f"{path}: expected a non-empty clusters: mapping")
    defaults = doc.get("defaults") or {}
    out: dict[str, dict[str, str]] = {}
    for name, spec in clusters.items():
        if not CLUSTER_NAME.match(str(name)):
            raise ValueError(f"{path}: cluster name {name!r} must match {CLUSTER_NAME.pattern}")
        merged = {**defaults, **(spec or {})}
        missing = [k for k in ("source", "broker_conf", "grid") if not merged.get(k)]
        if missing:
            raise ValueError(f"{path}: cluster {name}: missing {', '.join(missing)}")
        out[str(name)] = {k: _path(v) if k in ("source", "broker_conf", "grid", "config") else v for k, v in merged.items()}
    spark_conf = doc.get("spark_conf") or {}
    if not isinstance(spark_conf, dict):
        raise ValueError(f"{path}: spark_conf: expected a mapping of Spark conf keys to values")
    return {
        "lake": _path(doc["lake"]) if doc.get("lake") else None,
        "spark_conf": {str(k): str(v) for k, v in spark_conf.items()},
        "clusters": out,
    }


def grid_size(grid_file: str) -> int:
    """Runs in a sweep grid: the product of the ``grid:`` list lengths (as ``lbreplay sweep`` expands it)."""
    doc = yaml.safe_load(Path(grid_file).read_text(encoding="utf-8")) or {}
    grid = doc.get("grid") or {}
    if not isinstance(grid, dict) or not grid or not all(isinstance(v, list) and v for v in grid.values()):
        raise ValueError(f"{grid_file}: grid: must map keys to non-empty lists")
    return math.prod(len(v) for v in grid.values())


def delta_jars(cache: Path = CACHE_DIR, package: str = DELTA_PACKAGE) -> list[str]:
    """Delta's resolved jars from the project's cache manifest (empty when not cached or incomplete)."""
    manifest = cache / "jars" / (package.replace(":", "_") + ".txt")
    if not manifest.is_file():
        return []
    jars = [line.strip() for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    if jars and all(Path(j.removeprefix("file://")).is_file() for j in jars):
        return jars
    return []


def spark_submit_kwargs(extra_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """What every task passes to ``SparkSubmitOperator``: Delta on the classpath, the project's Python."""
    python = str(VENV / "bin" / "python")
    conf = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
        # Should a submitter switch the session to a Hive catalog, Derby's files go under the lake's _catalog
        # directory, not the cwd (the driver JVM starts before lbreplay.spark configures the session).
        "spark.driver.extraJavaOptions": (
            "{% if '://' not in params.lake %}-Dderby.system.home={{ params.lake }}/_catalog{% endif %}"
        ),
        **(extra_conf or {}),
    }
    jars = delta_jars()
    packages = None
    if not jars:
        packages = DELTA_PACKAGE
        conf["spark.jars.ivy"] = str(CACHE_DIR / "ivy")
        if (CACHE_DIR / "ivysettings.xml").is_file():
            conf["spark.jars.ivySettings"] = str(CACHE_DIR / "ivysettings.xml")
    env = {
        # The connection's binary is plain ``spark-submit``: resolved on this PATH, i.e. pyspark's in the venv.
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "PYARROW_IGNORE_TIMEZONE": "1",
    }
    return {
        "conn_id": SPARK_CONN_ID,
        "conf": conf,
        "jars": ",".join(jars) or None,
        "packages": packages,
        "env_vars": env,
    }


def submit(task_id: str, job: str, cluster: str, args: list[str]) -> SparkSubmitOperator:
    """One ``spark-submit jobs/<job>.py <args> --lake <lake>`` task."""
    return SparkSubmitOperator(
        task_id=task_id,
        application=str(PROJECT / "jobs" / f"{job}.py"),
        application_args=[*args, "--lake", LAKE],
        name=f"lbreplay-{job}-{cluster}",
        **spark_submit_kwargs(CONFIG["spark_conf"]),
    )


CONFIG = load_clusters()
DEFAULT_LAKE = CONFIG["lake"] or _path(os.environ.get("LBREPLAY_LAKE", "data/lake"))


@dag(
    dag_id="lbreplay_daily",
    description="Per Pulsar cluster: ingest dumps, validate, replay its broker.conf and candidates, report.",
    schedule=CronTriggerTimetable("0 0 * * *", timezone="UTC", interval=dt.timedelta(days=1)),
    # Early, so a manual run can replay any past day (Airflow creates no task for a logical date before the
    # start date); catchup=False keeps the scheduler from back-filling up to today.
    start_date=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    max_active_tasks=4,
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=5), "execution_timeout": dt.timedelta(hours=2)},
    params={
        "lake": Param(DEFAULT_LAKE, type="string", description="Lake path or URI (absolute)."),
        "reports_dir": Param("", type="string", description="Where reports go (default <lake>/reports)."),
    },
    tags=["lbreplay", "pulsar"],
    doc_md=__doc__,
)
def lbreplay_daily() -> None:
    for cluster, spec in CONFIG["clusters"].items():
        with TaskGroup(group_id=cluster):
            baseline_id = f"baseline-{cluster}-{DAY}"
            sweep_prefix = f"sweep-{cluster}-{DAY}"
            sweep_ids = [f"{sweep_prefix}-{i:02d}" for i in range(1, grid_size(spec["grid"]) + 1)]
            window = ["--from", START, "--to", END]
            baseline_args = ["--cluster", cluster, "--broker-conf", spec["broker_conf"], "--run-id", baseline_id]
            if spec.get("config"):
                baseline_args += ["--config", spec["config"]]
            ingest = submit("ingest", "ingest", cluster,
                            ["--source", spec["source"], "--cluster", cluster, "--since", START, "--until", END])
            validate = submit("validate", "validate", cluster, ["--cluster", cluster])
            baseline = submit("replay_baseline", "replay", cluster, [*baseline_args, *window])
            sweep = submit(
                "sweep_candidates", "sweep", cluster,
                ["--cluster", cluster, "--grid", spec["grid"], "--run-id-prefix", sweep_prefix, *window],
            )
            report = submit(
                "report", "report", cluster,
                ["--runs", ",".join([baseline_id, *sweep_ids]),
                 "--out", f"{REPORTS}/{cluster}/lbreplay-{cluster}-{DAY}.html"],
            )
            ingest >> validate >> [baseline, sweep] >> report


lbreplay_daily()
