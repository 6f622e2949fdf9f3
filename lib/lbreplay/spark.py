"""SparkSession factory: decorates a builder with Delta Lake (like ``delta.configure_spark_with_delta_pip``).

Embedded default: ``local[*]``, the lake under ``data/lake``, and an in-memory catalog: every session registers
the lake's path-based Delta tables and views itself (``tables.ensure_tables``, ``views.ensure_views``), so any
number of lbreplay processes use one lake at the same time (no single-process metastore file); the warehouse
directory stays inside the lake (``<lake>/_catalog/warehouse``), so two lakes never interfere. A submitter that
sets ``spark.sql.catalogImplementation`` itself (``spark-submit --conf``, ``spark-defaults.conf``, a cluster's
Hive metastore) keeps its catalog. Under ``spark-submit`` (or with ``--master``) the caller's master, packages
and confs win.

Delta's jars are resolved from Maven Central by Spark's Ivy resolver on first start and cached under
``~/.cache/lbreplay``; later starts pass the cached jars directly (no resolver, no network). Where Maven
is configured with a mirror (``~/.m2/settings.xml``), Ivy is pointed at that mirror instead.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbreplay.cluster_check import require_supported_spark
from lbreplay.paths import CACHE_DIR, CONF_DIR, DEFAULT_LAKE

SCALA_BINARY = "2.13"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
DATABASE = "lbreplay"

LOG4J2_CONF = CONF_DIR / "spark" / "log4j2.properties"  # the driver JVM's logging (not under spark-submit)


def delta_artifact() -> str:
    """``io.delta:delta-spark_<spark major.minor>_2.13:<delta-spark version>`` (as delta's pip helper builds it)."""
    from importlib.metadata import version

    import pyspark

    spark_mm = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_mm}_{SCALA_BINARY}:{version('delta-spark')}"


def maven_mirror_url(settings: Path | None = None) -> str | None:
    """URL of a mirror of ``central`` / ``*`` configured for Maven in ``~/.m2/settings.xml``, if any."""
    path = settings or Path.home() / ".m2" / "settings.xml"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    for block in re.findall(r"<mirror>(.*?)</mirror>", text, flags=re.S):
        of = re.search(r"<mirrorOf>\s*([^<]+?)\s*</mirrorOf>", block)
        url = re.search(r"<url>\s*([^<]+?)\s*</url>", block)
        blocked = re.search(r"<blocked>\s*true\s*</blocked>", block)
        if of and url and not blocked and any(p.strip() in ("*", "central", "external:*") for p in of.group(1).split(",")):
            return url.group(1).rstrip("/") + "/"
    return None


def _ivy_settings(cache: Path) -> Path:
    root = maven_mirror_url() or MAVEN_CENTRAL
    path = cache / "ivysettings.xml"
    path.write_text(
        "<ivysettings>\n  <settings defaultResolver=\"main\"/>\n  <resolvers>\n"
        "    <chain name=\"main\" returnFirst=\"true\">\n"
        f"      <ibiblio name=\"central\" m2compatible=\"true\" root=\"{root}\"/>\n"
        "    </chain>\n  </resolvers>\n</ivysettings>\n",
        encoding="utf-8",
    )
    return path


def _manifest(cache: Path, artifact: str) -> Path:
    return cache / "jars" / (artifact.replace(":", "_") + ".txt")


def delta_jar_conf(cache: Path = CACHE_DIR) -> dict[str, str]:
    """Spark confs that put Delta on the classpath: cached jars if resolved before, else the Ivy resolver."""
    artifact = delta_artifact()
    manifest = _manifest(cache, artifact)
    if manifest.is_file():
        jars = [line.strip() for line in manifest.read_text().splitlines() if line.strip()]
        if jars and all(Path(j.removeprefix("file://")).is_file() for j in jars):
            return {"spark.jars": ",".join(jars)}
    cache.mkdir(parents=True, exist_ok=True)
    return {
        "spark.jars.packages": artifact,
        "spark.jars.ivySettings": str(_ivy_settings(cache)),
        "spark.jars.ivy": str(cache / "ivy"),
    }


def _remember_jars(spark: Any, cache: Path = CACHE_DIR) -> None:
    conf = spark.sparkContext.getConf()
    if conf.get("spark.jars.packages", "") != delta_artifact():
        return
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    if jars:
        manifest = _manifest(cache, delta_artifact())
        manifest.parent.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text("\n".join(jars) + "\n")
        tmp.replace(manifest)


def java_option(option: str) -> str:
    """One JVM option in ``spark.driver.extraJavaOptions`` (split like a shell line: quoted if it has a space)."""
    return f'"{option}"' if " " in option else option


# The embedded driver JVM's collector: the throughput collector suits a batch tool's JVM (no pause goal to meet);
# on 2 cores a 12-tick replay process took 27-28 s with it, 31-39 s with the default G1 (docs/performance.md).
DRIVER_GC = "-XX:+UseParallelGC"
_GC_CHOICE = re.compile(r"-XX:[+-]Use\w+GC\b")


# A short-lived driver JVM with little Spark work compiles with C1 only: on 2 cores the tiered JIT's C2 compiles
# and C1's profiled code cost the M closed loop's cold process 44.8-47.1 s against 37.5-38.6 s with C1 only; on
# long scans C2's code wins (the L closed loop 173.0 s against 195.8 s, validate M 52.4 s against 64.0 s;
# docs/performance.md).
QUICK_JIT = "-XX:TieredStopAtLevel=1"
_JIT_CHOICE = re.compile(r"-XX:(TieredStopAtLevel=\d|[+-]TieredCompilation)\b")


def driver_java_options(*class_sharing: str, quick_jit: bool = False) -> str:
    """``spark.driver.extraJavaOptions`` of an embedded session: Spark's start-up chatter off
    (conf/spark/log4j2.properties; ``--verbose`` keeps Spark's default logging), the throughput collector
    (:data:`DRIVER_GC`, unless the JVM's environment options choose one), with ``quick_jit`` C1 only
    (:data:`QUICK_JIT`, unless they choose a JIT), then the class-data-sharing options given, with the JVM's own
    CDS logging off (an archive it cannot use is ignored quietly)."""
    options = []
    if os.environ.get("LBREPLAY_VERBOSE") != "1" and LOG4J2_CONF.is_file():
        options.append(f"-Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}")
    chosen = " ".join(os.environ.get(v, "") for v in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"))
    if not _GC_CHOICE.search(chosen):  # two collectors on one command line: the JVM refuses to start
        options.append(DRIVER_GC)
    if quick_jit and not _JIT_CHOICE.search(chosen):
        options.append(QUICK_JIT)
    if class_sharing:
        options += [*map(java_option, class_sharing), "-Xlog:cds*=off"]
    return " ".join(options)


def class_path_stamp(jars: Path) -> str:
    """Name, size and modification time of every jar in ``jars``: the JVM refuses an archive whose class path jars
    differ in size or time from the ones it was dumped with (a re-created virtualenv has the same paths, new
    times)."""
    import hashlib

    entries = sorted((j.name, j.stat().st_size, j.stat().st_mtime_ns) for j in jars.glob("*.jar"))
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:12]


def class_archive(cache: Path = CACHE_DIR) -> Path:
    """The driver JVM's class-data-sharing archive (JDK's AppCDS, ``-XX:SharedArchiveFile``):
    ``driver-<install>-<jars>.jsa``, one per java binary, pyspark install and Delta (``<install>``) and per state
    of pyspark's jars (``<jars>``, :func:`class_path_stamp`). ``lbreplay.warm`` dumps it once from a short
    representative run and removes the install's older archives. A JVM that finds it unusable ignores it
    (``-Xlog:cds*=off`` keeps that quiet)."""
    import hashlib

    import pyspark

    home = os.environ.get("JAVA_HOME")  # the java that Spark's launcher runs (bin/spark-class)
    java = Path(home) / "bin" / "java" if home else Path(shutil.which("java") or "java")
    try:
        real = java.resolve()
        stamp = f"{real}|{real.stat().st_mtime_ns}"
    except OSError:
        stamp = str(java)
    home_dir = Path(pyspark.__file__).parent
    install = f"{stamp}|{pyspark.__version__}|{home_dir}|{delta_artifact()}"
    jars = class_path_stamp(home_dir / "jars")
    return cache / "jvm" / f"driver-{hashlib.sha256(install.encode()).hexdigest()[:16]}-{jars}.jsa"


def lake_path(lake: str | os.PathLike[str] = DEFAULT_LAKE) -> str:
    """Absolute lake location; URIs (``s3a://``, ``abfss://`` …) are returned unchanged."""
    text = str(lake)
    if "://" in text:
        return text.rstrip("/")
    return str(Path(text).expanduser().resolve())


def default_driver_memory() -> str:
    """Heap of the embedded (local-mode) session, whose driver is also the executor: a quarter of the machine's
    memory, 1-8 GiB. Spark's own default (1g) is too small for M-size tick streams (``spark.driver.memory``;
    ``conf`` or spark-submit's ``--driver-memory`` override it)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return "2g"
    return f"{max(1, min(8, total // (4 * 1024 ** 3)))}g"


def submitted_conf(key: str) -> str | None:
    """``key`` as the submitter set it (``spark-submit --conf``, ``spark-defaults.conf``): the JVM's SparkConf
    defaults of an already launched gateway; None when unset or when no gateway runs yet."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        value = active.getConf().get(key)
        return None if value is None else str(value)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose system properties hold its confs
    jvm = SparkContext._jvm
    if jvm is None:
        return None
    jconf = jvm.org.apache.spark.SparkConf(True)
    return str(jconf.get(key)) if jconf.contains(key) else None


def configure_lbreplay(builder: Any, lake: str, *, master: str | None = None, conf: dict[str, str] | None = None,
                       quick_jit: bool = False) -> Any:
    """Decorate a ``SparkSession.Builder`` with Delta, the lake's catalog and lbreplay's defaults; ``quick_jit``:
    an embedded driver JVM compiles with C1 only (:data:`QUICK_JIT`)."""
    from pyspark import SparkContext

    # spark-submit launches Python apps with a gateway already running (PythonRunner sets PYSPARK_GATEWAY_PORT).
    under_submit = SparkContext._active_spark_context is not None or "PYSPARK_GATEWAY_PORT" in os.environ
    settings: dict[str, str] = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
    }
    own_catalog = "spark.sql.catalogImplementation" in (conf or {}) or (
        under_submit and submitted_conf("spark.sql.catalogImplementation") is not None)
    if "://" not in lake and not own_catalog:
        # The session's catalog is in memory: no metastore file that admits one process, so any number of lbreplay
        # processes share a lake. Tables are path-based Delta tables registered per session (tables.ensure_tables).
        catalog = Path(lake) / "_catalog"
        catalog.mkdir(parents=True, exist_ok=True)
        settings.update(
            {
                "spark.sql.catalogImplementation": "in-memory",
                "spark.sql.warehouse.dir": str(catalog / "warehouse"),
            }
        )
    if not under_submit:
        settings["spark.master"] = master or "local[*]"
        settings["spark.driver.memory"] = default_driver_memory()
        settings.update(delta_jar_conf())
        archive = class_archive()  # dumped by `make warm`: the driver JVM maps its classes instead of loading them
        options = driver_java_options(*([f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []),
                                      quick_jit=quick_jit)
        if options:
            settings["spark.driver.extraJavaOptions"] = options
    else:
        # the submitter's confs win over lbreplay's defaults (e.g. --conf spark.sql.shuffle.partitions=64)
        settings = {k: v for k, v in settings.items() if submitted_conf(k) is None}
        if master:
            settings["spark.master"] = master
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder


@dataclass(frozen=True)
class LakeNeeds:
    """What a command reads from its lake: the lake itself, and the cluster and run ids it names."""

    cluster: str | None = None
    runs: tuple[str, ...] = ()


_NEEDS: ContextVar[LakeNeeds | None] = ContextVar("lbreplay_lake_needs", default=None)


@contextmanager
def existing_lake(cluster: str | None = None, runs: Iterable[str] = ()) -> Iterator[None]:
    """Within the block :func:`get_spark` refuses (exit 2) a path that is not a lake (``lake.presence``): a local
    path before Spark starts (nothing is created), a storage URI right after; then a ``cluster`` with no input rows
    and ``runs`` not in the ``runs`` table, naming the known ones. Every command but ``generate``, ``ingest``,
    ``collect`` and ``demo`` (which make lakes) runs in it."""
    token = _NEEDS.set(LakeNeeds(cluster, tuple(runs)))
    try:
        yield
    finally:
        _NEEDS.reset(token)


def lake_needs() -> LakeNeeds | None:
    """What the caller's :func:`existing_lake` block asks of the lake (None outside one)."""
    return _NEEDS.get()


def check_lake_needs(spark: Any, lake: str, needs: LakeNeeds) -> None:
    """The checks of :func:`existing_lake` that need a session (a URI lake's tables, the cluster, the runs)."""
    from lbreplay.lake import presence

    if "://" in lake:
        presence.require_lake(spark, lake)
    if needs.cluster is not None:
        presence.require_cluster(spark, lake, needs.cluster)
    if needs.runs:
        presence.require_runs(spark, lake, list(needs.runs))


#: pyspark's loggers that print a whole JSON record (the JVM stack included) when a query fails analysis
#: (``PySparkException._log_exception``); lbreplay reports those errors itself, on one line.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def quiet_query_context_loggers() -> None:
    """Only critical records from :data:`QUERY_CONTEXT_LOGGERS` (made as ``PySparkLogger``s: they log with extra
    fields a plain ``logging.Logger`` refuses)."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def get_spark(
    lake: str | os.PathLike[str] = DEFAULT_LAKE,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    app_name: str = "lbreplay",
    quick_jit: bool = False,
) -> Any:
    """Create (or reuse) the SparkSession for ``lake`` and make sure the ``lbreplay`` database exists;
    ``quick_jit``: a new embedded driver JVM compiles with C1 only (:data:`QUICK_JIT`: a short run's choice)."""
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # Python workers of the embedded session run the same interpreter (the venv that has lbreplay installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    lake_abs = lake_path(lake)
    needs = lake_needs()
    if needs is not None and "://" not in lake_abs:
        from lbreplay.lake.presence import require_local_lake

        require_local_lake(lake_abs)  # before the JVM, and before configure_lbreplay makes <lake>/_catalog
    require_supported_spark()  # under spark-submit: the cluster's Spark is lbreplay's major.minor, else exit 2
    builder = configure_lbreplay(SparkSession.builder.appName(app_name), lake_abs, master=master, conf=conf,
                                 quick_jit=quick_jit)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    quiet_query_context_loggers()
    _remember_jars(spark)
    if needs is not None:
        check_lake_needs(spark, lake_abs, needs)
    spark.conf.set("lbreplay.lake", lake_abs)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    return spark
