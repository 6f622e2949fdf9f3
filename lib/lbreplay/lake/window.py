"""Data intervals: the half-open UTC time window ``[start, end)`` of ``ingest --since/--until`` and
``replay``/``sweep --from/--to`` (a scheduler's ``data_interval_start`` / ``data_interval_end``).

A bound is an ISO-8601 timestamp or a date: ``2023-08-02`` (midnight UTC), ``2023-08-02T12:00:00Z``,
``2023-08-02 12:00``, ``20230802T120000Z``, ``2023-08-02T14:00:00+02:00`` (converted to UTC); no offset
means UTC. Either bound may be left open. Input rows are in the window when their ``ts`` (the tick) is;
the ``date`` partition bounds are added to every predicate so Delta prunes (and ``replaceWhere`` replaces)
only the days the window touches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from lbreplay.errors import UsageError

_ONE_MICRO = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_instant(text: str, flag: str) -> datetime:
    """One window bound -> an aware UTC datetime; a UsageError naming ``flag`` when it is not ISO-8601."""
    try:
        dt = datetime.fromisoformat(text.strip())  # a date alone is its midnight
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: expected an ISO-8601 UTC timestamp or date, e.g. 2023-08-02 or 2023-08-02T00:00:00Z"
        ) from None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if dt.microsecond else "%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class TimeWindow:
    """``[start, end)`` in UTC; ``None`` leaves a side open. ``flags`` name the CLI flags in messages."""

    start: datetime | None
    end: datetime | None
    flags: tuple[str, str] = ("--from", "--to")

    def contains(self, ts: datetime) -> bool:
        """``ts`` (aware, or naive = UTC) in ``[start, end)``."""
        t = ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts
        return (self.start is None or t >= self.start) and (self.end is None or t < self.end)

    def predicate(self, ts_column: str = "ts", date_column: str | None = "date") -> str:
        """Spark SQL for the window over ``ts_column`` (literals in UTC, independent of the session time zone),
        plus the ``date_column`` partition range it implies (``None``: no date bound)."""
        parts: list[str] = []
        if self.start is not None:
            parts.append(f"{ts_column} >= TIMESTAMP '{_iso(self.start)}'")
            if date_column:
                parts.append(f"{date_column} >= DATE '{self.start.date().isoformat()}'")
        if self.end is not None:
            parts.append(f"{ts_column} < TIMESTAMP '{_iso(self.end)}'")
            if date_column:
                parts.append(f"{date_column} <= DATE '{(self.end - _ONE_MICRO).date().isoformat()}'")
        return " AND ".join(parts) or "TRUE"

    def epoch_micros(self) -> tuple[int | None, int | None]:
        """``[start, end)`` as epoch microseconds (``None`` for an open side), as Parquet timestamps store them."""
        return (None if self.start is None else (self.start - _EPOCH) // _ONE_MICRO,
                None if self.end is None else (self.end - _EPOCH) // _ONE_MICRO)

    def to_json(self) -> dict[str, Any]:
        """``{"from": "2023-08-02T00:00:00Z", "to": "2023-08-03T00:00:00Z"}`` (null = open side)."""
        return {"from": _iso(self.start), "to": _iso(self.end)}

    def describe(self) -> str:
        return f"[{_iso(self.start) or '-inf'}, {_iso(self.end) or '+inf'})"

    def flag_text(self) -> str:
        return "/".join(self.flags)


def window_from_flags(start: str | None, end: str | None, flags: tuple[str, str] = ("--from", "--to")) -> TimeWindow | None:
    """The window of two optional CLI flags (None when neither is given); an empty or inverted window is a
    UsageError naming the flags."""
    if start is None and end is None:
        return None
    lo = parse_instant(start, flags[0]) if start is not None else None
    hi = parse_instant(end, flags[1]) if end is not None else None
    if lo is not None and hi is not None and hi <= lo:
        raise UsageError(
            f"{flags[1]} {end} must be later than {flags[0]} {start}: the window [{flags[0]}, {flags[1]}) is empty"
        )
    return TimeWindow(lo, hi, flags)
