"""Copies of Pulsar dump directories shifted by whole days, for data-interval tests.

Standard library only: the Airflow tests (run with Airflow's own environment, without lbreplay) use it too.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

_STAMP = re.compile(r"(\d{8})T")  # the YYYYMMDDT… stamps of the sample dumps' paths


def shift_dumps(src: Path, dst: Path, days: int) -> list[Path]:
    """Write every ``*.json`` under ``src`` into ``dst`` (same relative path) ``days`` later: LocalBrokerData's
    ``lastUpdate`` (epoch ms) and the ``YYYYMMDDT`` stamps in paths move; other content is unchanged."""

    def later(m: re.Match[str]) -> str:
        return (dt.datetime.strptime(m.group(1), "%Y%m%d") + dt.timedelta(days=days)).strftime("%Y%m%dT")

    written = []
    for f in sorted(src.rglob("*.json")):
        obj = json.loads(f.read_text(encoding="utf-8"))
        if isinstance(obj, dict) and "lastUpdate" in obj:
            obj["lastUpdate"] += days * 86_400_000
        out = dst / _STAMP.sub(later, str(f.relative_to(src)))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(obj), encoding="utf-8")
        written.append(out)
    return written
