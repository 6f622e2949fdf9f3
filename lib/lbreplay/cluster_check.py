"""The cluster's Spark against the one lbreplay supports.

lbreplay pins pyspark (setup.cfg ``install_requires``) and Delta's jars for that Spark's major.minor
(``delta-spark_<major.minor>_2.13``). A job spark-submitted with another Spark would fail later and obscurely
(Delta's session extension, Arrow and pandas UDF protocols), so :func:`require_supported_spark` stops it first,
with exit 2 and one line: ``cluster runs Spark X, lbreplay needs Y``. Only ``spark-submit``'s JVM (the cluster's
distribution) is checked; an embedded session runs the installed pyspark's own JVM.
"""

from __future__ import annotations

import os
import re
import sys
from importlib.metadata import PackageNotFoundError, requires, version

from lbreplay.errors import UsageError

_PIN = re.compile(r"^pyspark\s*(?:\[[^\]]*\])?\s*==\s*(\d+)\.(\d+)")
_VERSION = re.compile(r"^(\d+)\.(\d+)")
_checked: set[str] = set()


def major_minor(text: str) -> str | None:
    """``"4.1.4"`` -> ``"4.1"``; None for text that does not start with two dot-separated numbers."""
    m = _VERSION.match(text.strip())
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def supported_spark() -> str | None:
    """Spark major.minor lbreplay supports: its ``pyspark==X.Y.Z`` requirement (from the installed package's
    metadata, i.e. setup.cfg), else the installed pyspark distribution's; None when neither is known."""
    try:
        for req in requires("lbreplay") or []:
            m = _PIN.match(req.split(";")[0].strip())
            if m:
                return f"{int(m.group(1))}.{int(m.group(2))}"
    except PackageNotFoundError:
        pass
    try:
        return major_minor(version("pyspark"))
    except PackageNotFoundError:
        return None


def spark_mismatch(cluster: str, supported: str) -> str | None:
    """The one-line refusal when ``cluster``'s major.minor differs from ``supported``'s (None when they agree)."""
    if major_minor(cluster) is not None and major_minor(cluster) == major_minor(supported):
        return None
    return f"cluster runs Spark {cluster}, lbreplay needs Spark {major_minor(supported) or supported}"


def submitted_spark_version() -> str | None:
    """The Spark version of spark-submit's JVM (``org.apache.spark.SPARK_VERSION``), read through the gateway
    spark-submit started, before any session exists; None when not under spark-submit."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return str(active.version)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()
    jvm = SparkContext._jvm
    if jvm is None:
        return None
    return str(getattr(getattr(jvm.org.apache.spark, "package$"), "MODULE$").SPARK_VERSION())


def require_supported_spark(cluster: str | None = None) -> None:
    """Raise :class:`UsageError` (exit 2) when the cluster's Spark (``cluster``, default: spark-submit's JVM) is
    not lbreplay's major.minor. Nothing to check outside spark-submit; a warning when the supported version is
    unknown (no package metadata), the check then skipped."""
    cluster = cluster or submitted_spark_version()
    if cluster is None or cluster in _checked:
        return
    supported = supported_spark()
    if supported is None:
        print("lbreplay: warning: no lbreplay or pyspark package metadata; the cluster's Spark version is not checked",
              file=sys.stderr)
        _checked.add(cluster)
        return
    problem = spark_mismatch(cluster, supported)
    if problem:
        raise UsageError(problem)
    _checked.add(cluster)
