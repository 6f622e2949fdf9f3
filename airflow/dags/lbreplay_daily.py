"""lbreplay_daily: every day, per configured Pulsar cluster, ingest -> validate -> replay -> report.

For each cluster listed in ``airflow/conf/clusters.yaml`` (a task group named after the cluster):

1. ``ingest``          ``jobs/ingest.py --source <dump dir> --cluster C --since <start> --until <end>``
                        (loads the interval's snapshots, replacing only the cluster's rows in the interval);
2. ``validate``        ``jobs/validate.py --cluster C`` (fails the run on bad input: exit code 3);
3. ``replay_baseline`` ``jobs/replay.py --cluster C --broker-conf <the cluster's own broker.conf>
                        --run-id baseline-C-<day> --from <start> --to <end>``;
4. ``sweep_candidates`` ``jobs/sweep.py --cluster C --grid <candidates> --broker-conf <the same broker.conf>
                        --run-id-prefix sweep-C-<day> --from <start> --to <end>`` (run ids ``sweep-C-<day>-01`` ...
                        one per grid point): each candidate is the cluster's broker.conf with only the grid's
                        keys changed;
5. ``report``          ``jobs/report.py --runs <baseline>,<sweep runs> --out <reports>/C/lbreplay-C-<day>.html``.

``<start>`` / ``<end>`` are the run's data interval (``data_interval_start`` / ``data_interval_end``, ISO-8601
UTC); a run without one (a manual run with no logical date) covers the day before its ``run_after``.

Every step is a ``SparkSubmitOperator`` running ``jobs/*.py`` with the Spark, Python and lake named by Airflow
Variables (read when a task runs, templated; none is needed to parse the DAG) and the master of the connection:

==========================  ================================================================================
``spark_default``           Connection: the master (``host``: ``spark://h:7077``, ``yarn``, ``local[4]``) and
                            ``spark-binary`` (``spark-submit``); ``LBREPLAY_SPARK_CONN_ID`` names another one.
``lbreplay_spark_home``     the Spark distribution (the cluster's Spark 4.1) whose ``bin/spark-submit`` runs;
                            default: ``spark-submit`` on the worker's ``PATH``.
``lbreplay_python``         the driver's Python (client mode), one with lbreplay installed
                            (``pip install lbreplay-*.whl``); default ``python3``.
``lbreplay_env_archive``    ``make dist``'s ``lbreplay-env.tar.gz`` at a URI every executor can read (``hdfs://``,
                            ``s3a://``, ``https://``, or a path present on every node): shipped with
                            ``spark.archives=<uri>#environment``, executors run ``./environment/bin/python`` with
                            ``LBREPLAY_CONF_DIR=./environment/conf``; default: none, executors run
                            ``lbreplay_python`` (a local master, or nodes that all have it).
``lbreplay_conf_dir``       lbreplay's ``conf/`` (Pulsar defaults, strategies) for the driver
                            (``LBREPLAY_CONF_DIR``); default: the one lbreplay finds itself.
``lbreplay_lake``           the lake path or URI; the run parameter ``lake`` overrides it; default: ``lake:`` of
                            ``clusters.yaml``, else ``$LBREPLAY_LAKE``, else ``<root>/data/lake``.
``lbreplay_jobs_dir``       the directory of ``jobs/*.py`` as the driver sees it; default ``<root>/jobs``.
==========================  ================================================================================

Delta's jars come from the jar cache when it has them (``~/.cache/lbreplay/jars/<artifact>.txt``, written by
``lbreplay.warm``), else from ``--packages`` through the cache's Ivy settings. Each job checks, before its session
starts, that the cluster's Spark is lbreplay's major.minor (exit 2 otherwise: ``cluster runs Spark X, lbreplay
needs Y``).

Idempotent: run ids derive from the data interval (``<day>`` = ``<start>`` as YYYYMMDD), a run's output rows
are replaced as a whole when it is re-run, ingest replaces only the interval's input rows (so day D's run keeps
day D-1's inputs), the replays read only the interval's ticks, and the report file is overwritten. The data
interval is one UTC day ending at the run's trigger time.

The embedded lake needs no shared catalog: each Spark driver registers the lake's path-based Delta tables in its
own in-memory catalog (``lbreplay.spark``), so ``replay_baseline`` and ``sweep_candidates`` run at the same time
(``max_active_tasks=4``) under any executor that runs tasks in parallel; their writes touch disjoint run ids.

Parsing is cheap and needs neither pyspark nor lbreplay: it reads ``clusters.yaml``, the grid files (to
count the sweep's runs) and the jar-cache manifest.

Environment (all optional, read when the DAG is parsed): ``LBREPLAY_HOME`` (``<root>``, against which relative
paths of ``clusters.yaml`` resolve; default: two levels above this file), ``LBREPLAY_CLUSTERS`` (default
``<root>/airflow/conf/clusters.yaml``), ``LBREPLAY_LAKE``, ``LBREPLAY_CACHE_DIR`` (default ``~/.cache/lbreplay``),
``LBREPLAY_SPARK_CONN_ID`` (default ``spark_default``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import yaml
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import CronTriggerTimetable, Param, TaskGroup, dag

PROJECT = Path(os.environ.get("LBREPLAY_HOME", Path(__file__).resolve().parents[2])).resolve()
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

def var(name: str, default: str = "") -> str:
    """A Jinja expression for the Airflow Variable ``name`` (``default`` when it is not set)."""
    return f"var.value.get({json.dumps(name)}, {json.dumps(default)})"


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


CONFIG = load_clusters()
DEFAULT_LAKE = CONFIG["lake"] or _path(os.environ.get("LBREPLAY_LAKE", "data/lake"))
# The run parameter ``lake`` if given, else the Variable, else the default.
_LAKE = f"(params.lake or {var('lbreplay_lake', DEFAULT_LAKE)})"
LAKE = "{{ %s }}" % _LAKE
REPORTS = "{{ params.reports_dir or (%s ~ '/reports') }}" % _LAKE


class LbreplaySubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` whose Variable-driven settings may be unset: a conf key or environment variable that
    renders empty is left out (an unset ``lbreplay_env_archive`` adds no ``spark.archives``); ``SPARK_HOME``, when
    set, puts its ``bin/spark-submit`` first on the worker's ``PATH``."""

    def execute(self, context: Any) -> None:
        self.conf, self.env_vars = settle(self.conf or {}, self.env_vars or {})
        return super().execute(context)


def settle(conf: dict[str, Any], env: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rendered conf and environment without their empty (unset) entries; ``SPARK_HOME``'s ``bin`` first on
    ``PATH`` when it is set (the connection's ``spark-submit`` resolves there)."""
    conf = {k: v for k, v in conf.items() if str(v).strip()}
    env = {k: v for k, v in env.items() if str(v).strip()}
    if env.get("SPARK_HOME"):
        env["PATH"] = f"{env['SPARK_HOME']}/bin{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    return conf, env


def spark_submit_kwargs(extra_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """What every task passes to the operator: Delta on the classpath; Spark, Python, packed environment and conf
    dir from the Variables (templates rendered when the task runs)."""
    archive = var("lbreplay_env_archive")
    python = "{{ %s }}" % var("lbreplay_python", "python3")
    conf = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.pyspark.driver.python": python,
        # executors: the packed environment when there is one, else the driver's Python
        "spark.pyspark.python": "{{ './environment/bin/python' if %s else %s }}" % (archive, var("lbreplay_python", "python3")),
        "spark.archives": "{{ (%s ~ '#environment') if %s else '' }}" % (archive, archive),
        "spark.executorEnv.LBREPLAY_CONF_DIR": "{{ './environment/conf' if %s else '' }}" % archive,
        # Should a submitter switch the session to a Hive catalog, Derby's files go under the lake's _catalog
        # directory, not the cwd (the driver JVM starts before lbreplay.spark configures the session).
        "spark.driver.extraJavaOptions": (
            "{%% if '://' not in %s %%}-Dderby.system.home={{ %s }}/_catalog{%% endif %%}" % (_LAKE, _LAKE)
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
        "SPARK_HOME": "{{ %s }}" % var("lbreplay_spark_home"),
        "PYSPARK_DRIVER_PYTHON": python,
        "LBREPLAY_CONF_DIR": "{{ %s }}" % var("lbreplay_conf_dir"),
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
    """One ``spark-submit <jobs dir>/<job>.py <args> --lake <lake>`` task."""
    return LbreplaySubmitOperator(
        task_id=task_id,
        application="{{ %s }}/%s.py" % (var("lbreplay_jobs_dir", str(PROJECT / "jobs")), job),
        application_args=[*args, "--lake", LAKE],
        name=f"lbreplay-{job}-{cluster}",
        **spark_submit_kwargs(CONFIG["spark_conf"]),
    )


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
        "lake": Param("", type="string",
                      description="Lake path or URI (absolute); empty: the Variable lbreplay_lake, else " + DEFAULT_LAKE),
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
                ["--cluster", cluster, "--grid", spec["grid"], "--broker-conf", spec["broker_conf"],
                 "--run-id-prefix", sweep_prefix, *window],
            )
            report = submit(
                "report", "report", cluster,
                ["--runs", ",".join([baseline_id, *sweep_ids]),
                 "--out", f"{REPORTS}/{cluster}/lbreplay-{cluster}-{DAY}.html"],
            )
            ingest >> validate >> [baseline, sweep] >> report


lbreplay_daily()
