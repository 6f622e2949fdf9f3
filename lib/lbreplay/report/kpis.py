"""The report's KPI table: which ``run_metrics`` to show, how to format them, and which run is best per KPI."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class Kpi:
    metric: str  # run_metrics.metric
    label: str
    fmt: Callable[[float], str]
    lower_is_better: bool | None = True  # None: no "best" (context figures)
    help: str = ""


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _pct(v: float) -> str:
    return f"{100.0 * v:.2f} pp"


def _ratio(v: float) -> str:
    return f"{v:.3f}"


def _minutes(v: float) -> str:
    return f"{v:,.1f} min"


def _bytes_rate(v: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.2f} {unit}"
    return f"{v:,.0f} B/s"


def _mape(v: float) -> str:
    return f"{100.0 * v:.2f} %"


KPIS: tuple[Kpi, ...] = (
    Kpi("unloads", "Unloads", _int, True, "UNLOAD + TRANSFER decisions"),
    Kpi("splits", "Splits", _int, True, "bundle splits"),
    Kpi("bundles_moved", "Bundles moved", _int, True, "ownership changes from one broker to another"),
    Kpi("throughput_moved", "Throughput moved", _bytes_rate, True, "msg throughput in+out of the moved bundles"),
    *(
        Kpi(f"load_spread_{s}", f"Spread (max−min) {s}", _pct, True,
            "max − min weighted max usage over alive brokers, percentage points")
        for s in ("mean", "p95", "final")
    ),
    *(
        Kpi(f"load_std_{s}", f"Std {s}", _pct, True, "std of weighted max usage over alive brokers, percentage points")
        for s in ("mean", "p95", "final")
    ),
    *(
        Kpi(f"load_max_over_mean_{s}", f"Max/mean {s}", _ratio, True, "max / mean weighted max usage")
        for s in ("mean", "p95", "final")
    ),
    Kpi("time_to_balance_minutes", "Time to balance", _minutes, True, "after broker joins/leaves, mean over events"),
    Kpi("cluster_events", "Cluster events", _int, None, "broker joins/leaves seen"),
    Kpi("ping_pong_moves", "Ping-pong moves", _int, True, "moved back to a broker it left within 2 grace periods"),
    Kpi("over_placement_events", "Over-placement events", _int, True,
        ">= 3 bundles to one broker in a tick, which then becomes the most loaded"),
    Kpi("calibration_mape", "Calibration error (MAPE)", _mape, True, "modelled vs observed CPU where ownership matches"),
    Kpi("ticks", "Ticks", _int, None, "leader refreshes replayed"),
)


def format_value(kpi: Kpi, value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return kpi.fmt(float(value))


def best_runs(kpi: Kpi, values: Sequence[float | None]) -> set[int]:
    """Indexes of the best value(s) for ``kpi`` (ties all best); none when fewer than two runs have a value,
    when every run has the same value, or when the KPI has no direction."""
    if kpi.lower_is_better is None:
        return set()
    finite = [(i, float(v)) for i, v in enumerate(values) if v is not None and math.isfinite(float(v))]
    if len(finite) < 2 or len({v for _, v in finite}) == 1:
        return set()
    target = min(v for _, v in finite) if kpi.lower_is_better else max(v for _, v in finite)
    return {i for i, v in finite if v == target}


def kpi_table_html(run_ids: Sequence[str], headers: Sequence[str], metrics: dict[str, dict[str, float | None]]) -> str:
    """An HTML table: one row per KPI, one column per run; the best run per KPI is marked ``best``."""
    head = "".join(f"<th scope=\"col\">{html.escape(h)}</th>" for h in headers)
    rows = []
    for kpi in KPIS:
        values = [metrics.get(r, {}).get(kpi.metric) for r in run_ids]
        best = best_runs(kpi, values)
        cells = "".join(
            f"<td class=\"num{' best' if i in best else ''}\" data-metric=\"{kpi.metric}\">"
            f"{html.escape(format_value(kpi, v))}</td>"
            for i, v in enumerate(values)
        )
        rows.append(
            f"<tr><th scope=\"row\" title=\"{html.escape(kpi.help)}\">{html.escape(kpi.label)}</th>{cells}</tr>"
        )
    return (
        "<table class=\"kpis\" id=\"kpi-table\"><thead><tr><th scope=\"col\">KPI</th>" + head + "</tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>"
    )
