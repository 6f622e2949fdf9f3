"""``lbreplay compare --runs A,B,C``: the verdict as text for terminals and CI (a compact table, the flags, the
recommendation and its ``broker.conf`` diff, the predicted KPI changes and the evidence)."""

from __future__ import annotations

from typing import Any

from lbreplay.lake.tables import DATABASE
from lbreplay.report.kpis import format_delta, format_value
from lbreplay.report.objectives import DEFAULT_OBJECTIVE, load_objective, parse_limit
from lbreplay.report.verdict import RunView, Verdict, build_verdict, choose_baseline, predicted_changes


def load_views(spark: Any, run_ids: list[str], database: str = DATABASE) -> list[RunView]:
    """The runs (checked: known, succeeded) with their run_metrics, in the order given."""
    from lbreplay.report.frames import load_run_metrics, load_runs

    infos = load_runs(spark, run_ids, database)
    metrics = load_run_metrics(spark, run_ids, database)
    return [RunView(i.run_id, i.mode, i.config, metrics[i.run_id], given_name=i.given_name) for i in infos]


def observed_twin(spark: Any, run_ids: list[str], database: str = DATABASE) -> str | None:
    """An audit (mode observed) of the same cluster, inputs and window as the given runs, newest first; None
    when the runs do not share one history or no such audit succeeded."""
    ids = ", ".join("'" + r.replace("'", "''") + "'" for r in run_ids)
    keys = spark.sql(
        f"SELECT DISTINCT cluster, to_json(input_versions) AS inputs, get_json_object(replay_options, '$.window') AS w "
        f"FROM {database}.runs WHERE run_id IN ({ids})").collect()
    if len(keys) != 1:
        return None
    k = keys[0]
    window = "IS NULL" if k["w"] is None else "= '" + k["w"].replace("'", "''") + "'"
    cluster = k["cluster"].replace("'", "''")
    inputs = (k["inputs"] or "").replace("'", "''")
    rows = spark.sql(
        f"SELECT run_id FROM {database}.runs WHERE status = 'succeeded' AND mode = 'observed' "
        f"AND cluster = '{cluster}' AND to_json(input_versions) = '{inputs}' "
        f"AND get_json_object(replay_options, '$.window') {window} ORDER BY finished_at DESC, run_id LIMIT 1").collect()
    return rows[0]["run_id"] if rows else None


def verdict_for(spark: Any, run_ids: list[str], baseline: str | None = None, objective: str = DEFAULT_OBJECTIVE,
                limits: list[str] | None = None, database: str = DATABASE) -> Verdict:
    """Load the runs (plus the observed audit of their history when no baseline is given and none is among
    them) and build the verdict."""
    obj = load_objective(objective).with_limits([parse_limit(s) for s in limits or []])
    ids = list(dict.fromkeys(run_ids))
    note = None
    if baseline is not None and baseline.endswith(".conf"):
        baseline, note = conf_baseline(load_views(spark, ids, database), baseline)
    if baseline is None:
        twin = observed_twin(spark, ids, database)
        if twin is not None and twin not in ids:
            ids, baseline, note = [twin, *ids], twin, "the observed run (audit) of the same cluster, inputs and window"
    elif baseline not in ids:
        ids = [baseline, *ids]
    views = load_views(spark, ids, database)
    base, chosen = choose_baseline(views, baseline)
    judge_by(spark, views, base.config, database)
    return build_verdict(views, obj, base.run_id, note or chosen)


def conf_baseline(views: list[RunView], broker_conf: str) -> tuple[str, str]:
    """(run id, note) of the run whose effective config equals ``broker_conf``'s (the cluster's own)."""
    from lbreplay.errors import UsageError
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.report.verdict import effective

    wanted = effective(resolve_run_config(None, broker_conf)[0])
    match = [v for v in views if effective(v.config) == wanted]
    if not match:
        raise UsageError(f"--baseline {broker_conf}: no run among --runs replays this broker.conf's load-balancer keys; "
                         "replay it first (lbreplay replay --broker-conf) or pass a run id")
    return match[0].run_id, f"the run whose config equals {broker_conf}"


JUDGED = ("time_to_balance_minutes", "never_balanced", "unbalanced_ticks")


def judge_by(spark: Any, views: list[RunView], config: dict[str, Any], database: str = DATABASE) -> None:
    """Every run's balance KPIs (:data:`JUDGED`) against one target, the one ``config`` (the baseline's) states,
    from the runs' ``broker_ticks``: a candidate cannot balance by loosening its own target (run_metrics keep each
    run's own-target figures)."""
    from lbreplay.report.balance import balance_metrics, balance_target, targets_frame

    ids = ", ".join("'" + v.run_id.replace("'", "''") + "'" for v in views)
    bt = spark.table(f"{database}.broker_ticks").where(f"run_id IN ({ids})")
    by_id = {v.run_id: v for v in views}
    for row in balance_metrics(bt, targets_frame(spark, {v.run_id: config for v in views})).collect():
        if row["metric"] in JUDGED:
            by_id[row["run_id"]].metrics[row["metric"]] = row["value"]
    target = balance_target(config)
    for v in views:
        v.target = target


MAX_NAME = 48  # characters of a run's name in the table (the verdict line and the diff show it whole)


def _cell(text: str, width: int) -> str:
    return text[: width - 1] + "…" if len(text) > width else text.ljust(width)


def verdict_text(v: Verdict) -> str:
    """The verdict for a terminal: objective, baseline, ranked table with deltas, flags, recommendation, diff."""
    o = v.objective
    lines = [f"Objective {o.name}: {o.description}", f"  {o.formula()}"]
    if o.limits:
        lines.append("  limits: " + ", ".join(lim.text for lim in o.limits))
    lines.append(f"Baseline: {v.baseline.name} ({v.baseline.run_id}, {v.baseline.mode}) — {v.baseline_note}")
    target = v.baseline.target.describe() if v.baseline.target else "?"
    lines.append(f"  balance target (the baseline's, for every run): {target}")
    head = ["#", "run", "score"] + [k.label.lower() for k in o.show] + ["flags"]
    rows = []
    for i, r in enumerate(v.ranked, 1):
        b = v.baseline.metrics
        cells = [k_cell(k, r.run.metrics, b, r.baseline) for k in o.show]
        score = "-" if r.score is None else f"{r.score:.2f}"
        tag = "baseline" if r.baseline else ("recommended" if v.recommended is r else "")
        rows.append([str(i), r.run.name, score, *cells, "; ".join([*([tag] if tag else []), *r.flags])])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    widths[1] = min(widths[1], MAX_NAME)
    for row in [head, *rows]:
        lines.append("  ".join(_cell(c, w) for c, w in zip(row, widths)).rstrip())
    lines.append(f"Verdict: {v.sentence}")
    lines += what_if_text(v)
    if v.recommended is not None:
        lines.append("broker.conf diff against the baseline:")
        lines += [f"  {d}" for d in v.diff] or ["  (no key differs)"]
        lines.append("Predicted changes:")
        lines += [f"  {c}" for c in predicted_changes(v)]
        lines.append("Evidence: " + evidence_text(v))
    return "\n".join(lines)


def what_if_text(v: Verdict, noise: dict[str, float] | None = None) -> list[str]:
    """Each what-if (closed-loop) run's assumptions and confidence band (:func:`prediction.what_if_notes`)."""
    from lbreplay.report.prediction import load_noise, what_if_notes

    runs = [r.run for r in v.ranked if r.run.mode == "closed-loop"]
    noise = noise if noise is not None else (load_noise() if runs else {})
    out = []
    for run in runs:
        named = run.name if run.name == run.run_id else f"{run.name} ({run.run_id})"
        out.append(f"What-if {named} is a prediction, not a measurement:")
        out += [f"  - {n}" for n in what_if_notes(run.metrics, v.objective.show, noise)]
    return out


def k_cell(k: Any, m: dict[str, float | None], base: dict[str, float | None], is_base: bool) -> str:
    value = k.value(m)
    if is_base:
        return format_value(k, value)
    return f"{format_value(k, value)} ({format_delta(k, value, k.value(base))})"


def evidence_text(v: Verdict) -> str:
    """Where the recommendation comes from: when the run balanced for good and the decisions before."""
    r = v.recommended
    if r is None:
        return ""
    ttb = r.run.metrics.get("time_to_balance_minutes")
    moved = r.run.metrics.get("bundles_moved") or 0
    return (f"{r.run.name} ({r.run.run_id}) stays balanced from minute {ttb:.1f} to the end; {moved:.0f} bundle(s) "
            f"moved (the report's decision timeline lists each: lbreplay report --runs "
            f"{v.baseline.run_id},{r.run.run_id})")


def compare_command(runs: list[str], baseline: str | None, objective: str, limits: list[str], lake: str,
                    master: str | None = None) -> Verdict:
    """CLI entry point of ``lbreplay compare``: print the verdict."""
    from lbreplay.errors import UsageError
    from lbreplay.spark import get_spark, lake_path

    if not runs:
        raise UsageError("--runs: give at least one run id")
    load_objective(objective).with_limits([parse_limit(s) for s in limits])  # usage errors before Spark
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    from lbreplay.lake.views import ensure_views

    ensure_views(spark, lake_abs)
    v = verdict_for(spark, runs, baseline, objective, limits)
    print(verdict_text(v))
    return v
