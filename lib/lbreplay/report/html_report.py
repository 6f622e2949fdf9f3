"""``lbreplay report --runs A,B,... --out FILE.html``: one self-contained HTML file comparing runs.

The page embeds plotly.js once (no network access needed to open it) and holds: the runs and their configs,
the KPI table, per-broker weighted usage per run, spread and std over time with all runs overlaid, cumulative
unloads/splits, and a moves timeline, with broker joins/leaves marked on every time axis.
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
"""


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def runs_table_html(frames: ReportFrames) -> str:
    """The compared runs: id, cluster, mode, strategies, version, seed, ticks, times and config keys."""
    head = ("<tr><th>Run</th><th>Cluster</th><th>Mode</th><th>Shedding strategy</th><th>Placement strategy</th>"
            "<th>pulsarVersion</th><th>Seed</th><th>Ticks</th><th>Finished (UTC)</th><th>Config (broker.conf keys)</th></tr>")
    rows = []
    for r in frames.runs:
        cfg = json.dumps(r.config, indent=1, sort_keys=True) if r.config else "(Pulsar defaults)"
        rows.append(
            f"<tr><td>{_esc(r.run_id)}</td><td>{_esc(r.cluster)}</td><td>{_esc(r.mode)}</td>"
            f"<td>{_esc(r.shedding_strategy)}</td><td>{_esc(r.placement_strategy)}</td><td>{_esc(r.pulsar_version)}</td>"
            f"<td class=\"num\">{r.seed}</td><td class=\"num\">{r.ticks}</td><td>{_esc(r.finished_at)}</td>"
            f"<td><pre class=\"config\">{_esc(cfg)}</pre></td></tr>"
        )
    return f"<table class=\"runs\" id=\"runs-table\"><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def render_html(frames: ReportFrames, *, generated_at: dt.datetime | None = None) -> str:
    """The whole page as one string (plotly.js inlined once in the head)."""
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
<h2 id="runs">Runs</h2>
{runs_table_html(frames)}
<h2 id="kpis">KPIs</h2>
<p class="meta">Best value per KPI highlighted. Spread and std are over alive brokers' weighted max usage,
in percentage points; mean and p95 over ticks, final = last tick.</p>
{kpi_table_html(ids, [r.label for r in frames.runs], frames.metrics)}
{''.join(sections)}
</body>
</html>
"""


def build_report(spark: Any, run_ids: list[str], out: str | Path, *, max_points: int = DEFAULT_MAX_POINTS) -> Path:
    """Aggregate ``run_ids`` in Spark and write the HTML report to ``out`` (parents created); returns its path."""
    frames = load_frames(spark, run_ids, max_points=max_points)
    path = Path(out).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(frames), encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(spark: Any, lake: str, run_ids: list[str], out: str | Path, *,
                 max_points: int = DEFAULT_MAX_POINTS) -> Path:
    """Create/refresh the lake's SQL views, then write the report (for the demo and other in-process callers)."""
    from lbreplay.lake.views import ensure_views

    ensure_views(spark, lake)
    return build_report(spark, run_ids, out, max_points=max_points)


def report_command(runs: list[str], out: str, lake: str, master: str | None = None) -> Path:
    """CLI entry point of ``lbreplay report``: register tables and views, build the report, print its path."""
    from lbreplay.errors import UsageError
    from lbreplay.spark import get_spark, lake_path

    if not runs:
        raise UsageError("--runs: give at least one run id")
    if not out or not str(out).strip():
        raise UsageError("--out: give the HTML file to write")
    lake_abs = lake_path(lake)
    spark = get_spark(lake_abs, master=master)
    path = write_report(spark, lake_abs, runs, out)
    print(str(path))
    return path
