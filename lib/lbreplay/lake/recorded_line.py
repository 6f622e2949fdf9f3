"""The Pulsar line a recording was made on: ``broker_load.broker_version`` (the brokers' ``brokerVersionString``,
``LocalBrokerData`` / the extensible ``BrokerLookupData.brokerVersion``), a release such as ``4.0.7`` naming the
line ``4.0``.

:func:`recorded_versions` reads the distinct versions of a cluster's window (one small Spark aggregation);
:func:`choose_line` decides, without Spark, which line a run uses: an explicit ``pulsarVersion``, else the line the
brokers report, else the default (the newest released line the oracle checks, ``conf/pulsar/defaults.yaml``).
An upgrade inside the window (two lines reported) is refused unless the line is chosen explicitly.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lbreplay.errors import UsageError
from lbreplay.kernel.config import known_keys
from lbreplay.kernel.version_profile import PROFILES, line_of
from lbreplay.lake import tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lbreplay.lake.window import TimeWindow

_RELEASE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:[.\-+].*)?\s*$")


@dataclass(frozen=True)
class VersionSeen:
    """One ``broker_version`` value of the window: when it was reported first and last, by how many brokers."""

    version: str
    first: dt.datetime
    last: dt.datetime
    brokers: int

    def describe(self) -> str:
        return f"{self.version} ({self.first:%Y-%m-%dT%H:%M:%SZ} .. {self.last:%Y-%m-%dT%H:%M:%SZ}, " \
               f"{self.brokers} broker{'s' if self.brokers != 1 else ''})"


@dataclass(frozen=True)
class LineChoice:
    """The line a run uses and where it came from: ``explicit``, ``recording`` or ``default``."""

    line: str
    source: str
    detail: str
    warnings: tuple[str, ...] = field(default=())

    def message(self) -> str:
        return f"Pulsar line {self.line} ({self.detail})"

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "source": self.source, "detail": self.detail}


def release_line(version: str | None) -> str | None:
    """``"4.0.7"`` -> ``"4.0"``; None for a value that names no release."""
    m = _RELEASE.match(version or "")
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def _key(line: str) -> tuple[int, ...]:
    return tuple(int(x) for x in line.split("."))


def default_line() -> str:
    """The line of a run nothing else names (``pulsarVersion`` in ``conf/pulsar/defaults.yaml``)."""
    return str(known_keys()["pulsarVersion"])


def recorded_versions(spark: SparkSession, lake: str, cluster: str,
                      window: TimeWindow | None = None) -> list[VersionSeen]:
    """The distinct non-empty ``broker_version`` values of ``cluster``'s ``broker_load`` rows in ``window`` (a lake
    ``lbreplay generate`` wrote has none unless its scenario sets ``broker.version``)."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(tables.table_location(lake, tables.BROKER_LOAD.name)) \
        .where(F.col("cluster") == cluster)
    if window is not None:
        df = df.where(window.predicate())
    rows = (df.where(F.col("broker_version").isNotNull() & (F.trim("broker_version") != ""))
            .groupBy("broker_version")
            .agg(F.min("ts").alias("first"), F.max("ts").alias("last"), F.countDistinct("broker").alias("brokers"))
            .collect())
    return sorted((VersionSeen(r["broker_version"], r["first"], r["last"], int(r["brokers"])) for r in rows),
                  key=lambda v: (v.first, v.version))


def _said(seen: list[VersionSeen]) -> tuple[dict[str, list[VersionSeen]], list[str]]:
    """The versions that name a line, grouped by line, and the notes on those that do not."""
    by_line: dict[str, list[VersionSeen]] = {}
    notes: list[str] = []
    for v in seen:
        line = release_line(v.version)
        if line is None:
            notes.append(f"brokers report {v.version!r}, which names no Pulsar release")
        else:
            by_line.setdefault(line, []).append(v)
    return by_line, notes


def choose_line(seen: list[VersionSeen], explicit: str | None) -> LineChoice:
    """The run's line: ``explicit`` (a warning when the recording says otherwise), else the one line the brokers
    report (a line lbreplay does not model: the newest modelled line before it, with a warning), else
    :func:`default_line`. Two lines in the window are a UsageError unless ``explicit`` is given."""
    by_line, notes = _said(seen)
    reported = ", ".join(v.describe() for vs in by_line.values() for v in vs)
    if explicit is not None:
        warnings = list(notes)
        recorded = sorted(by_line)
        if recorded and recorded != [line_of(explicit)]:
            warnings.append(f"pulsarVersion {explicit} (explicit) differs from the recording: brokers report "
                            f"{reported}")
        return LineChoice(explicit, "explicit", "explicit", tuple(warnings))
    if len(by_line) > 1:
        raise UsageError(f"broker_load.broker_version: the window holds several Pulsar lines ({reported}); replay "
                         "each line's time range on its own (--from/--to) or choose one with --set pulsarVersion=LINE")
    if len(by_line) == 1:
        line, vs = next(iter(by_line.items()))
        releases = ", ".join(sorted({v.version for v in vs}))
        if line in PROFILES:
            return LineChoice(line, "recording", f"from the recording: brokers report {releases}", tuple(notes))
        older = [p for p in PROFILES if _key(p) < _key(line)]
        if not older:
            raise UsageError(f"broker_load.broker_version: brokers report {reported}, line {line}, which lbreplay "
                             f"does not model (lines: {', '.join(PROFILES)}); choose one with --set pulsarVersion=LINE")
        nearest = max(older, key=_key)
        return LineChoice(nearest, "recording", f"from the recording: brokers report {releases}; line {line} is not "
                          f"modelled, {nearest} is the newest modelled line before it", (
                              *notes, f"brokers report {releases} (line {line}, not modelled): replaying as Pulsar "
                              f"{nearest}; set pulsarVersion to choose another line"))
    detail = "default: newest released line" + (f"; {'; '.join(notes)}" if notes else "")
    return LineChoice(default_line(), "default", detail)
