"""The report's verdict section (sentence, objective, ranking with deltas and flags, the recommended
``broker.conf`` diff, predicted changes, evidence) and its decision timeline (every decision of the baseline and
the recommended run, anchored so the evidence links to them)."""

from __future__ import annotations

import html
import re
from typing import Any

import pandas as pd

from lbreplay.report.kpis import format_delta, format_value
from lbreplay.report.verdict import Verdict, predicted_changes

MAX_TIMELINE_ROWS = 300  # per run


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def anchor(run_id: str) -> str:
    return "timeline-" + re.sub(r"[^A-Za-z0-9_-]", "_", run_id)


def ranking_html(v: Verdict) -> str:
    o = v.objective
    head = "<tr><th>#</th><th>Run</th><th>Score</th>" + "".join(f"<th>{_esc(k.label)}</th>" for k in o.show) + \
        "<th>Flags</th></tr>"
    rows = []
    for i, r in enumerate(v.ranked, 1):
        cells = []
        for k in o.show:
            val = k.value(r.run.metrics)
            text = format_value(k, val)
            if not r.baseline:
                text += f" ({format_delta(k, val, k.value(v.baseline.metrics))})"
            cells.append(f"<td class=\"num\" data-metric=\"{k.metric}\">{_esc(text)}</td>")
        tags = (["baseline"] if r.baseline else []) + (["recommended"] if v.recommended is r else [])
        flag = "".join(f"<span class=\"flag\">{_esc(f)}</span> " for f in r.flags)
        tag = "".join(f"<span class=\"tag\">{t}</span> " for t in tags)
        score = "–" if r.score is None else f"{r.score:.2f}"
        cls = " class=\"recommended\"" if v.recommended is r else (" class=\"flagged\"" if r.flags else "")
        rows.append(f"<tr{cls}><td>{i}</td><td>{_esc(r.run.name)}<br><small>{_esc(r.run.run_id)}</small></td>"
                    f"<td class=\"num\">{score}</td>{''.join(cells)}<td>{tag}{flag}</td></tr>")
    return f"<table id=\"ranking\"><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def verdict_html(v: Verdict) -> str:
    """The verdict section, first on the page."""
    o = v.objective
    parts = [f"<p class=\"verdict\" id=\"verdict-sentence\">{_esc(v.sentence)}</p>",
             f"<p class=\"meta\">Objective <b>{_esc(o.name)}</b>: {_esc(o.description)} {_esc(o.formula())}."
             + (f" Limits: {_esc(', '.join(lim.text for lim in o.limits))}." if o.limits else "") + "</p>",
             f"<p class=\"meta\">Baseline: <b>{_esc(v.baseline.name)}</b> ({_esc(v.baseline.run_id)}) — "
             f"{_esc(v.baseline_note)}. Balance target, the baseline config's own, applied to every run: "
             f"{_esc(v.baseline.target.describe() if v.baseline.target else '')} (a candidate cannot balance by "
             "loosening its target). Runs that never balanced, did nothing while unbalanced or broke a limit are "
             "flagged and never recommended.</p>",
             ranking_html(v), what_if_html(v)]
    if v.recommended is not None:
        r = v.recommended.run
        diff = "\n".join(v.diff) or "(no key differs)"
        changes = "".join(f"<li>{_esc(c)}</li>" for c in predicted_changes(v))
        ttb = r.metrics.get("time_to_balance_minutes")
        parts += [
            "<h3>broker.conf diff against the baseline</h3>",
            f"<pre class=\"diff\" id=\"conf-diff\">{_esc(diff)}</pre>",
            f"<h3>Predicted changes</h3><ul id=\"predicted\">{changes}</ul>",
            f"<p id=\"evidence\">Evidence: {_esc(r.name)} stays balanced from minute "
            f"{0.0 if ttb is None else ttb:.1f} to the end of the run; its decisions are in the "
            f"<a href=\"#{anchor(r.run_id)}\">decision timeline</a> (the baseline's: "
            f"<a href=\"#{anchor(v.baseline.run_id)}\">{_esc(v.baseline.name)}</a>).</p>",
        ]
    return "\n".join(parts)


def what_if_html(v: Verdict, noise: dict[str, float] | None = None) -> str:
    """Each what-if (closed-loop) run's assumptions and confidence band, so no prediction reads as exact."""
    from lbreplay.report.prediction import load_noise, what_if_notes

    runs = [r.run for r in v.ranked if r.run.mode == "closed-loop"]
    noise = noise if noise is not None else (load_noise() if runs else {})
    out = []
    for run in runs:
        notes = "".join(f"<li>{_esc(n)}</li>" for n in what_if_notes(run.metrics, v.objective.show, noise))
        rid = "" if run.name == run.run_id else f" ({_esc(run.run_id)})"
        out.append(f"<div class=\"what-if\" id=\"what-if-{anchor(run.run_id)}\"><p><b>{_esc(run.name)}</b>{rid} "
                   f"is a what-if: a prediction, not a measurement.</p><ul>{notes}</ul></div>")
    return "\n".join(out)


def timeline_html(v: Verdict, moves: pd.DataFrame, t0: dict[str, Any]) -> str:
    """Decision tables of the recommended run (or the best-ranked candidate) and the baseline; the row where the
    run is balanced for good is marked."""
    shown = [v.recommended.run if v.recommended else next((r.run for r in v.ranked if not r.baseline), None),
             v.baseline]
    out = []
    for run in {r.run_id: r for r in shown if r is not None}.values():
        rows = moves[moves["run_id"] == run.run_id].sort_values("seq").head(MAX_TIMELINE_ROWS)
        ttb = run.metrics.get("time_to_balance_minutes")
        start = t0.get(run.run_id)
        balanced_at = None if ttb is None or start is None else pd.Timestamp(start) + pd.Timedelta(minutes=ttb)
        body, marked = [], False
        for d in rows.itertuples(index=False):
            if balanced_at is not None and not marked and pd.Timestamp(d.ts) >= balanced_at:
                body.append(_balanced_row(balanced_at))
                marked = True
            move = f"{d.source_broker or '–'} → {d.target_broker or '–'}"
            body.append(f"<tr id=\"{anchor(run.run_id)}-{int(d.seq)}\"><td class=\"num\">{int(d.tick)}</td>"
                        f"<td>{_esc(pd.Timestamp(d.ts).strftime('%Y-%m-%d %H:%M:%S'))}</td><td>{_esc(d.action)}</td>"
                        f"<td>{_esc(d.bundle)}</td><td>{_esc(move)}</td><td>{_esc(d.reason)}</td></tr>")
        if balanced_at is not None and not marked:
            body.append(_balanced_row(balanced_at))
        state = "never balanced" if ttb is None else f"balanced for good from minute {ttb:.1f}"
        out.append(
            f"<h3 id=\"{anchor(run.run_id)}\">{_esc(run.name)} ({_esc(run.run_id)}) — {len(rows)} decision(s), {state}</h3>"
            "<table class=\"timeline\"><thead><tr><th>Tick</th><th>Time (UTC)</th><th>Action</th><th>Bundle</th>"
            f"<th>Move</th><th>Reason</th></tr></thead><tbody>{''.join(body) or _empty_row()}</tbody></table>")
    return "\n".join(out)


def _balanced_row(at: pd.Timestamp) -> str:
    return (f"<tr class=\"balanced\"><td colspan=\"6\">balanced from here ({_esc(at.strftime('%H:%M:%S'))}) "
            "to the end of the run</td></tr>")


def _empty_row() -> str:
    return "<tr><td colspan=\"6\">no decisions: this run moved, split and unloaded nothing</td></tr>"
