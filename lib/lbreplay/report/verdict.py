"""The verdict over compared runs: a baseline, every candidate as deltas against it ranked by an objective, the
runs that must not be recommended flagged, and the recommendation as a ``broker.conf`` diff. Pure (no Spark):
``report.compare`` loads the runs, the report and ``compare`` / ``gate`` render this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lbreplay.errors import UsageError
from lbreplay.report.balance import NON_PULSAR_KEYS, BalanceTarget, balance_target, modelled_keys
from lbreplay.report.kpis import BY_NAME, format_delta, format_value
from lbreplay.report.objectives import Objective

DID_NOTHING = "did nothing"
NEVER_BALANCED = "never balanced"


@dataclass
class RunView:
    run_id: str
    mode: str
    config: dict[str, Any]
    metrics: dict[str, float | None]
    name: str = ""
    target: BalanceTarget | None = None
    given_name: str = ""  # runs.replay_options' sweep ``label`` or ``name``, when the run has one

    def __post_init__(self) -> None:
        if self.target is None:
            self.target = balance_target(self.config)


@dataclass
class Ranked:
    run: RunView
    score: float | None
    flags: list[str]
    baseline: bool = False

    @property
    def eligible(self) -> bool:
        return not self.flags and not self.baseline


@dataclass
class Verdict:
    objective: Objective
    baseline: RunView
    baseline_note: str
    ranked: list[Ranked]  # best first; the baseline among them
    recommended: Ranked | None
    sentence: str
    diff: list[str] = field(default_factory=list)

    def row(self, run_id: str) -> Ranked:
        return next(r for r in self.ranked if r.run.run_id == run_id)


def _conf_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def effective(config: Mapping[str, Any]) -> dict[str, Any]:
    """The broker.conf keys a run used: its keys over the defaults of its ``pulsarVersion``."""
    from lbreplay.kernel.config import PulsarConfig

    return PulsarConfig.resolve(modelled_keys(config)).to_dict()


NOT_BROKER_CONF = NON_PULSAR_KEYS | {"pulsarVersion"}  # lbreplay's choice of Pulsar line, not a broker.conf key


def conf_diff(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[str]:
    """``-key=old`` / ``+key=new`` lines for the keys given in either config whose effective value differs (keys
    lbreplay does not model: as given; a side without the key has no line), sorted by key."""
    eb, ec = effective(base), effective(cand)
    out = []
    for k in sorted({k for k in (*base, *cand) if k not in NOT_BROKER_CONF}):
        old, new = (eb[k], ec[k]) if k in eb else (base.get(k), cand.get(k))
        if old != new:
            out += [f"-{k}={_conf_value(old)}"] if old is not None else []
            out += [f"+{k}={_conf_value(new)}"] if new is not None else []
    return out


def _short(v: Any) -> str:
    s = _conf_value(v)
    return s.rsplit(".", 1)[-1] if s.startswith("org.apache.") else s


def run_names(runs: Sequence[RunView], baseline: RunView) -> None:
    """Each run's human name: "observed" for an audit; else its sweep point's ``label`` or its config's ``name``
    (runs.replay_options, else runs.config), else the keys that differ from the baseline's (``key=value``), else
    its run id; duplicates get their run id."""
    eb = effective(baseline.config)
    for r in runs:
        given = r.given_name or r.config.get("label") or r.config.get("name")
        if r.mode == "observed":
            r.name = f"observed ({given})" if given else "observed"
        elif given:
            r.name = str(given)
        else:
            ec = effective(r.config)
            keys = sorted(k for k in r.config if k not in NON_PULSAR_KEYS and k in eb and eb[k] != ec[k])
            r.name = ", ".join(f"{k}={_short(ec[k])}" for k in keys) or r.run_id
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.name] = seen.get(r.name, 0) + 1
    for r in runs:
        if seen[r.name] > 1 and r.name != r.run_id:
            r.name = f"{r.name} [{r.run_id}]"


def flags(run: RunView, objective: Objective) -> list[str]:
    """Why a run must not be recommended: never balanced, did nothing while unbalanced, a broken limit."""
    m = run.metrics
    out = []
    if m.get("never_balanced") == 1.0 or ("never_balanced" in m and m.get("time_to_balance_minutes") is None):
        out.append(NEVER_BALANCED)
    if (m.get("unbalanced_ticks") or 0) > 0 and not m.get("unloads") and not m.get("splits"):
        out.append(DID_NOTHING)
    out += [b for b in (lim.check(m) for lim in objective.limits) if b]
    return out


def choose_baseline(runs: Sequence[RunView], explicit: str | None) -> tuple[RunView, str]:
    """``--baseline`` if given, else the observed run (an audit of the same cluster and window), else the first
    run, said so."""
    if explicit:
        match = [r for r in runs if r.run_id == explicit]
        if not match:
            raise UsageError(f"--baseline: {explicit} is not among --runs ({', '.join(r.run_id for r in runs)})")
        return match[0], "given with --baseline"
    observed = [r for r in runs if r.mode == "observed"]
    if observed:
        return observed[0], "the observed run (audit) of the same history"
    return runs[0], "assumed the first run: no observed run of this history; pass --baseline RUN"


def build_verdict(runs: Sequence[RunView], objective: Objective, baseline_id: str | None = None,
                  baseline_note: str | None = None) -> Verdict:
    """Rank every run by ``objective`` (eligible candidates first), flag the ones never to recommend, and
    recommend the best eligible candidate that scores better than the baseline."""
    if not runs:
        raise UsageError("--runs: give at least one run id")
    base, note = choose_baseline(runs, baseline_id)
    run_names(runs, base)
    rows = [Ranked(r, objective.score(r.metrics), flags(r, objective), r is base) for r in runs]
    inf = float("inf")
    rows.sort(key=lambda x: (not x.eligible and not x.baseline, bool(x.flags),
                             x.score if x.score is not None else inf, x.run.run_id))
    base_row = next(x for x in rows if x.baseline)
    best = next((x for x in rows if x.eligible), None)
    base_score = base_row.score if base_row.score is not None and not base_row.flags else inf
    recommended = best if best is not None and (best.score if best.score is not None else inf) < base_score else None
    verdict = Verdict(objective, base, baseline_note or note, rows, recommended, "")
    verdict.sentence = _sentence(verdict, base_row, best)
    if recommended is not None:
        verdict.diff = conf_diff(base.config, recommended.run.config)
    return verdict


def _kpi_change(name: str, base: RunView, cand: RunView) -> str:
    k = BY_NAME[name]
    b, c = k.value(base.metrics), k.value(cand.metrics)
    return f"{k.label.lower()} {format_value(k, b)} → {format_value(k, c)}"


def _sentence(v: Verdict, base_row: Ranked, best: Ranked | None) -> str:
    b = v.baseline
    if v.recommended is not None:
        c = v.recommended.run
        changes = ", ".join(_kpi_change(t.kpi.metric, b, c) for t in v.objective.terms[:2])
        return f"Recommended: {c.name} over the baseline {b.name} on the {v.objective.name} objective ({changes})."
    if best is None:
        why = sorted({f.split(" broken")[0] for x in v.ranked if not x.baseline for f in x.flags})
        return f"No recommendation: every candidate is flagged ({', '.join(why)}); keep the baseline {b.name}."
    return (f"Keep the baseline {b.name}: no unflagged candidate scores better on the {v.objective.name} objective "
            f"(best: {best.run.name}).")


def predicted_changes(v: Verdict) -> list[str]:
    """The recommended run's KPIs against the baseline's (``objective.show``)."""
    if v.recommended is None:
        return []
    c = v.recommended.run
    out = []
    for k in v.objective.show:
        b_val, c_val = k.value(v.baseline.metrics), k.value(c.metrics)
        out.append(f"{k.label}: {format_value(k, b_val)} → {format_value(k, c_val)} ({format_delta(k, c_val, b_val)})")
    return out
