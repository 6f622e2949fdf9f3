"""The report's plots (plotly figures) from the collected frames; no Spark here.

Broker joins and leaves are drawn as grey vertical lines (dashed ▲: join, dotted ▼: leave) with the broker's
name on every time axis; grey keeps them apart from the coloured data.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from lbreplay.report.frames import ReportFrames

TEMPLATE = "plotly_white"
BROKER_COLOURS = qualitative.Dark24 + qualitative.Light24
RUN_COLOURS = qualitative.Set1 + qualitative.Dark2 + qualitative.Set2
ACTION_STYLE: dict[str, tuple[str, str]] = {  # action -> (marker symbol, colour)
    "UNLOAD": ("circle", "#d62728"),
    "TRANSFER": ("diamond", "#9467bd"),
    "ASSIGN": ("square", "#1f77b4"),
    "SPLIT": ("star", "#ff7f0e"),
}
EVENT_STYLE: dict[str, tuple[str, str, str]] = {  # kind -> (colour, dash, legend name)
    "join": ("#555555", "dash", "broker joins"),
    "leave": ("#555555", "dot", "broker leaves"),
}
MAX_EVENT_LABELS = 12  # per subplot; further events get a line without a label

SECTIONS = {  # section id -> page heading
    "broker_usage": "Broker usage",
    "cluster_load": "Load spread and std",
    "cumulative": "Unloads and splits",
    "moves": "Moves",
}
TITLES = {  # section id -> chart title
    "broker_usage": "Per-broker weighted max usage over time (one panel per run)",
    "cluster_load": "Load spread and std over time (all runs overlaid)",
    "cumulative": "Cumulative unloads and splits",
    "moves": "Moves timeline (every decision, at the broker that received the bundle)",
}


def _ts(value: Any) -> str:
    return pd.Timestamp(value).isoformat()


def _axis_ref(row: int, axis: str) -> str:
    return axis if row == 1 else f"{axis}{row}"


def add_events(fig: go.Figure, events: pd.DataFrame, rows: list[int], legend: bool = True) -> None:
    """Vertical lines at broker joins/leaves (one legend entry per kind) on each subplot row in ``rows``."""
    if events is None or events.empty:
        return
    shown: set[str] = set()
    for row in rows:
        xref, yref = _axis_ref(row, "x"), _axis_ref(row, "y") + " domain"
        for n, ev in enumerate(events.sort_values(["ts", "kind", "broker"]).itertuples(index=False)):
            colour, dash, name = EVENT_STYLE[ev.kind]
            fig.add_shape(
                type="line", x0=_ts(ev.ts), x1=_ts(ev.ts), y0=0, y1=1, xref=xref, yref=yref,
                line=dict(color=colour, dash=dash, width=1.5), name=name, legendgroup=f"event-{ev.kind}",
                showlegend=legend and ev.kind not in shown,
            )
            shown.add(ev.kind)
            if n < MAX_EVENT_LABELS:
                arrow = "▲" if ev.kind == "join" else "▼"
                fig.add_annotation(
                    x=_ts(ev.ts), y=1, xref=xref, yref=yref, text=f"{arrow} {ev.broker} {ev.kind}s",
                    showarrow=False, xanchor="left", yanchor="top", font=dict(size=10, color=colour),
                    textangle=0, bgcolor="rgba(255,255,255,0.7)",
                )


def _run_events(frames: ReportFrames, run_id: str) -> pd.DataFrame:
    ev = frames.events
    if ev is None or ev.empty:
        return pd.DataFrame(columns=["run_id", "broker", "kind", "tick", "ts"])
    return ev[ev["run_id"] == run_id]


def _all_events(frames: ReportFrames) -> pd.DataFrame:
    """Events of all runs, once per (ts, broker, kind) (runs of one cluster share their input's events)."""
    ev = frames.events
    if ev is None or ev.empty:
        return pd.DataFrame(columns=["run_id", "broker", "kind", "tick", "ts"])
    return ev.drop_duplicates(subset=["ts", "broker", "kind"])


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE, title=dict(text=title, x=0.01, xanchor="left"), height=height,
        margin=dict(l=70, r=30, t=90, b=50), hovermode="closest",
        legend=dict(orientation="v", yanchor="top", y=1, x=1.01, xanchor="left"),
    )
    return fig


def broker_usage_figure(frames: ReportFrames) -> go.Figure:
    """One panel per run: each broker's weighted max usage (percent) over time, with joins/leaves."""
    runs = frames.runs
    fig = make_subplots(rows=len(runs), cols=1, shared_xaxes=True, vertical_spacing=0.12 / max(1, len(runs)),
                        subplot_titles=[r.label for r in runs])
    df = frames.broker_usage
    brokers = sorted(df["broker"].unique()) if not df.empty else []
    colour = {b: BROKER_COLOURS[i % len(BROKER_COLOURS)] for i, b in enumerate(brokers)}
    shown: set[str] = set()
    for row, run in enumerate(runs, start=1):
        sub = df[df["run_id"] == run.run_id]
        for broker in sorted(sub["broker"].unique()):
            line = sub[sub["broker"] == broker].sort_values("bucket")
            fig.add_trace(go.Scatter(
                x=line["ts"], y=line["weighted_max_usage"] * 100.0, mode="lines", name=broker,
                legendgroup=broker, showlegend=broker not in shown, line=dict(color=colour[broker], width=1.6),
                customdata=line[["num_bundles"]].to_numpy(),
                hovertemplate=f"{broker}<br>%{{x}}<br>weighted max usage %{{y:.2f}} %<br>bundles %{{customdata[0]:.0f}}"
                              "<extra></extra>",
            ), row=row, col=1)
            shown.add(broker)
        fig.update_yaxes(title_text="usage %", rangemode="tozero", row=row, col=1)
        add_events(fig, _run_events(frames, run.run_id), [row], legend=row == 1)
    return _layout(fig, TITLES["broker_usage"], 140 + 280 * len(runs))


def cluster_load_figure(frames: ReportFrames) -> go.Figure:
    """Spread (max − min) and std of the weighted max usage over alive brokers, every run overlaid."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=["Spread: max − min weighted max usage (pp)", "Std of weighted max usage (pp)"])
    df = frames.cluster_load
    for i, run in enumerate(frames.runs):
        sub = df[df["run_id"] == run.run_id].sort_values("bucket")
        c = RUN_COLOURS[i % len(RUN_COLOURS)]
        for row, col in ((1, "spread"), (2, "std")):
            fig.add_trace(go.Scatter(
                x=sub["ts"], y=sub[col] * 100.0, mode="lines", name=run.label, legendgroup=run.run_id,
                showlegend=row == 1, line=dict(color=c, width=1.8),
                hovertemplate=f"{run.run_id}<br>%{{x}}<br>{col} %{{y:.2f}} pp<extra></extra>",
            ), row=row, col=1)
    fig.update_yaxes(title_text="pp", rangemode="tozero")
    add_events(fig, _all_events(frames), [1, 2])
    return _layout(fig, TITLES["cluster_load"], 640)


def cumulative_figure(frames: ReportFrames) -> go.Figure:
    """Cumulative unloads (UNLOAD + TRANSFER) and splits per run, as steps."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=["Cumulative unloads", "Cumulative splits"])
    df = frames.cumulative
    for i, run in enumerate(frames.runs):
        sub = df[df["run_id"] == run.run_id].sort_values("bucket")
        c = RUN_COLOURS[i % len(RUN_COLOURS)]
        for row, col in ((1, "unloads"), (2, "splits")):
            fig.add_trace(go.Scatter(
                x=sub["ts"], y=sub[col], mode="lines", name=run.label, legendgroup=run.run_id,
                showlegend=row == 1, line=dict(color=c, width=2, shape="hv"),
                hovertemplate=f"{run.run_id}<br>%{{x}}<br>{col} %{{y:.0f}}<extra></extra>",
            ), row=row, col=1)
    for row, col in ((1, "unloads"), (2, "splits")):
        top = float(df[col].max()) if not df.empty and df[col].notna().any() else 0.0
        top = max(top, 1.0)
        # explicit range so that a count staying at 0 is drawn inside the plot area, not on its bottom edge
        fig.update_yaxes(title_text="count", range=[-0.06 * top, 1.08 * top], row=row, col=1)
    add_events(fig, _all_events(frames), [1, 2])
    return _layout(fig, TITLES["cumulative"], 600)


def moves_figure(frames: ReportFrames) -> go.Figure:
    """One panel per run: every decision at its time and receiving broker (source for an unload without a
    destination), by action; hover shows bundle, source → target and reason."""
    runs = frames.runs
    titles = []
    for r in runs:
        total, shown_n = frames.moves_total.get(r.run_id, 0), int((frames.moves["run_id"] == r.run_id).sum())
        note = f" — {shown_n} of {total} decisions shown" if shown_n < total else f" — {total} decisions"
        titles.append(r.label + note)
    fig = make_subplots(rows=len(runs), cols=1, shared_xaxes=True, vertical_spacing=0.12 / max(1, len(runs)),
                        subplot_titles=titles)
    df = frames.moves
    shown: set[str] = set()
    for row, run in enumerate(runs, start=1):
        sub = df[df["run_id"] == run.run_id]
        if sub.empty:
            fig.add_annotation(text="no decisions in this run", xref=_axis_ref(row, "x") + " domain",
                               yref=_axis_ref(row, "y") + " domain", x=0.5, y=0.5, showarrow=False)
        for action, (symbol, colour) in ACTION_STYLE.items():
            a = sub[sub["action"] == action]
            if a.empty:
                continue
            text = [
                f"{action} {b}<br>{s or '—'} → {t or '(to be assigned)'}<br>{reason or ''}"
                for b, s, t, reason in zip(a["bundle"], a["source_broker"], a["target_broker"], a["reason"])
            ]
            fig.add_trace(go.Scatter(
                x=a["ts"], y=a["broker"], mode="markers", name=action, legendgroup=action,
                showlegend=action not in shown, marker=dict(symbol=symbol, color=colour, size=9, opacity=0.8,
                                                            line=dict(width=0.5, color="#333")),
                text=text, hovertemplate="%{x}<br>%{text}<extra></extra>",
            ), row=row, col=1)
            shown.add(action)
        fig.update_yaxes(title_text="broker", type="category", categoryorder="category ascending", row=row, col=1)
        add_events(fig, _run_events(frames, run.run_id), [row], legend=row == 1)
    span = time_span(frames)
    if span is not None:  # the runs' whole time range, like the other charts, not just the decisions' range
        fig.update_xaxes(range=[_ts(span[0]), _ts(span[1])])
    return _layout(fig, TITLES["moves"], 140 + 300 * len(runs))


def time_span(frames: ReportFrames) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """First and last ts of the compared runs, padded by 2 % (None without ticks)."""
    ts = frames.cluster_load["ts"] if not frames.cluster_load.empty else pd.Series(dtype="datetime64[ns]")
    if ts.empty:
        return None
    lo, hi = pd.Timestamp(ts.min()), pd.Timestamp(ts.max())
    pad = (hi - lo) * 0.02 if hi > lo else pd.Timedelta(minutes=1)
    return lo - pad, hi + pad


def all_figures(frames: ReportFrames) -> dict[str, go.Figure]:
    """The report's figures, in page order, keyed by section id."""
    return {
        "broker_usage": broker_usage_figure(frames),
        "cluster_load": cluster_load_figure(frames),
        "cumulative": cumulative_figure(frames),
        "moves": moves_figure(frames),
    }
