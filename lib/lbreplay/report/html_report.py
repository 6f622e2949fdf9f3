"""``lbreplay report --runs A,B,... --out FILE.html``: one self-contained HTML file comparing runs.

The page embeds plotly.js once (no network access needed to open it) and holds: the verdict (``report.verdict``:
baseline, ranking, flags, the recommended broker.conf diff), the runs and their configs,
the KPI table, per-broker weighted usage per run, spread and std over time with all runs overlaid, cumulative
unloads/splits, the decision timeline and a moves chart, with broker joins/leaves marked on every time axis.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path
from typing import Any

from lbreplay import __version__
from lbreplay.report.figures import SECTIONS, all_figures
from lbreplay.report.frames import DEFAULT_MAX_POINTS, ReportFrames, load_frames
from lbreplay.report.kpis import kpi_table_html
from lbreplay.report.objectives import DEFAULT_OBJECTIVE
from lbreplay.report.prediction import (
    PREDICTION_ROLES,
    Prediction,
    check_prediction_runs,
    compare_prediction,
    load_runs_kpis,
    prediction_html,
)
from lbreplay.report.verdict import Verdict
from lbreplay.report.verdict_html import timeline_html, verdict_html

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; margin: 24px 32px;
       color: #222; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.92em; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: #f3f5f9; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { background: #e6f4ea; font-weight: 600; }
pre.config { margin: 0; font-size: 0.85em; white-space: pre-wrap; overflow-wrap: anywhere; max-width: 40em; }
section.plot { margin-top: 12px; }
p.verdict { font-size: 1.15em; font-weight: 600; padding: 8px 12px; background: #f3f5f9; border-left: 4px solid #1f77b4; }
span.flag { background: #fde2e1; color: #a31515; padding: 1px 6px; border-radius: 3px; white-space: nowrap; }
span.tag { background: #e6f4ea; color: #1e6b34; padding: 1px 6px; border-radius: 3px; }
tr.recommended td { background: #f2fbf4; }
tr.balanced td { background: #e6f4ea; font-style: italic; }
pre.diff { background: #f8f8f8; padding: 8px; font-size: 0.9em; white-space: pre-wrap; overflow-wrap: anywhere; }
#ranking td, table.timeline td { overflow-wrap: anywhere; }
#ranking td:nth-child(2) { max-width: 24em; }
table.runs td:first-child { max-width: 14em; overflow-wrap: anywhere; }
table.timeline { font-size: 0.85em; }
"""


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def runs_table_html(frames: ReportFrames) -> str:
    """The compared runs: id, cluster, mode, strategies, version, seed, ticks, times and config keys."""
    head = ("<tr><th>Name</th><th>Run</th><th>Cluster</th><th>Mode</th><th>Shedding strategy</th><th>Placement strategy</th>"
            "<th>pulsarVersion</th><th>Seed</th><th>Ticks</th><th>Finished (UTC)</th><th>Config (broker.conf keys)</th></tr>")
    rows = []
    for r in frames.runs:
        cfg = json.dumps(r.config, indent=1, sort_keys=True) if r.config else "(Pulsar defaults)"
        rows.append(
            f"<tr><td>{_esc(r.name or r.run_id)}</td><td>{_esc(r.run_id)}</td><td>{_esc(r.cluster)}</td><td>{_esc(r.mode)}</td>"
            f"<td>{_esc(r.shedding_strategy)}</td><td>{_esc(r.placement_strategy)}</td><td>{_esc(r.pulsar_version)}</td>"
            f"<td class=\"num\">{r.seed}</td><td class=\"num\">{r.ticks}</td><td>{_esc(r.finished_at)}</td>"
            f"<td><pre class=\"config\">{_esc(cfg)}</pre></td></tr>"
        )
    return f"<table class=\"runs\" id=\"runs-table\"><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _eligible(frames: ReportFrames, verdict: Verdict | None) -> list[bool] | None:
    if verdict is None:
        return None
    flagged = {r.run.run_id for r in verdict.ranked if r.flags}
    return [r.run_id not in flagged for r in frames.runs]


def _verdict_sections(frames: ReportFrames, verdict: Verdict | None) -> tuple[str, str]:
    """(the verdict section, the decision timeline section); empty without a verdict."""
    if verdict is None:
        return "", ""
    cl = frames.cluster_load
    t0 = {r: cl.loc[cl["run_id"] == r, "ts"].min() for r in cl["run_id"].unique()} if not cl.empty else {}
    return (f"<h2 id=\"verdict\">Verdict</h2>\n{verdict_html(verdict)}",
            f"<h2 id=\"timeline\">Decision timeline</h2>\n{timeline_html(verdict, frames.moves, t0)}")


def render_html(frames: ReportFrames, *, generated_at: dt.datetime | None = None, verdict: Verdict | None = None,
                prediction: Prediction | None = None) -> str:
    """The whole page as one string (plotly.js inlined once in the head); with ``prediction``, its section
    (predicted vs real vs noise, ``report.prediction``) after the verdict."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    generated_at = generated_at or dt.datetime.now(dt.timezone.utc)
    ids = [r.run_id for r in frames.runs]
    title = "lbreplay report: " + ", ".join(ids)
    sections = []
    for key, fig in all_figures(frames).items():
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, config=PLOTLY_CONFIG, div_id=f"plot-{key}",
                          default_width="100%", default_height=f"{int(fig.layout.height or 500)}px")
        sections.append(f"<section class=\"plot\" id=\"{key}\"><h2>{_esc(SECTIONS[key])}</h2>{div}</section>")
    clusters = sorted({r.cluster for r in frames.runs})
    sampling = max(1, max((r.ticks for r in frames.runs), default=0))
    note = (f"Lines show at most {frames.max_points} points per run (longer runs are averaged over buckets of ticks)."
            if sampling > frames.max_points else "Lines show every tick.")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(title)}</title>
<link rel="icon" href="data:,">
<style>{CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body>
<h1>lbreplay — comparison of {len(ids)} run{'s' if len(ids) != 1 else ''}</h1>
<p class="meta">Cluster{'s' if len(clusters) != 1 else ''} {_esc(', '.join(clusters))} · generated
{_esc(generated_at.strftime('%Y-%m-%d %H:%M:%S UTC'))} by lbreplay {_esc(__version__)} · {_esc(note)}
Usage is Pulsar's weighted max resource usage (getMaxResourceUsageWithWeight) of each alive broker.</p>
{_verdict_sections(frames, verdict)[0]}
{_prediction_section(prediction)}
<h2 id="runs">Runs</h2>
{runs_table_html(frames)}
<h2 id="kpis">KPIs</h2>
<p class="meta">Best value per KPI among the runs the verdict does not flag highlighted. Spread and std are over
alive brokers' weighted max usage, in percentage points; mean and p95 over ticks, final = last tick.</p>
{kpi_table_html(ids, [r.label for r in frames.runs], frames.metrics, _eligible(frames, verdict))}
{_verdict_sections(frames, verdict)[1]}
{''.join(sections)}
</body>
</html>
"""


def _prediction_section(prediction: Prediction | None) -> str:
    if prediction is None:
        return ""
    return f"<h2 id=\"prediction\">Prediction against reality</h2>\n{prediction_html(prediction)}"


def build_report(spark: Any, run_ids: list[str], out: str | Path, *, max_points: int = DEFAULT_MAX_POINTS,
                 baseline: str | None = None, objective: str = DEFAULT_OBJECTIVE,
                 prediction: list[str] | None = None) -> Path:
    """Aggregate ``run_ids`` in Spark, judge them (``report.compare.verdict_for``: the observed run of their history
    joins them as the baseline when none is given) and write the HTML report to ``out``; returns its path."""
    from lbreplay.report.compare import verdict_for

    verdict = verdict_for(spark, run_ids, baseline, objective)
    ids = [r.run.run_id for r in verdict.ranked]
    ids = [i for i in ids if i not in run_ids] + [i for i in dict.fromkeys(run_ids)]  # the added baseline first
    frames = load_frames(spark, ids, max_points=max_points)
    views = {r.run.run_id: r.run for r in verdict.ranked}
    for info in frames.runs:
        info.name = views[info.run_id].name
        frames.metrics[info.run_id].update(views[info.run_id].metrics)  # balance judged by the baseline's target
    path = Path(out).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    checked = None
    if prediction:
        from lbreplay.lake.tables import DATABASE

        checked = compare_prediction(*load_runs_kpis(spark, prediction, PREDICTION_ROLES, DATABASE))
    tmp.write_text(render_html(frames, verdict=verdict, prediction=checked), encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(spark: Any, lake: str, run_ids: list[str], out: str | Path, *,
                 max_points: int = DEFAULT_MAX_POINTS, baseline: str | None = None,
                 objective: str = DEFAULT_OBJECTIVE, prediction: list[str] | None = None) -> Path:
    """Create/refresh the lake's SQL views, then write the report (for the demo and other in-process callers)."""
    from lbreplay.lake.views import ensure_views

    ensure_views(spark, lake)
    return build_report(spark, run_ids, out, max_points=max_points, baseline=baseline, objective=objective,
                        prediction=prediction)


def report_command(runs: list[str], out: str, lake: str, master: str | None = None, baseline: str | None = None,
                   objective: str = DEFAULT_OBJECTIVE, prediction: list[str] | None = None) -> Path:
    """CLI entry point of ``lbreplay report``: register tables and views, build the report, print its path."""
    from lbreplay.errors import UsageError
    from lbreplay.report.objectives import load_objective
    from lbreplay.spark import get_spark, lake_path

    if not runs:
        raise UsageError("--runs: give at least one run id")
    if not out or not str(out).strip():
        raise UsageError("--out: give the HTML file to write")
    load_objective(objective)  # a bad --objective before Spark starts
    check_prediction_runs(prediction)
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    path = write_report(spark, lake_abs, runs, out, baseline=baseline, objective=objective, prediction=prediction)
    print(str(path))
    return path
