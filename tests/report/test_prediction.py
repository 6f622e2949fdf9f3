"""The what-if against reality (report/prediction.py): predicted B vs real B, the noise band (B vs B'), the ranking
against real A, the spread curve; the assumptions and confidence band every what-if run's verdict shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbreplay.errors import UsageError
from lbreplay.report.compare import what_if_text
from lbreplay.report.kpis import BY_NAME
from lbreplay.report.objectives import load_objective
from lbreplay.report.prediction import (
    RunKpis,
    check_prediction_runs,
    compare_prediction,
    confidence_band,
    load_noise,
    noise_of,
    prediction_html,
    prediction_text,
)
from lbreplay.report.verdict import RunView, build_verdict
from lbreplay.report.verdict_html import verdict_html


def _run(name: str, unloads: float, splits: float, spread: float, curve: list[float]) -> RunKpis:
    return RunKpis(name, {"unloads": unloads, "splits": splits, "bundles_moved": unloads, "ping_pong_moves": 0.0,
                          "load_spread_mean": spread, "load_spread_p95": spread, "load_spread_final": spread,
                          "peak_usage": 0.5 + spread, "time_to_balance_minutes": None}, curve)


def test_counts_are_judged_by_the_noise_band_or_twenty_percent_and_the_ranking_where_decisive() -> None:
    """Real B 10 unloads, B' 9 (noise 1), A 30: predicted 12 is within +-20 % (2 > noise 1) and on B's side of A;
    predicted 13 misses the count; a predicted spread above A's when B's is below misses the ranking."""
    a, b, b2 = _run("A", 30, 2, 0.20, [0.2] * 10), _run("B", 10, 2, 0.10, [0.1] * 10), _run("B'", 9, 2, 0.11, [0.11] * 10)
    good = compare_prediction(_run("pred", 12, 2, 0.105, [0.1] * 8 + [0.3, 0.3]), b, b2, a)
    by = {c.kpi.metric: c for c in good.checks}
    assert by["unloads"].noise == 1 and by["unloads"].tolerance == pytest.approx(2.0)
    assert by["unloads"].within and by["unloads"].ranking_agrees and by["unloads"].decisive
    assert by["splits"].decisive is False and by["splits"].ranking_agrees is None and by["splits"].within
    assert by["load_spread_mean"].ranking_agrees and by["time_to_balance_minutes"].passed is None
    assert (good.curve_minutes, good.curve_within, good.curve_share) == (10, 8, 0.8)
    assert good.passed and good.misses == []
    bad = compare_prediction(_run("pred", 13, 2, 0.25, [0.3] * 10), b, b2, a)
    assert [m.split(":")[0] for m in bad.misses] == [
        "unloads", "bundles_moved", "load_spread_mean", "load_spread_p95", "load_spread_final", "peak_usage",
        "spread curve"]
    assert "predicted 13 vs real 10 beyond +-2" in bad.misses[0]
    text = prediction_text(bad)
    assert "Unloads" in text and "real B'" in text and "Targets: missed" in text and "0% of 10 minutes" in text
    page = prediction_html(good)
    assert 'id="prediction-table"' in page and page.count("<polyline") == 4 and "Targets met" in page


def test_the_noise_band_is_stored_as_data_and_read_back(tmp_path: Path) -> None:
    import yaml

    b, b2 = _run("B", 10, 2, 0.10, []), _run("B'", 9, 2, 0.13, [])
    doc = noise_of(b, b2, "B vs B'")
    assert doc["kpis"]["unloads"] == 1 and doc["kpis"]["load_spread_mean"] == pytest.approx(0.03)
    f = tmp_path / "noise.yaml"
    f.write_text(yaml.safe_dump(doc))
    assert load_noise(f)["unloads"] == 1.0
    f.write_text("kpis: {unlods: 1}")
    with pytest.raises(UsageError, match="noise.yaml: kpis.unlods"):
        load_noise(f)
    with pytest.raises(UsageError, match="expected 4 or 5 run ids"):
        check_prediction_runs(["a", "b"])


def test_a_what_if_run_shows_its_assumptions_and_confidence_band_in_text_and_html() -> None:
    """A closed-loop run in a verdict: traffic as recorded, the load model's error, lookups not recorded, and each
    shown KPI with +- (noise + calibration MAPE x value for usage KPIs); an audit alone shows none."""
    m = {"time_to_balance_minutes": 4.0, "never_balanced": 0.0, "unbalanced_ticks": 3.0, "bundles_moved": 6.0,
         "unloads": 6.0, "splits": 1.0, "max_spread": 0.3, "load_spread_p95": 0.2, "duration_minutes": 60.0,
         "calibration_mape": 0.1}
    audit = RunView("audit", "observed", {}, {**m, "unloads": 8.0, "bundles_moved": 8.0, "calibration_mape": None})
    what_if = RunView("what-if", "closed-loop", {"name": "uniform"}, m)
    v = build_verdict([audit, what_if], load_objective())
    noise = {"unloads": 2.0, "load_spread_p95": 0.05}
    lines = what_if_text(v, noise)
    assert lines[0] == "What-if uniform (what-if) is a prediction, not a measurement:"
    text = "\n".join(lines)
    assert "traffic replayed as recorded" in text and "cpu error 10.0% MAPE" in text and "lookups not recorded" in text
    assert "unloads 6 ± 2" in text and "spread (max−min) p95 20.00 pp ± 7.00 pp" in text  # 5 pp + 10 % of 20 pp
    page = verdict_html(v)
    assert 'id="what-if-timeline-what-if"' in page and "confidence band" in page and "lookups not recorded" in page
    assert "± " in page
    unnamed = RunView("run-1", "closed-loop", {}, m)  # no config name: the run id once
    assert what_if_text(build_verdict([audit, unnamed], load_objective()), noise)[0] == \
        "What-if run-1 is a prediction, not a measurement:"
    assert "<b>run-1</b> is a what-if" in verdict_html(build_verdict([audit, unnamed], load_objective()))
    assert what_if_text(build_verdict([audit], load_objective()), noise) == []
    assert confidence_band(BY_NAME["unloads"], 6.0, {}, 0.1) is None  # no noise measured: a count has no band
