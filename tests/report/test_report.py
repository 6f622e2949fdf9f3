"""``lbreplay report``: the KPI table, the plotting frames aggregated in Spark, the figures, the self-contained
HTML, and the page as a person sees it in headless Chromium (screenshot, console, network)."""

from __future__ import annotations

import datetime as dt
import html.parser
import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pytest

from lbreplay.errors import UsageError
from lbreplay.report import figures as F
from lbreplay.report.frames import ReportFrames, RunInfo, bucket_width
from lbreplay.report.html_report import render_html
from lbreplay.report.kpis import KPIS, Kpi, best_runs, format_value, kpi_table_html
from tests.report_runs import BROKERS, LEAVE_AT, TICKS, ReplayedRuns, replayed_runs

T0 = dt.datetime(2026, 1, 1)
MIN_LINE_INK = 0.004  # coloured pixel share of a plot area drawing lines across it (a blank area has 0)
MIN_MARKER_INK = 0.0002  # a few markers (one 9 px marker is ~0.02 % of a 1000 x 280 area)


# --------------------------------------------------------------------------------------------- pure parts
def test_bucket_width_bounds_points_per_line() -> None:
    """Downsampling: at most max_points buckets of consecutive ticks per line."""
    assert bucket_width(40, 2000) == 1
    assert bucket_width(2000, 2000) == 1
    assert bucket_width(2001, 2000) == 2
    assert bucket_width(10_000, 2000) == 5
    assert bucket_width(0, 2000) == 1
    assert math.ceil(123_457 / bucket_width(123_457, 2000)) <= 2000
    with pytest.raises(ValueError):
        bucket_width(10, 0)


def _kpi(metric: str) -> Kpi:
    return next(k for k in KPIS if k.metric == metric)


def test_best_runs_lower_is_better_with_ties_and_missing_values() -> None:
    std = _kpi("load_std_mean")
    assert best_runs(std, [0.2, 0.1, 0.3]) == {1}
    assert best_runs(std, [0.1, 0.1, 0.3]) == {0, 1}
    assert best_runs(std, [0.1, None, float("nan")]) == set()  # only one run has a value
    assert best_runs(std, [0.1, 0.1]) == set()  # all equal: nothing to highlight
    assert best_runs(_kpi("ticks"), [10, 20]) == set()  # context figure, no direction


def test_format_value_units() -> None:
    assert format_value(_kpi("throughput_moved"), 3e7) == "30.00 MB/s"
    assert format_value(_kpi("throughput_moved"), 512.0) == "512 B/s"
    assert format_value(_kpi("load_std_mean"), 0.0548) == "5.48 pp"
    assert format_value(_kpi("time_to_balance_minutes"), 1.0) == "1.0 min"
    assert format_value(_kpi("calibration_mape"), None) == "n/a"
    assert format_value(_kpi("calibration_mape"), float("nan")) == "n/a"
    assert format_value(_kpi("unloads"), 1234.0) == "1,234"


def test_kpi_table_lists_every_kpi_and_marks_the_best_run() -> None:
    """The issue's KPIs are all rows: unloads, splits, bundles and bytes moved, spread and std mean/p95/final,
    time to balance, ping-pong, over-placement, calibration error."""
    metrics: dict[str, dict[str, float | None]] = {"a": {"unloads": 3.0, "load_std_mean": 0.05},
                                                   "b": {"unloads": 5.0, "load_std_mean": 0.02}}
    table = kpi_table_html(["a", "b"], ["run a", "run b"], metrics)
    for metric in ("unloads", "splits", "bundles_moved", "throughput_moved", "time_to_balance_minutes",
                   "ping_pong_moves", "over_placement_events", "calibration_mape",
                   *(f"load_{m}_{s}" for m in ("spread", "std") for s in ("mean", "p95", "final"))):
        assert f'data-metric="{metric}"' in table, metric
    assert '<td class="num best" data-metric="unloads">3</td>' in table
    assert '<td class="num best" data-metric="load_std_mean">2.00 pp</td>' in table
    assert '<td class="num" data-metric="load_std_mean">5.00 pp</td>' in table


def synthetic_frames(with_moves: bool = True) -> ReportFrames:
    """Two runs of 3 ticks on brokers A and B; B leaves at tick 2 in both; run r1 has one UNLOAD and one SPLIT."""
    runs = [RunInfo(r, "c", "closed-loop", 0, 3, "succeeded", {}, s, "LeastLongTermMessageRate", "4.x")
            for r, s in (("r1", "ThresholdShedder"), ("r2", "AvgShedder"))]
    ts = [T0 + dt.timedelta(minutes=i) for i in range(3)]
    bu = pd.DataFrame([(r.run_id, b, i, ts[i], 0.25 if b == "A" else 0.5, 2.0)
                       for r in runs for b in ("A", "B") for i in range(3) if not (b == "B" and i == 2)],
                      columns=["run_id", "broker", "bucket", "ts", "weighted_max_usage", "num_bundles"])
    cl = pd.DataFrame([(r.run_id, i, ts[i], 0.25, 0.125, 1.33, 2.0) for r in runs for i in range(3)],
                      columns=["run_id", "bucket", "ts", "spread", "std", "max_over_mean", "alive"])
    cum = pd.DataFrame([(r.run_id, i, ts[i], min(i, 1), 0) for r in runs for i in range(3)],
                       columns=["run_id", "bucket", "ts", "unloads", "splits"])
    moves = pd.DataFrame(
        [("r1", 1, 1, ts[1], "UNLOAD", "t/n/b1", "B", "A", "A", "overloaded"),
         ("r1", 2, 1, ts[1], "SPLIT", "t/n/b2", "A", "A", "A", "split")] if with_moves else [],
        columns=["run_id", "seq", "tick", "ts", "action", "bundle", "source_broker", "target_broker", "broker", "reason"])
    events = pd.DataFrame([(r.run_id, "B", "leave", 2, ts[2]) for r in runs],
                          columns=["run_id", "broker", "kind", "tick", "ts"])
    return ReportFrames(runs=runs, metrics={"r1": {"unloads": 1.0}, "r2": {"unloads": 0.0}}, broker_usage=bu,
                        cluster_load=cl, cumulative=cum, moves=moves,
                        moves_total={"r1": len(moves), "r2": 0}, events=events)


def test_broker_usage_figure_one_line_per_run_and_broker_with_leave_markers() -> None:
    fig = F.broker_usage_figure(synthetic_frames())
    lines = [(t.name, list(t.y)) for t in fig.data]
    assert lines == [("A", [25.0, 25.0, 25.0]), ("B", [50.0, 50.0]), ("A", [25.0, 25.0, 25.0]), ("B", [50.0, 50.0])]
    assert [t.showlegend for t in fig.data] == [True, True, False, False]  # one legend entry per broker
    leave = [s for s in fig.layout.shapes if s.name == "broker leaves"]
    assert [(s.x0, s.xref) for s in leave] == [(pd.Timestamp(T0 + dt.timedelta(minutes=2)).isoformat(), "x"),
                                               (pd.Timestamp(T0 + dt.timedelta(minutes=2)).isoformat(), "x2")]
    assert [a.text for a in fig.layout.annotations if "leaves" in a.text] == ["▼ B leaves", "▼ B leaves"]
    assert fig.layout.title.text == F.TITLES["broker_usage"]


def test_cluster_load_and_cumulative_overlay_all_runs() -> None:
    frames = synthetic_frames()
    cl = F.cluster_load_figure(frames)
    assert [(t.name.split(" ")[0], t.yaxis, list(t.y)) for t in cl.data] == [
        ("r1", "y", [25.0] * 3), ("r1", "y2", [12.5] * 3), ("r2", "y", [25.0] * 3), ("r2", "y2", [12.5] * 3)]
    # both runs share the same leave: drawn once per panel
    assert len([s for s in cl.layout.shapes if s.name == "broker leaves"]) == 2
    cum = F.cumulative_figure(frames)
    assert [list(t.y) for t in cum.data] == [[0, 1, 1], [0, 0, 0], [0, 1, 1], [0, 0, 0]]
    assert all(t.line.shape == "hv" for t in cum.data)
    lo, hi = cum.layout.yaxis2.range  # splits stay 0: the line must be inside the plot area
    assert lo < 0 < hi


def test_moves_figure_marks_actions_and_empty_runs() -> None:
    fig = F.moves_figure(synthetic_frames())
    assert [(t.name, list(t.y), t.marker.symbol) for t in fig.data] == [("UNLOAD", ["A"], "circle"),
                                                                        ("SPLIT", ["A"], "star")]
    assert "B → A" in fig.data[0].text[0]
    assert any(a.text == "no decisions in this run" for a in fig.layout.annotations)
    titles = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("r1 (") and t.endswith("— 2 decisions") for t in titles)


class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        for k, v in attrs:
            if k in ("src", "href") and v is not None:
                self.refs.append(v)


def test_html_is_self_contained() -> None:
    """One file that opens offline: plotly.js inlined once, no external src/href, every section present."""
    from plotly.offline import get_plotlyjs

    page = render_html(synthetic_frames())
    parser = _Refs()
    parser.feed(page)
    assert all(r.startswith(("data:", "#")) for r in parser.refs), parser.refs
    assert page.count(get_plotlyjs()[:200]) == 1
    for key in ("runs-table", "kpi-table", "plot-broker_usage", "plot-cluster_load", "plot-cumulative", "plot-moves"):
        assert f'id="{key}"' in page
    assert "<title>lbreplay report: r1, r2</title>" in page


# --------------------------------------------------------------------------------------------- on real runs
@pytest.fixture(scope="module")
def runs(spark: Any, lake: str) -> ReplayedRuns:
    return replayed_runs(spark, lake)


@pytest.fixture(scope="module")
def frames(spark: Any, runs: ReplayedRuns) -> ReportFrames:
    from lbreplay.report.frames import load_frames

    return load_frames(spark, runs.ids)


@pytest.fixture(scope="module")
def report_file(spark: Any, lake: str, runs: ReplayedRuns, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report as the CLI writes it (report_command: views, the verdict, Spark aggregation, HTML) over the two
    closed loops and the run that never sheds; the observed audit of their history joins as the baseline."""
    from lbreplay.report.html_report import report_command

    out = tmp_path_factory.mktemp("report") / "sub" / "report.html"
    path = report_command(runs=[*runs.ids, runs.idle], out=str(out), lake=lake, master=None)
    assert path == out.resolve() and path.is_file()
    return path


@pytest.mark.spark
def test_frames_mark_the_leave_of_broker_4(frames: ReportFrames, runs: ReplayedRuns) -> None:
    """tests/replay/history.py: broker-4 has no row from tick LEAVE_AT on, nobody joins: one leave event per run at
    T0 + LEAVE_AT minutes."""
    got = sorted((e.run_id, e.broker, e.kind, e.tick, pd.Timestamp(e.ts)) for e in frames.events.itertuples())
    assert got == sorted((r, "broker-4:8080", "leave", LEAVE_AT, pd.Timestamp(runs.leave_ts)) for r in runs.ids)


@pytest.mark.spark
def test_frames_tick_zero_spread_and_std_from_the_history(frames: ReportFrames, runs: ReplayedRuns) -> None:
    """At tick 0 both runs still have the history's layout: broker-0 with 8 bundles is at 31.25 % (bandwidth:
    8 x 10 MB/s / 2 x 8 / 1024 Kbit/s of 1e6), brokers 1-4 at 7.8125 % (memory and direct memory weigh 0 in 4.x;
    CPU is lower). Spread 0.234375; population std of [a, b, b, b, b] = (a - b) x 2 / 5 = 0.09375."""
    first = frames.cluster_load[frames.cluster_load["bucket"] == 0]
    assert sorted(first["run_id"]) == sorted(runs.ids)
    assert np.allclose(first["spread"], 0.234375, atol=1e-6)
    assert np.allclose(first["std"], 0.09375, atol=1e-6)
    assert set(first["alive"]) == {5.0}
    usage0 = frames.broker_usage[frames.broker_usage["bucket"] == 0]
    for r in runs.ids:
        got = dict(zip(usage0[usage0["run_id"] == r]["broker"], usage0[usage0["run_id"] == r]["weighted_max_usage"]))
        assert got == pytest.approx({"broker-0:8080": 0.3125, **{b: 0.078125 for b in BROKERS[1:]}}, abs=1e-6)
    assert len(frames.cluster_load) == 2 * TICKS  # 30 ticks <= 2000 points: every tick is a point


@pytest.mark.spark
def test_frames_cumulative_unloads_match_decisions_and_metrics(spark: Any, frames: ReportFrames, runs: ReplayedRuns) -> None:
    """The last cumulative value of each run equals its UNLOAD + TRANSFER decisions and run_metrics' unloads;
    the moves timeline holds every decision that moved or split something (fewer than 2000; a KEEP moved
    nothing)."""
    counts = {(r.run_id, r.action): r.n for r in spark.sql(
        "SELECT run_id, action, count(*) AS n FROM lbreplay.decisions GROUP BY run_id, action").collect()}
    for r in runs.ids:
        n = counts.get((r, "UNLOAD"), 0) + counts.get((r, "TRANSFER"), 0)
        total = sum(v for (rid, action), v in counts.items() if rid == r and action != "KEEP")
        cum = frames.cumulative[frames.cumulative["run_id"] == r].sort_values("bucket")
        assert n > 0 and int(cum["unloads"].iloc[-1]) == n == frames.metrics[r]["unloads"]
        assert list(cum["unloads"]) == sorted(cum["unloads"])  # cumulative: never decreases
        assert frames.moves_total[r] == total == int((frames.moves["run_id"] == r).sum())


@pytest.mark.spark
def test_prediction_reads_each_runs_metrics_and_spread_per_minute(spark: Any, frames: ReportFrames,
                                                                   runs: ReplayedRuns) -> None:
    """``prediction.load_runs_kpis`` (what ``lbreplay prediction`` compares): each run named by its role, its
    run_metrics as the report reads them, and one spread value per minute of its one-minute ticks, the first the
    history's 0.234375."""
    from lbreplay.report.prediction import load_runs_kpis

    got = load_runs_kpis(spark, runs.ids, ["predicted", "real"], "lbreplay")
    assert [k.name for k in got] == [f"predicted ({runs.ids[0]})", f"real ({runs.ids[1]})"]
    for k, run_id in zip(got, runs.ids):
        assert dict(k.metrics) == frames.metrics[run_id] and k.metrics["unloads"] > 0
        assert len(k.curve) == TICKS and k.curve[0] == pytest.approx(0.234375, abs=1e-6)


@pytest.mark.spark
def test_frames_downsample_lines_and_thin_moves(spark: Any, frames: ReportFrames, runs: ReplayedRuns) -> None:
    """max_points=7 over 30 ticks: buckets of ceil(30 / 7) = 5 ticks, 6 points per line, each at its first tick's
    ts with the mean of its ticks (cumulative counts: the bucket's last value), checked against the full-resolution
    frames. max_moves=2: every k-th decision by seq (k = ceil(total / 2)), the first one included."""
    from lbreplay.report.frames import load_frames

    small = load_frames(spark, runs.ids, max_points=7, max_moves=2)
    for r in runs.ids:
        full = frames.cluster_load[frames.cluster_load["run_id"] == r].sort_values("bucket")
        got = small.cluster_load[small.cluster_load["run_id"] == r].sort_values("bucket")
        assert list(got["bucket"]) == list(range(6))
        assert [pd.Timestamp(t) for t in got["ts"]] == [pd.Timestamp(runs.t0 + dt.timedelta(minutes=5 * b))
                                                        for b in range(6)]
        expected = [full["std"].iloc[5 * b:5 * b + 5].mean() for b in range(6)]
        assert np.allclose(got["std"], expected)
        cum_full = frames.cumulative[frames.cumulative["run_id"] == r].sort_values("bucket")["unloads"].tolist()
        cum = small.cumulative[small.cumulative["run_id"] == r].sort_values("bucket")["unloads"].tolist()
        assert cum == [cum_full[5 * b + 4] for b in range(6)]
        lines = small.broker_usage[small.broker_usage["run_id"] == r].groupby("broker")["bucket"].count()
        assert lines.max() <= 7 and lines["broker-0:8080"] == 6 and lines["broker-4:8080"] == 4  # gone at tick 20
        seqs = [int(s) for s in small.moves[small.moves["run_id"] == r]["seq"]]
        total = small.moves_total[r]
        k = math.ceil(total / 2)
        assert seqs == list(range(1, total + 1, k)) and len(seqs) <= 2


@pytest.mark.spark
def test_broker_events_joins_leaves_and_rejoins(spark: Any) -> None:
    """broker_events on hand-made alive rows over ticks 0-5: X is alive at 0-1 and 4-5 (leaves at 2, rejoins at 4),
    Y first appears at tick 2 (joins), Z is alive throughout (no event); W is alive at 0-2 only and leaves at 3."""
    from lbreplay.report.frames import broker_events

    alive = {"X": [0, 1, 4, 5], "Y": [2, 3, 4, 5], "Z": list(range(6)), "W": [0, 1, 2]}
    rows = [("r", b, t, T0 + dt.timedelta(minutes=t), True) for b, ticks in alive.items() for t in ticks]
    rows.append(("r", "V", 3, T0 + dt.timedelta(minutes=3), False))  # a dead row does not count as alive
    df = spark.createDataFrame(rows, "run_id STRING, broker STRING, tick BIGINT, ts TIMESTAMP, alive BOOLEAN")
    got = sorted((r.broker, r.kind, r.tick, r.ts) for r in broker_events(df).collect())
    m = lambda t: T0 + dt.timedelta(minutes=t)  # noqa: E731
    assert got == [("W", "leave", 3, m(3)), ("X", "join", 4, m(4)), ("X", "leave", 2, m(2)), ("Y", "join", 2, m(2))]


@pytest.mark.spark
def test_report_rejects_unknown_runs(spark: Any, runs: ReplayedRuns, tmp_path: Path) -> None:
    """Unknown run ids are a usage error (exit 2) naming them; so is an empty --runs (checked before Spark)."""
    from lbreplay.report.frames import load_frames
    from lbreplay.report.html_report import report_command

    with pytest.raises(UsageError, match="unknown run id\\(s\\): no-such-run"):
        load_frames(spark, [runs.threshold, "no-such-run"])
    with pytest.raises(UsageError, match="at least one run"):
        report_command(runs=[], out=str(tmp_path / "r.html"), lake="unused")


# --------------------------------------------------------------------------------------------- in a browser
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from tests.browser import Browser

    with Browser() as b:
        yield b


@pytest.mark.spark
def test_report_renders_in_chromium(browser: Any, report_file: Path, runs: ReplayedRuns, tmp_path: Path) -> None:
    """Open the report in headless Chromium as a person would: no console errors, nothing fetched from the
    network, the four charts drawn with their titles, and every plot area of the screenshot showing data (coloured
    pixels of lines/markers; grid, text and the grey join/leave markers do not count)."""
    from tests.browser import ink_fraction, pixel_std

    page = browser.render(report_file)
    (tmp_path / "report.png").write_bytes(page.screenshot)
    assert page.console_errors == []
    assert page.requests and all(u.startswith(("file:", "data:", "about:")) for u in page.requests), page.requests
    order = [runs.observed, runs.threshold, runs.avg, runs.idle]  # the baseline the verdict added comes first
    assert page.title == "lbreplay report: " + ", ".join(order)
    assert "comparison of 4 runs" in page.text and "Unloads" in page.text and "Calibration error" in page.text
    plots = {p.div_id: p for p in page.plots}
    assert list(plots) == ["plot-broker_usage", "plot-cluster_load", "plot-cumulative", "plot-moves"]
    img = page.image()
    assert img.shape[1] == browser.width  # nothing wider than the window (no horizontal scrolling)
    assert img.shape[0] >= max(p.rect[1] + p.rect[3] for p in page.plots) - 1
    for key, plot in plots.items():
        name = key.removeprefix("plot-")
        assert plot.title == F.TITLES[name]
        panels = len(order) if name in ("broker_usage", "moves") else 2  # a panel per run / two overlaid panels
        assert len(plot.areas) == panels, key
        assert any("broker-4:8080 leaves" in a for a in plot.annotations), key
        minimum = MIN_MARKER_INK if name == "moves" else MIN_LINE_INK
        for area in plot.areas:
            assert area[2] > 300 and area[3] > 100, (key, area)
            assert ink_fraction(img, area) > minimum, (key, area, ink_fraction(img, area))
            assert pixel_std(img, area) > 3.0, (key, area)
    usage = plots["plot-broker_usage"]
    assert usage.traces == 5 * len(order)  # 5 brokers in each run's panel
    assert "observed (" in " ".join(usage.annotations)  # panels titled by the runs' human names


@pytest.mark.spark
def test_report_verdict_renders_in_chromium(browser: Any, report_file: Path, runs: ReplayedRuns) -> None:
    """The verdict as a person reads it: the recommendation sentence naming the runs by their human names, the
    broker.conf diff lines, the flags of the run that did nothing and never balanced, and the decision timeline the
    evidence links to (AvgShedder balances by the baseline's 10 pp target from minute 9 with 3 bundles moved)."""
    page = browser.render(report_file)
    text = page.text
    avg = "loadBalancerLoadPlacementStrategy=AvgShedder, loadBalancerLoadSheddingStrategy=AvgShedder, maxUnloadPercentage=0.5"
    assert (f"Recommended: {avg} over the baseline observed on the balance objective (time to balance never → 9.0 min, "
            "bundles moved 10 → 3).") in text
    for line in ("-loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
                 "+loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
                 "-maxUnloadPercentage=0.2", "+maxUnloadPercentage=0.5"):
        assert line in text.splitlines(), line
    assert "did nothing" in text and "never balanced" in text
    assert "loadBalancerBrokerThresholdShedderPercentage=100" in text  # the idle run's name: the key that differs
    assert "Time to balance: never → 9.0 min (was never)" in text
    assert f"{avg} ({runs.avg}) — 5 decision(s), balanced for good from minute 9.0" in text  # 3 unloads, 2 assigns
    assert "balanced from here" in text and "Decision timeline" in text
    html_text = report_file.read_text(encoding="utf-8")
    assert f'href="#timeline-{runs.avg}"' in html_text and f'id="timeline-{runs.avg}"' in html_text


def test_browser_check_detects_blank_plots_and_console_errors(browser: Any, tmp_path: Path) -> None:
    """The check itself: on a page with one chart with a line, one chart without data and a console error, the
    empty chart's area has no coloured pixels, the other one has, and the error is reported."""
    from plotly.offline import get_plotlyjs

    from tests.browser import ink_fraction

    page = tmp_path / "control.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>control</title><link rel='icon' href='data:,'>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        "<div id='full' style='width:800px;height:300px'></div><div id='empty' style='width:800px;height:300px'></div>"
        "<script>"
        "Plotly.newPlot('full', [{x: [1, 2, 3, 4], y: [1, 3, 2, 4], mode: 'lines', line: {width: 3}}],"
        " {title: {text: 'with data'}});"
        "Plotly.newPlot('empty', [], {title: {text: 'no data'}, xaxis: {range: [0, 1]}, yaxis: {range: [0, 1]}});"
        "console.error('boom');"
        "</script></body></html>",
        encoding="utf-8",
    )
    got = browser.render(page)
    plots = {p.div_id: p for p in got.plots}
    img = got.image()
    assert ink_fraction(img, plots["full"].areas[0]) > MIN_LINE_INK
    assert ink_fraction(img, plots["empty"].areas[0]) == 0.0
    assert [p.title for p in got.plots] == ["with data", "no data"]
    assert any("boom" in e for e in got.console_errors)
