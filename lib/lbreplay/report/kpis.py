"""The KPI registry: every run KPI once (definition, unit, better direction, how it is computed). ``run_metrics``
rows, the report, ``compare`` and ``gate`` iterate :data:`KPIS`; objectives (``conf/objectives/*.yaml``) weight
its entries by name.

Values are stored as ``run_metrics`` holds them (usage as a fraction, times in minutes); ``scale`` turns them into
the displayed unit (``pp`` = percentage points of weighted max usage), and limits (``max_spread<=20``) are written
in the displayed unit. A KPI whose value is null is "n/a" (``never`` for the time to balance: the run did not end
balanced, see :mod:`lbreplay.report.balance`).
"""

from __future__ import annotations

import difflib
import html
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from lbreplay.errors import UsageError

Metrics = Mapping[str, "float | None"]

# where a KPI comes from
SEQUENTIAL = "RunMetrics in the replay task (replay/metrics.py), summed over slices"
DISTRIBUTION = "run_metrics from broker_ticks per tick over alive brokers (replay/outputs.py)"
BALANCE = "run_metrics from broker_ticks and the run's own balance target (report/balance.py)"
DERIVED = "derived from other KPIs when read"


@dataclass(frozen=True)
class Kpi:
    metric: str  # run_metrics.metric (or a derived name)
    label: str
    unit: str  # "", "pp", "min", "B/s", "/h", "ratio", "%"
    lower_is_better: bool | None  # None: context figure, no direction
    definition: str
    computed: str = SEQUENTIAL
    scale: float = 1.0  # displayed value = stored value x scale
    derive: Callable[[Metrics], float | None] | None = None
    never: str = "n/a"  # how a null value reads

    @property
    def better(self) -> str:
        return "-" if self.lower_is_better is None else ("lower" if self.lower_is_better else "higher")

    def value(self, metrics: Metrics) -> float | None:
        """This KPI of one run (derived ones computed from the others); None when missing or not finite."""
        v = self.derive(metrics) if self.derive else metrics.get(self.metric)
        if v is None or not math.isfinite(float(v)):
            return None
        return float(v)

    def display(self, value: float | None) -> float | None:
        return None if value is None else value * self.scale


def _per_hour(metrics: Metrics) -> float | None:
    unloads, minutes = metrics.get("unloads"), metrics.get("duration_minutes")
    if unloads is None or not minutes:
        return None
    return 60.0 * float(unloads) / float(minutes)


_DIST = {"mean": "mean over ticks", "p95": "95th percentile over ticks", "final": "at the last tick"}

KPIS: tuple[Kpi, ...] = (
    Kpi("time_to_balance_minutes", "Time to balance", "min", True,
        "minutes from the run's first tick until the load stays within the config's own balance target to the end "
        "of the run (0: balanced throughout; never: unbalanced at the last tick)", BALANCE, never="never"),
    Kpi("never_balanced", "Never balanced", "", True, "1 when the last tick is outside the balance target",
        BALANCE),
    Kpi("unbalanced_ticks", "Unbalanced ticks", "", True, "ticks outside the config's own balance target", BALANCE),
    Kpi("unloads", "Unloads", "", True, "UNLOAD + TRANSFER decisions"),
    Kpi("unloads_per_hour", "Unloads per hour", "/h", True, "unloads / run duration", DERIVED, derive=_per_hour),
    Kpi("transfers", "Transfers", "", None, "TRANSFER decisions (extensible load manager), among the unloads"),
    Kpi("splits", "Splits", "", True, "bundle splits"),
    Kpi("assigns", "Assigns", "", None, "bundle assignments (lookups of unowned bundles)"),
    Kpi("bundles_moved", "Bundles moved", "", True, "ownership changes from one broker to another"),
    Kpi("throughput_moved", "Throughput moved", "B/s", True,
        "msg throughput in+out of the moved bundles: the traffic whose clients look their topics up again"),
    Kpi("ping_pong_moves", "Ping-pong moves", "", True,
        "moved back to a broker it left within 2 grace periods (loadBalancerSheddingGracePeriodMinutes)"),
    Kpi("over_placement_events", "Over-placement events", "", True,
        ">= 3 bundles to one broker in a tick, which then becomes the most loaded within 5 ticks"),
    Kpi("idle_broker_minutes", "Idle-broker minutes", "min", True,
        "alive brokers owning no bundle, summed over ticks (x tick length)", BALANCE),
    Kpi("max_spread", "Max spread", "pp", True, "largest max - min weighted max usage over alive brokers of any tick",
        BALANCE, scale=100.0),
    *(Kpi(f"load_spread_{s}", f"Spread (max−min) {s}", "pp", True,
          f"max − min weighted max usage over alive brokers, {d}", DISTRIBUTION, scale=100.0) for s, d in _DIST.items()),
    Kpi("peak_usage", "Peak broker usage", "%", True,
        "highest weighted max usage of any alive broker at any tick", DISTRIBUTION, scale=100.0),
    *(Kpi(f"load_std_{s}", f"Std {s}", "pp", True, f"std of weighted max usage over alive brokers, {d}",
          DISTRIBUTION, scale=100.0) for s, d in _DIST.items()),
    *(Kpi(f"load_max_over_mean_{s}", f"Max/mean {s}", "ratio", True, f"max / mean weighted max usage, {d}",
          DISTRIBUTION) for s, d in _DIST.items()),
    Kpi("recovery_minutes", "Recovery after joins/leaves", "min", True,
        "minutes after each broker join/leave until the std is back to its level before, mean over events"),
    Kpi("cluster_events", "Cluster events", "", None, "broker joins/leaves seen"),
    Kpi("calibration_mape", "Calibration error (MAPE)", "%", True,
        "modelled vs observed CPU where ownership matches", scale=100.0),
    Kpi("duration_minutes", "Duration", "min", None, "ticks x tick length", BALANCE),
    Kpi("ticks", "Ticks", "", None, "leader refreshes replayed", DISTRIBUTION),
)

BY_NAME: dict[str, Kpi] = {k.metric: k for k in KPIS}


def kpi(name: str, where: str = "KPI") -> Kpi:
    """The registry entry ``name``; a UsageError naming the closest known KPIs otherwise."""
    if name in BY_NAME:
        return BY_NAME[name]
    close = difflib.get_close_matches(name, list(BY_NAME), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(BY_NAME)}"
    raise UsageError(f"{where}: unknown KPI {name!r}{hint}")


def format_number(kpi_: Kpi, shown: float) -> str:
    """A displayed value (already scaled) in the KPI's unit."""
    if kpi_.unit == "B/s":
        for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
            if abs(shown) >= scale:
                return f"{shown / scale:,.2f} {unit}"
        return f"{shown:,.0f} B/s"
    if kpi_.unit == "pp":
        return f"{shown:.2f} pp"
    if kpi_.unit == "%":
        return f"{shown:.2f} %"
    if kpi_.unit == "ratio":
        return f"{shown:.3f}"
    if kpi_.unit == "min":
        return f"{shown:,.1f} min"
    if kpi_.unit == "/h":
        return f"{shown:,.1f} /h"
    return f"{shown:,.0f}"


def format_value(kpi_: Kpi, value: float | None) -> str:
    """A stored value as shown (null: ``never`` / ``n/a``)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return kpi_.never
    return format_number(kpi_, float(value) * kpi_.scale)


def format_delta(kpi_: Kpi, value: float | None, base: float | None) -> str:
    """``value`` against ``base`` as a signed displayed difference (``+3``, ``−1.20 pp``, ``never``)."""
    if value is None or base is None:
        return "±0" if value is None and base is None else (f"was {kpi_.never}" if value is not None else
                                                            f"now {kpi_.never}")
    d = (value - base) * kpi_.scale
    if d == 0:
        return "±0"
    return ("+" if d > 0 else "−") + format_number(kpi_, abs(d))


def best_runs(kpi_: Kpi, values: Sequence[float | None]) -> set[int]:
    """Indexes of the best value(s) for ``kpi_`` (ties all best); none when fewer than two runs have a value,
    when every run has the same value, or when the KPI has no direction."""
    if kpi_.lower_is_better is None:
        return set()
    finite = [(i, float(v)) for i, v in enumerate(values) if v is not None and math.isfinite(float(v))]
    if len(finite) < 2 or len({v for _, v in finite}) == 1:
        return set()
    target = min(v for _, v in finite) if kpi_.lower_is_better else max(v for _, v in finite)
    return {i for i, v in finite if v == target}


def kpi_table_html(run_ids: Sequence[str], headers: Sequence[str], metrics: dict[str, dict[str, float | None]],
                   eligible: Sequence[bool] | None = None) -> str:
    """An HTML table: one row per KPI, one column per run; the best run per KPI among the ``eligible`` ones (runs
    not flagged by the verdict) is marked ``best``."""
    ok = list(eligible) if eligible is not None else [True] * len(run_ids)
    head = "".join(f"<th scope=\"col\">{html.escape(h)}</th>" for h in headers)
    rows = []
    for k in KPIS:
        values = [k.value(metrics.get(r, {})) for r in run_ids]
        best = best_runs(k, [v if ok[i] else None for i, v in enumerate(values)])
        cells = "".join(
            f"<td class=\"num{' best' if i in best else ''}\" data-metric=\"{k.metric}\">"
            f"{html.escape(format_value(k, v))}</td>"
            for i, v in enumerate(values)
        )
        title = html.escape(f"{k.definition} [{k.better} is better; {k.computed}]")
        rows.append(f"<tr><th scope=\"row\" title=\"{title}\">{html.escape(k.label)}</th>{cells}</tr>")
    return (
        "<table class=\"kpis\" id=\"kpi-table\"><thead><tr><th scope=\"col\">KPI</th>" + head + "</tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>"
    )
