"""The what-if against reality: a prediction (a closed loop of config A's recording under config B's broker.conf,
its load model calibrated on A only) next to B's real run (its audit), the noise band (B against B', the same
config run again on the same seeded traffic) and the decision at stake (real A against real B).

Targets (issue 33): the predicted ranking of A and B agrees with the real one on every KPI whose real difference
exceeds the noise; each count KPI is within the noise band or +-20 % of the real value, whichever is wider; the
spread curve is within the noise band for >= 80 % of the minutes. The noise measured on committed pairs is stored
as data (``conf/noise/*.yaml``, per KPI) and gives every what-if run its confidence band
(:func:`confidence_band`). Pure but for :func:`load_runs_kpis` (Spark, the lake's runs).

A closed loop draws Pulsar's random choices (``LeastResourceUsageWithWeight``'s ``ThreadLocalRandom`` among equally
good brokers) from the replay's seed, so one seed is one draw: the prediction runs several seeds of the same closed
loop (``replay --seeds 0-4``; PRED given as ``run1+run2+...``), reports each KPI as the seeds' median with their
range (:func:`over_seeds`), widens the band by half that range, ranks A and B by the median and says how many seeds
rank them so."""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from lbreplay.errors import EXIT_FAILURE, LbReplayError, UsageError
from lbreplay.paths import CONF_DIR
from lbreplay.report.kpis import BY_NAME, Kpi, format_value

#: the KPIs a prediction is judged on (issue 33 item 2), in display order
PREDICTED: tuple[str, ...] = ("unloads", "splits", "bundles_moved", "ping_pong_moves", "load_spread_mean",
                              "load_spread_p95", "load_spread_final", "peak_usage", "time_to_balance_minutes")
COUNTS = frozenset({"unloads", "splits", "bundles_moved", "ping_pong_moves"})
COUNT_TOLERANCE = 0.20  # a count within +-20 % of the real value (or the noise band, whichever is wider)
CURVE_SHARE = 0.80  # the spread curve within the band for >= 80 % of the minutes
DEFAULT_NOISE = CONF_DIR / "noise" / "whatif.yaml"
USAGE_UNITS = ("pp", "%", "ratio")  # KPIs read from the modelled usage: the load model's error widens their band


SEED_JOIN = "+"  # PRED as run1+run2+...: the same closed loop under several seeds


@dataclass(frozen=True)
class RunKpis:
    """One run as the comparison reads it: its KPIs (run_metrics' stored values) and its spread per minute; for a
    prediction over several seeds, their median with the seeds' own runs in ``seeds``."""

    name: str
    metrics: Mapping[str, float | None]
    curve: Sequence[float] = ()
    seed: int | None = None  # the replay's seed (runs.seed), when known
    seeds: tuple[RunKpis, ...] = ()  # the runs this one is the median of (:func:`over_seeds`)

    def seed_values(self, k: Kpi) -> tuple[float, ...]:
        """Each seed's value of ``k`` (those that have one; () for one run)."""
        return tuple(v for v in (k.value(s.metrics) for s in self.seeds) if v is not None)

    def curve_spread(self) -> list[float]:
        """Per minute, half the seeds' range of the spread (0 for one run)."""
        n = len(self.curve)
        if not self.seeds:
            return [0.0] * n
        return [(max(s.curve[m] for s in self.seeds) - min(s.curve[m] for s in self.seeds)) / 2 for m in range(n)]

    @property
    def seed_label(self) -> str:
        return seed_label(self.seeds or (self,))


def seed_label(runs: Sequence[RunKpis]) -> str:
    """Which seeds: ``seeds 0, 1, 2`` (``seed 0`` for one run, ``seed ?`` when unknown)."""
    names = ", ".join("?" if r.seed is None else str(r.seed) for r in runs)
    return ("seeds " if len(runs) > 1 else "seed ") + names


def _median(values: Sequence[float | None]) -> float | None:
    """The median, a missing value (a time to balance that is ``never``) ordered last; None when the middle is."""
    ordered = sorted(values, key=lambda v: (v is None or not math.isfinite(v), v or 0.0))
    n = len(ordered)
    middle = ordered[(n - 1) // 2: n // 2 + 1]
    if not middle or any(v is None or not math.isfinite(v) for v in middle):
        return None
    return sum(float(v) for v in middle if v is not None) / len(middle)


def over_seeds(runs: Sequence[RunKpis], name: str) -> RunKpis:
    """Several seeds of one closed loop as one prediction: each metric the seeds' median, the spread curve the
    per-minute median (over the minutes every seed has); the runs kept in ``seeds`` for their range."""
    if len(runs) == 1:
        return runs[0]
    keys = sorted({k for r in runs for k in r.metrics})
    metrics = {k: _median([r.metrics.get(k) for r in runs]) for k in keys}
    n = min(len(r.curve) for r in runs)
    curve = [_median([r.curve[m] for r in runs]) or 0.0 for m in range(n)]
    trimmed = tuple(RunKpis(r.name, r.metrics, list(r.curve[:n]), r.seed) for r in runs)
    return RunKpis(name, metrics, curve, None, trimmed)


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else abs(a - b)


@dataclass(frozen=True)
class KpiCheck:
    """One KPI: predicted B, real B, real B' (its twin: the noise) and real A (the other side of the decision);
    with real A' (A run again) the noise band is the wider of the two configs' |run 1 - run 2|."""

    kpi: Kpi
    predicted: float | None
    real: float | None
    twin: float | None
    base: float | None
    base_twin: float | None = None
    seeds: tuple[float, ...] = ()  # each seed's value when the prediction is their median

    @property
    def seed_range(self) -> tuple[float, float] | None:
        """The seeds' min and max (None: one seed)."""
        return (min(self.seeds), max(self.seeds)) if self.seeds else None

    @property
    def seed_spread(self) -> float:
        """Half the seeds' range: what the band around the median widens by (0 for one seed)."""
        return 0.0 if self.seed_range is None else (self.seed_range[1] - self.seed_range[0]) / 2

    @property
    def noise(self) -> float | None:
        gaps = [g for g in (_diff(self.real, self.twin), _diff(self.base, self.base_twin)) if g is not None]
        return max(gaps) if gaps else None

    @property
    def tolerance(self) -> float | None:
        """The noise band (for a count, at least +-20 % of the real value), widened by the seeds' spread."""
        if self.noise is None:
            return None
        share = COUNT_TOLERANCE * abs(self.real or 0.0) if self.kpi.metric in COUNTS else 0.0
        return max(self.noise, share) + self.seed_spread

    @property
    def within(self) -> bool | None:
        error, tol = _diff(self.predicted, self.real), self.tolerance
        return None if error is None or tol is None else error <= tol + 1e-12

    @property
    def decisive(self) -> bool:
        """Does real B differ from real A by more than the noise (so the ranking must agree)?"""
        gap, noise = _diff(self.real, self.base), self.noise
        return gap is not None and noise is not None and gap > noise + 1e-12

    def _same_side(self, value: float) -> bool:
        assert self.real is not None and self.base is not None
        return (value - self.base > 0) == (self.real - self.base > 0) and value != self.base

    @property
    def ranking_agrees(self) -> bool | None:
        """The prediction (the seeds' median) on real B's side of real A (None: the real difference is within the
        noise, or a value is missing)."""
        if not self.decisive or self.predicted is None or self.base is None or self.real is None:
            return None
        return self._same_side(self.predicted)

    @property
    def seeds_agreeing(self) -> int | None:
        """How many seeds rank B against A as reality does (None: one seed, or no ranking to check)."""
        if self.ranking_agrees is None or not self.seeds:
            return None
        return sum(1 for v in self.seeds if self._same_side(v))

    @property
    def passed(self) -> bool | None:
        """The KPI's targets: the ranking where decisive; for a count, also within its tolerance."""
        checks = [c for c in (self.ranking_agrees, self.within if self.kpi.metric in COUNTS else None) if c is not None]
        return None if not checks else all(checks)


@dataclass(frozen=True)
class Prediction:
    predicted: RunKpis
    real: RunKpis
    twin: RunKpis
    base: RunKpis
    checks: tuple[KpiCheck, ...]
    curve_minutes: int
    curve_within: int
    base_twin: RunKpis | None = None

    @property
    def curve_share(self) -> float | None:
        return self.curve_within / self.curve_minutes if self.curve_minutes else None

    @property
    def misses(self) -> list[str]:
        """Each missed target, one line naming the KPI and by how much."""
        out = [f"{c.kpi.metric}: {miss_reason(c)}" for c in self.checks if c.passed is False]
        share = self.curve_share
        if share is not None and share < CURVE_SHARE:
            out.append(f"spread curve: within the band {share:.0%} of {self.curve_minutes} minutes (target "
                       f">= {CURVE_SHARE:.0%})")
        return out

    @property
    def passed(self) -> bool:
        return not self.misses


def miss_reason(c: KpiCheck) -> str:
    """What the miss is: the ranking or the count, with the numbers."""
    parts = []
    seeds = "" if c.seed_range is None else f" (seeds {seed_range_text(c)})"
    if c.ranking_agrees is False:
        parts.append(f"ranking: real B {format_value(c.kpi, c.real)} vs real A {format_value(c.kpi, c.base)}, "
                     f"predicted B {format_value(c.kpi, c.predicted)}{seeds}")
    if c.kpi.metric in COUNTS and c.within is False:
        parts.append(f"predicted {format_value(c.kpi, c.predicted)}{seeds} vs real {format_value(c.kpi, c.real)} "
                     f"beyond +-{format_value(c.kpi, c.tolerance)}")
    return "; ".join(parts)


def seed_range_text(c: KpiCheck) -> str:
    """The seeds' min-max of a KPI, displayed (``-`` for one seed)."""
    if c.seed_range is None:
        return "-"
    return f"{format_value(c.kpi, c.seed_range[0])}–{format_value(c.kpi, c.seed_range[1])}"


def curve_band(real: Sequence[float], twin: Sequence[float]) -> list[float]:
    """The per-minute noise band: |B - B'| each minute, at least the median of those (one pair of runs is a thin
    sample of the noise at any one minute)."""
    n = min(len(real), len(twin))
    gaps = sorted(abs(real[m] - twin[m]) for m in range(n))
    floor = gaps[n // 2] if n else 0.0
    return [max(abs(real[m] - twin[m]), floor) for m in range(n)]


def compare_prediction(predicted: RunKpis, real: RunKpis, twin: RunKpis, base: RunKpis,
                       base_twin: RunKpis | None = None) -> Prediction:
    """Predicted B against real B, with the noise band of B against B' (and of A against A' when given: the wider)
    and the decision of A against B. A prediction over several seeds (:func:`over_seeds`) is judged by its
    median, each band widened by half the seeds' range."""
    def v(run: RunKpis | None, m: str) -> float | None:
        return None if run is None else BY_NAME[m].value(run.metrics)

    checks = tuple(KpiCheck(BY_NAME[m], v(predicted, m), v(real, m), v(twin, m), v(base, m), v(base_twin, m),
                            predicted.seed_values(BY_NAME[m])) for m in PREDICTED)
    band = curve_band(real.curve, twin.curve)
    n = min(len(band), len(predicted.curve))
    spread = predicted.curve_spread()
    within = sum(1 for m in range(n) if abs(predicted.curve[m] - real.curve[m]) <= band[m] + spread[m] + 1e-12)
    return Prediction(predicted, real, twin, base, checks, n, within, base_twin)


def _mark(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def _ranking_mark(c: KpiCheck) -> str:
    """``yes`` / ``NO``, with how many seeds agree (``yes, 3/5 seeds``)."""
    agreeing = c.seeds_agreeing
    return _mark(c.ranking_agrees) + ("" if agreeing is None else f", {agreeing}/{len(c.seeds)} seeds")


def prediction_rows(p: Prediction) -> list[list[str]]:
    """The table: one row per KPI (header first), displayed values."""
    head = ["KPI", "predicted B" + (" (median)" if p.predicted.seeds else ""), "seeds min–max", "real B", "real B'",
            "noise |B-B'|", "tolerance", "within", "real A", "ranking agrees"]
    rows = [head]
    for c in p.checks:
        k = c.kpi
        rows.append([k.label, format_value(k, c.predicted), seed_range_text(c), format_value(k, c.real),
                     format_value(k, c.twin), format_value(k, c.noise), format_value(k, c.tolerance), _mark(c.within),
                     format_value(k, c.base), _ranking_mark(c)])
    return rows


def seeds_note(p: Prediction) -> str:
    """Which seeds the prediction ran, and what that means for its values and bands."""
    if p.predicted.seeds:
        return (f"{p.predicted.seed_label} of the same closed loop: the predicted value is their median, each band "
                f"widened by half their range; the ranking is the median's (how many seeds agree in brackets)")
    return (f"one draw of Pulsar's random choices ({p.predicted.seed_label}): another seed moves other bundles; "
            f"`replay --seeds 0-4` and PRED as run1+run2+... give the seeds' median and range")


def band_text(p: Prediction) -> str:
    """Each predicted KPI with its confidence band (:func:`confidence_band`: this experiment's noise, the load
    model's error, the seeds' spread)."""
    mape = p.predicted.metrics.get("calibration_mape")
    noise = {c.kpi.metric: c.noise for c in p.checks if c.noise is not None}
    out = []
    for c in p.checks:
        band = confidence_band(c.kpi, c.predicted, noise, mape, c.seed_spread)
        out.append(f"{c.kpi.label.lower()} {format_value(c.kpi, c.predicted)}"
                   + ("" if band is None else f" ± {format_value(c.kpi, band)}"))
    return "; ".join(out)


def prediction_text(p: Prediction) -> str:
    """The comparison for a terminal: the runs, the table, the spread curve's share and the verdict."""
    lines = [f"Prediction: {p.predicted.name} (closed loop of A's recording under B's broker.conf)",
             f"  {seeds_note(p)}",
             f"  real B: {p.real.name}; noise band: {p.twin.name} (B run again)"
             + (f" and {p.base_twin.name} (A run again)" if p.base_twin else "") + f"; decision: {p.base.name} (real A)"]
    rows = prediction_rows(p)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    share = p.curve_share
    lines.append(f"Spread curve: predicted within the noise band {'n/a' if share is None else f'{share:.0%}'} of "
                 f"{p.curve_minutes} minutes (target >= {CURVE_SHARE:.0%})")
    lines.append(f"Confidence band (noise + load model error + seeds' spread): {band_text(p)}")
    lines.append("Targets: " + ("met" if p.passed else "missed — " + "; ".join(p.misses)))
    return "\n".join(lines)


def _polyline(curve: Sequence[float], top: float, colour: str, dash: str = "") -> str:
    if not curve:
        return ""
    step = 560.0 / max(len(curve) - 1, 1)
    pts = " ".join(f"{30 + i * step:.1f},{190 - 170 * v / top:.1f}" for i, v in enumerate(curve))
    extra = f" stroke-dasharray=\"{dash}\"" if dash else ""
    return f"<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{extra} points=\"{pts}\"/>"


def prediction_html(p: Prediction) -> str:
    """The report's section: the table and the per-minute spread curves (inline SVG: no script needed)."""
    rows = prediction_rows(p)
    head = "".join(f"<th scope=\"col\">{html.escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    curves = [(p.predicted, "#d62728", ""), (p.real, "#1f77b4", ""), (p.twin, "#1f77b4", "4 3"),
              (p.base, "#7f7f7f", "2 2")]
    top = max([v for r, _, _ in curves for v in r.curve] + [1e-9])
    lines = "".join(_polyline(r.curve, top, colour, dash) for r, colour, dash in curves)
    legend = " · ".join(f"<span style=\"color:{c}\">{html.escape(label)}</span>" for label, c in
                        (("predicted B", "#d62728"), ("real B (solid) / B' (dashed)", "#1f77b4"),
                         ("real A (dotted)", "#7f7f7f")))
    share = "n/a" if p.curve_share is None else f"{p.curve_share:.0%}"
    verdict = "met" if p.passed else "missed: " + "; ".join(p.misses)
    return (f"<p class=\"meta\">{html.escape(p.predicted.name)} predicts {html.escape(p.real.name)}; the noise band is "
            f"{html.escape(p.twin.name)} (the same config run again), the decision is against "
            f"{html.escape(p.base.name)}.</p>"
            f"<p class=\"meta\" id=\"prediction-seeds\">{html.escape(seeds_note(p))}.</p>"
            f"<table id=\"prediction-table\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<svg id=\"prediction-curve\" viewBox=\"0 0 600 200\" width=\"600\" height=\"200\" role=\"img\" "
            f"aria-label=\"spread per minute\">{lines}</svg><p class=\"meta\">Spread (max − min usage) per minute, "
            f"0 to {100 * top:.1f} pp: {legend}. Within the band {share} of {p.curve_minutes} minutes.</p>"
            f"<p class=\"meta\" id=\"prediction-band\">Confidence band (noise + load model error + seeds' spread): "
            f"{html.escape(band_text(p))}</p>"
            f"<p id=\"prediction-verdict\">Targets {html.escape(verdict)}</p>")


# ------------------------------------------------------------------------------------ the noise band as data
#: the noise file's sections: the real runs' noise per KPI, and half the seeds' range of one prediction per KPI
NOISE, SEED_SPREAD = "kpis", "seed_spread"


def noise_of(real: RunKpis, twin: RunKpis, source: str, predicted: RunKpis | None = None) -> dict[str, Any]:
    """The noise measured on a pair of real runs of one config: per KPI |B - B'| (stored units), as stored; with a
    prediction over several seeds, also half their range per KPI (``seed_spread``)."""
    kpis = {m: _diff(BY_NAME[m].value(real.metrics), BY_NAME[m].value(twin.metrics)) for m in PREDICTED}
    doc: dict[str, Any] = {"source": source, NOISE: {m: v for m, v in kpis.items() if v is not None}}
    if predicted is not None and predicted.seeds:
        values = {m: predicted.seed_values(BY_NAME[m]) for m in PREDICTED}
        doc["source"] += f"; seed_spread: {predicted.seed_label} of {predicted.name}"
        doc[SEED_SPREAD] = {m: (max(v) - min(v)) / 2 for m, v in values.items() if v}
    return doc


def load_noise(path: str | Path | None = None, section: str = NOISE) -> dict[str, float]:
    """Per-KPI noise (stored units) from ``path`` (default ``conf/noise/whatif.yaml``), or with ``section=
    SEED_SPREAD`` the seeds' spread measured there; {} when the default is absent (no measurement yet). Unknown KPI
    names are a usage error naming the file."""
    file = Path(path) if path is not None else DEFAULT_NOISE
    if not file.is_file():
        if path is not None:
            raise UsageError(f"--noise {path}: no such file")
        return {}
    doc = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    out: dict[str, float] = {}
    for name, value in (doc.get(section) or {}).items():
        if name not in BY_NAME or not isinstance(value, (int, float)):
            raise UsageError(f"{file.name}: {section}.{name}: expected a known KPI and a number")
        out[name] = float(value)
    return out


def confidence_band(k: Kpi, value: float | None, noise: Mapping[str, float], mape: float | None,
                    seed_spread: float = 0.0) -> float | None:
    """A what-if KPI's +- band (stored units): the measured noise of two real runs of one config, plus, for a KPI
    read from the modelled usage, the load model's error on the recording (calibration MAPE x the value), plus half
    the range of the prediction's seeds (:func:`over_seeds`; 0 for one seed)."""
    if value is None:
        return None
    model = (mape or 0.0) * abs(value) if k.unit in USAGE_UNITS else 0.0
    base = noise.get(k.metric)
    if base is None and not model and not seed_spread:
        return None
    return (base or 0.0) + model + seed_spread


def what_if_notes(metrics: Mapping[str, float | None], shown: Sequence[Kpi], noise: Mapping[str, float],
                  seed_spread: Mapping[str, float] | None = None) -> list[str]:
    """What a what-if (closed-loop) run cannot know, and its KPIs (the predicted ones, then ``shown``) with their
    confidence band; one run is one seed, so its band adds ``seed_spread`` (default: the seeds' spread measured in
    ``conf/noise/whatif.yaml``)."""
    spread = load_noise(section=SEED_SPREAD) if seed_spread is None else seed_spread
    mape = metrics.get("calibration_mape")
    fit = "n/a" if mape is None or not math.isfinite(mape) else f"{mape:.1%}"
    bands = []
    for k in dict.fromkeys([*(BY_NAME[m] for m in PREDICTED), *shown]):
        v = k.value(metrics)
        if v is None and k.metric not in metrics:
            continue
        b = confidence_band(k, v, noise, mape, spread.get(k.metric, 0.0))
        bands.append(f"{k.label.lower()} {format_value(k, v)}" + ("" if b is None else f" ± {format_value(k, b)}"))
    measured = [m for m, on in (("the measured noise of two real runs of one config", noise),
                                ("the seeds' spread of one prediction", spread)) if on]
    source = " and ".join(measured) + " (conf/noise) plus the load model's error" if measured \
        else "the load model's error only (no noise measurement: a real run of one config repeats only so closely)"
    seeds = ("the band adds the seeds' spread measured on the committed what-if pair" if spread else
             "the band below leaves the seeds' spread out")
    return [
        "traffic replayed as recorded: the clients' rates follow their bundles, they do not react to the decisions",
        f"load model: broker usage from the traffic it holds, calibrated on the recording (cpu error {fit} MAPE)",
        "lookups not recorded: clients reconnect at once and new topics arrive as recorded",
        f"one seed of Pulsar's random choices (a broker among equally good ones): another seed moves other bundles; "
        f"{seeds}; `replay --seeds 0-4` and `prediction` measure this run's own",
        f"confidence band ({source}): " + "; ".join(bands),
    ]


def split_seeds(entries: Sequence[str]) -> list[str]:
    """Every run id of ``--runs`` / ``--prediction`` entries, a seeds' ``run1+run2`` entry split."""
    return [r.strip() for e in entries for r in e.split(SEED_JOIN) if r.strip()]


def _one_closed_loop(runs: Sequence[Any]) -> None:
    """The runs joined by ``+`` are one closed loop under distinct seeds (same cluster, config and options)."""
    def key(r: Any) -> tuple[str, str, str, str]:
        opts = {k: v for k, v in r.replay_options.items() if k != "seed"}
        return (r.cluster, r.mode, json.dumps(r.config, sort_keys=True), json.dumps(opts, sort_keys=True, default=str))

    first = runs[0]
    for r in runs[1:]:
        if key(r) != key(first):
            raise UsageError(f"--runs: {first.run_id}{SEED_JOIN}{r.run_id}: not the same closed loop under another "
                             f"seed (cluster, mode, config or replay options differ)")
    seeds = [r.seed for r in runs]
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--runs: {SEED_JOIN.join(r.run_id for r in runs)}: a seed repeats ({seeds})")


def load_runs_kpis(spark: Any, run_ids: Sequence[str], names: Sequence[str], database: str) -> list[RunKpis]:
    """The runs' KPIs (run_metrics) and spread per minute (broker_ticks over alive brokers) from the lake; an
    entry ``run1+run2+...`` (one closed loop under several seeds) is their median (:func:`over_seeds`)."""
    from lbreplay.report.frames import load_run_metrics, load_runs

    flat = split_seeds(run_ids)
    infos = {i.run_id: i for i in load_runs(spark, flat, database)}  # known and succeeded, else a one-line error
    metrics = load_run_metrics(spark, flat, database)
    ids = ", ".join("'" + r.replace("'", "''") + "'" for r in flat)
    per_tick = spark.sql(
        f"SELECT run_id, unix_millis(ts) AS ms, max(weighted_max_usage) - min(weighted_max_usage) AS spread "
        f"FROM {database}.broker_ticks WHERE run_id IN ({ids}) AND alive GROUP BY run_id, ts").collect()
    from lbreplay.replay.metrics import spread_per_minute

    def one(run_id: str, name: str) -> RunKpis:
        ticks = sorted((int(r["ms"]), float(r["spread"])) for r in per_tick if r["run_id"] == run_id)
        curve = spread_per_minute([t for t, _ in ticks], [s for _, s in ticks])
        return RunKpis(f"{name} ({run_id})", metrics[run_id], curve, infos[run_id].seed)

    out = []
    for entry, name in zip(run_ids, names):
        parts = split_seeds([entry])
        if len(parts) == 1:
            out.append(one(parts[0], name))
            continue
        _one_closed_loop([infos[r] for r in parts])
        runs = [one(r, name) for r in parts]
        out.append(over_seeds(runs, f"{name} ({seed_label(runs)}: {', '.join(parts)})"))
    return out


class PredictionMissed(LbReplayError):
    """A prediction missed a target (exit 1)."""

    exit_code = EXIT_FAILURE


#: the runs of a prediction check, in the order ``--prediction`` takes them (the fifth, A run again, optional)
PREDICTION_ROLES: tuple[str, ...] = ("predicted B", "real B", "real B'", "real A", "real A'")


def check_prediction_runs(runs: Sequence[str] | None) -> None:
    """``--prediction`` names four or five runs: the closed loop predicting B (or its seeds' runs joined by ``+``),
    B's audit, B''s audit, A's audit (and A''s)."""
    if runs is None:
        return
    if len(runs) not in (4, 5):
        raise UsageError(f"--prediction: expected 4 or 5 run ids ({', '.join(PREDICTION_ROLES)}), got {len(runs)}")
    joined = [r for r in runs[1:] if SEED_JOIN in r]
    if joined:
        raise UsageError(f"--prediction: {joined[0]}: only PRED (the first) joins several seeds' runs with "
                         f"'{SEED_JOIN}'")
    parts = runs[0].split(SEED_JOIN)
    if any(not p.strip() for p in parts) or len(set(parts)) != len(parts):
        raise UsageError(f"--prediction: {runs[0]}: expected run1{SEED_JOIN}run2{SEED_JOIN}... (distinct, none empty)")


def prediction_command(runs: list[str], lake: str, master: str | None = None, save_noise: str | None = None) -> bool:
    """CLI ``lbreplay prediction --runs PRED,B,B2,A``: print the comparison; with ``--save-noise`` write the noise
    band measured on B and B' (the file the what-if runs' confidence bands read). True when the targets are met."""
    from lbreplay.lake.tables import DATABASE
    from lbreplay.lake.views import ensure_views
    from lbreplay.spark import get_spark, lake_path

    check_prediction_runs(runs)
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    ensure_views(spark, lake_abs)
    p = compare_prediction(*load_runs_kpis(spark, runs, PREDICTION_ROLES, DATABASE))
    print(prediction_text(p))
    if save_noise:
        out = Path(save_noise)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        doc = noise_of(p.real, p.twin, f"{p.real.name} vs {p.twin.name}", p.predicted)
        tmp.write_text(yaml.safe_dump(doc, sort_keys=True), encoding="utf-8")
        tmp.replace(out)
        print(f"noise band written: {out}")
    return p.passed
