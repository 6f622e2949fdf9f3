"""``lbreplay gate``: replay a cluster's recorded history closed-loop under a baseline and a candidate
``broker.conf`` (both in one Spark session, as a sweep runs its configs), check the candidate against limits on
registry KPIs, print a one-screen summary; exit 0 within the limits, 1 when one is broken, 2 on a bad limit."""

from __future__ import annotations

from typing import Any

from lbreplay.errors import EXIT_FAILURE, LbReplayError, UsageError
from lbreplay.report.kpis import format_delta, format_value
from lbreplay.report.objectives import DEFAULT_OBJECTIVE, Limit, Objective, load_objective, parse_limit
from lbreplay.report.verdict import RunView, conf_diff, flags, run_names


class LimitBroken(LbReplayError):
    """The candidate broke a gate limit (exit 1)."""

    exit_code = EXIT_FAILURE


def gate_summary(objective: Objective, base: RunView, cand: RunView, limits: list[Limit], cluster: str) -> tuple[str, list[str]]:
    """(the summary text, the broken-limit lines of the candidate)."""
    broken = [b for b in (lim.check(cand.metrics) for lim in limits) if b]
    shown = list(dict.fromkeys([*objective.show, *(lim.kpi for lim in limits)]))
    ticks = cand.metrics.get("ticks") or 0
    lines = [f"gate: cluster {cluster}, {ticks:.0f} ticks replayed closed-loop; objective {objective.name}",
             f"  baseline  {base.run_id}: {base.target.describe() if base.target else ''}",
             f"  candidate {cand.run_id}: {cand.target.describe() if cand.target else ''}",
             "broker.conf diff (candidate against baseline):"]
    lines += [f"  {d}" for d in conf_diff(base.config, cand.config)] or ["  (no key differs)"]
    lines.append(f"  {'KPI':<28}{'baseline':>16}{'candidate':>16}{'change':>16}")
    for k in shown:
        b, c = k.value(base.metrics), k.value(cand.metrics)
        lines.append(f"  {k.label:<28}{format_value(k, b):>16}{format_value(k, c):>16}{format_delta(k, c, b):>16}")
    cand_flags = [f for f in flags(cand, objective.with_limits([])) if f]
    if cand_flags:
        lines.append("candidate flags: " + "; ".join(cand_flags))
    lines.append("limits:")
    for lim in limits:
        bad = lim.check(cand.metrics)
        lines.append(f"  {lim.text:<28} " + (f"BROKEN — {bad}" if bad else
                                              f"ok ({format_value(lim.kpi, lim.kpi.value(cand.metrics))})"))
    lines.append(f"gate: {'FAIL' if broken else 'PASS'} — {len(broken)} of {len(limits)} limit(s) broken")
    return "\n".join(lines), broken


def gate_command(cluster: str, baseline: str, candidate: str, limits: list[str], lake: str, master: str | None = None,
                 objective: str = DEFAULT_OBJECTIVE, window: tuple[str | None, str | None] = (None, None),
                 quiet: bool = False) -> int:
    """CLI entry point of ``lbreplay gate``; raises LimitBroken (exit 1) when the candidate breaks a limit."""
    from lbreplay.lake.window import window_from_flags
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.replay.spark_replay import execute, quick_jit
    from lbreplay.spark import get_spark, lake_path

    parsed = [parse_limit(s) for s in limits]  # exit 2 before any Spark work
    if not parsed:
        raise UsageError("--limit: give at least one limit, e.g. --limit unloads_per_hour<=30")
    obj = load_objective(objective)
    span = window_from_flags(*window)
    specs = [resolve_run_config(None, baseline), resolve_run_config(None, candidate)]
    same = specs[0] == specs[1]
    spark = get_spark(lake, master=master, quick_jit=quick_jit(lake, cluster, specs))
    ids = execute(spark, lake_path(lake), cluster, specs[:1] if same else specs, quiet=quiet, window=span)
    text, broken = gate_views(spark, obj, ids[0], ids[-1], parsed, cluster)
    print(text)
    if broken:
        raise LimitBroken(f"gate: {len(broken)} limit(s) broken: " + "; ".join(broken))
    return 0


def gate_views(spark: Any, objective: Objective, base_id: str, cand_id: str, limits: list[Limit],
               cluster: str) -> tuple[str, list[str]]:
    """The two runs loaded and named, then :func:`gate_summary`."""
    from lbreplay.report.compare import judge_by, load_views

    views = load_views(spark, list(dict.fromkeys([base_id, cand_id])))
    base, cand = views[0], views[-1]
    judge_by(spark, views, base.config)
    run_names(views, base)
    return gate_summary(objective, base, cand, limits, cluster)
