"""The what-if against reality (report/prediction.py): predicted B vs real B, the noise band (B vs B'), the ranking
against real A, the spread curve; the assumptions and confidence band every what-if run's verdict shows; a
prediction over several seeds (``replay --seeds``, PRED as ``run1+run2+...``): their median, range and band."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lbreplay.errors import UsageError
from lbreplay.report.compare import what_if_text
from lbreplay.report.kpis import BY_NAME
from lbreplay.report.objectives import load_objective
from lbreplay.report.prediction import (
    SEED_SPREAD,
    RunKpis,
    check_prediction_runs,
    compare_prediction,
    confidence_band,
    load_noise,
    noise_of,
    over_seeds,
    prediction_html,
    prediction_text,
    split_seeds,
    what_if_notes,
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
    seeded = noise_of(b, b2, "B vs B'", _seeds([13, 9, 14]))  # a prediction over seeds: half their range too
    assert seeded["seed_spread"]["unloads"] == 2.5 and "seeds 0, 1, 2 of pred" in seeded["source"]
    f.write_text(yaml.safe_dump(seeded))
    assert load_noise(f, "seed_spread")["unloads"] == 2.5 and load_noise(f)["unloads"] == 1.0
    assert "seed_spread" not in noise_of(b, b2, "B vs B'", _seeds([13]))  # one seed: no spread to store
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
    stored = load_noise(section=SEED_SPREAD)  # one run is one seed: the seeds' spread measured in conf/noise
    assert f"unloads 6 ± {2 + stored['unloads']:.0f}" in text and "the seeds' spread of one prediction" in text
    notes = "\n".join(what_if_notes(what_if.metrics, (), noise, {}))  # no seed spread measured
    assert "unloads 6 ± 2" in notes and "spread (max−min) p95 20.00 pp ± 7.00 pp" in notes  # 5 pp + 10 % of 20 pp
    assert "the band below leaves the seeds' spread out" in notes
    assert "unloads 6 ± 5" in "\n".join(what_if_notes(what_if.metrics, (), noise, {"unloads": 3.0}))
    page = verdict_html(v)
    assert 'id="what-if-timeline-what-if"' in page and "confidence band" in page and "lookups not recorded" in page
    assert "± " in page
    unnamed = RunView("run-1", "closed-loop", {}, m)  # no config name: the run id once
    assert what_if_text(build_verdict([audit, unnamed], load_objective()), noise)[0] == \
        "What-if run-1 is a prediction, not a measurement:"
    assert "<b>run-1</b> is a what-if" in verdict_html(build_verdict([audit, unnamed], load_objective()))
    assert what_if_text(build_verdict([audit], load_objective()), noise) == []
    assert confidence_band(BY_NAME["unloads"], 6.0, {}, 0.1) is None  # no noise measured: a count has no band


# ------------------------------------------------------------------------------------------- several seeds
def _seeds(unloads: list[float], curves: list[list[float]] | None = None) -> RunKpis:
    runs = [RunKpis(f"pred seed {i}", {**_run("", u, 2, 0.10, []).metrics}, (curves or [[0.1] * 4] * len(unloads))[i],
                    seed=i) for i, u in enumerate(unloads)]
    return over_seeds(runs, "pred")


REAL = (_run("B", 10, 2, 0.10, [0.1] * 4), _run("B'", 9, 2, 0.10, [0.1] * 4), _run("A", 30, 2, 0.20, [0.2] * 4))


def test_a_count_missed_by_one_seed_but_covered_by_the_seeds_band_is_within() -> None:
    """Real B 10 unloads (noise 1, +-20 % = 2): seed 0 says 13 (a miss alone); seeds 13, 9, 14 have median 13 and
    range 9-14, so the band is 2 + half the range 2.5 = 4.5 around 13: within, the ranking 3 of 3 seeds."""
    p = compare_prediction(_seeds([13, 9, 14]), *REAL)
    c = next(c for c in p.checks if c.kpi.metric == "unloads")
    assert (c.predicted, c.seed_range, c.seed_spread, c.tolerance) == (13, (9, 14), 2.5, 4.5)
    assert c.within and c.ranking_agrees and c.seeds_agreeing == 3 and "unloads" not in " ".join(p.misses)
    one = compare_prediction(p.predicted.seeds[0], *REAL)  # seed 0 read as the answer
    assert next(c for c in one.checks if c.kpi.metric == "unloads").within is False
    assert one.misses[0].startswith("unloads: predicted 13 vs real 10 beyond +-2")


def test_a_count_one_seed_hits_but_the_seeds_median_misses_is_a_miss() -> None:
    """The reverse: seed 0 says exactly real B's 10 unloads, but seeds 10, 20, 21 have median 20 and half range
    5.5: 20 +- 7.5 leaves 10 out, a miss naming the seeds' range."""
    p = compare_prediction(_seeds([10, 20, 21]), *REAL)
    c = next(c for c in p.checks if c.kpi.metric == "unloads")
    assert (c.predicted, c.tolerance, c.within) == (20, 7.5, False)
    assert p.misses[0] == "unloads: predicted 20 (seeds 10–21) vs real 10 beyond +-8"  # 7.5 displayed as a count
    assert next(c for c in compare_prediction(p.predicted.seeds[0], *REAL).checks
                if c.kpi.metric == "unloads").within


def test_the_ranking_is_the_medians_with_the_seeds_that_agree_counted() -> None:
    """Real A 30, real B 10: seeds 12, 35, 14 (median 14) rank B below A as reality, 2 of 3 seeds; seeds 12, 35, 36
    (median 35) rank it above: a ranking miss although seed 0 alone agrees."""
    agree = next(c for c in compare_prediction(_seeds([12, 35, 14]), *REAL).checks if c.kpi.metric == "unloads")
    assert agree.ranking_agrees is True and agree.seeds_agreeing == 2
    p = compare_prediction(_seeds([12, 35, 36]), *REAL)
    assert next(c for c in p.checks if c.kpi.metric == "unloads").ranking_agrees is False
    assert p.misses[0].startswith("unloads: ranking: real B 10 vs real A 30, predicted B 35 (seeds 12–36)")
    rows = [r for r in prediction_text(p).splitlines() if r.strip().startswith("Unloads")]
    assert rows[0].split()[1:4] == ["35", "12–36", "10"] and "NO, 1/3 seeds" in rows[0]


def test_the_spread_curve_band_widens_by_the_seeds_spread_per_minute() -> None:
    """Real B 0.10 each minute, B' 0.10 (no noise): seeds at 0.10/0.14/0.16 in minute 0 (median 0.14, half range
    0.03) miss it; at 0.08/0.10/0.14 in minute 1 (median 0.10) and minutes 2-3 equal: 3 of 4 minutes; one seed
    0.16 in minute 0 would be a miss too."""
    curves = [[0.10, 0.08, 0.1, 0.1], [0.14, 0.10, 0.1, 0.1], [0.16, 0.14, 0.1, 0.1]]
    p = compare_prediction(_seeds([10, 10, 10], curves), *REAL)
    assert p.predicted.curve == pytest.approx([0.14, 0.10, 0.1, 0.1])
    assert p.predicted.curve_spread() == pytest.approx([0.03, 0.03, 0.0, 0.0])
    assert (p.curve_minutes, p.curve_within) == (4, 3)
    curves[1][0] = 0.125  # median 0.125, half range 0.03: 0.025 off, within
    assert compare_prediction(_seeds([10, 10, 10], curves), *REAL).curve_within == 4


def test_over_seeds_takes_each_metrics_median_with_never_ordered_last() -> None:
    """Time to balance 'never' (null) is the latest: null, 4, 5 -> 5; null, null, 3 -> never; 2 and 4 -> 3."""
    def ttb(values: list[float | None]) -> float | None:
        runs = [RunKpis(str(i), {"time_to_balance_minutes": v}, seed=i) for i, v in enumerate(values)]
        return over_seeds(runs, "p").metrics["time_to_balance_minutes"]

    assert (ttb([None, 4.0, 5.0]), ttb([None, None, 3.0]), ttb([2.0, 4.0]), ttb([7.0])) == (5.0, None, 3.0, 7.0)
    merged = _seeds([1, 5, 3])
    assert merged.seed_label == "seeds 0, 1, 2" and merged.metrics["unloads"] == 3
    assert over_seeds(merged.seeds[:1], "x") is merged.seeds[0]  # one seed: the run itself


def test_the_seeds_are_named_in_the_text_and_the_report_section_and_widen_the_confidence_band() -> None:
    p = compare_prediction(_seeds([13, 9, 14]), *REAL)
    text = prediction_text(p)
    assert "seeds 0, 1, 2 of the same closed loop: the predicted value is their median" in text
    assert "predicted B (median)" in text and "Confidence band (noise + load model error + seeds' spread): unloads " \
        "13 ± 4;" in text  # noise 1 + half range 2.5 (a count displays 3.5 as 4)
    page = prediction_html(p)
    assert 'id="prediction-seeds"' in page and "seeds 0, 1, 2 of the same closed loop" in page
    assert "seeds min–max" in page and "9–14" in page
    single = prediction_text(compare_prediction(p.predicted.seeds[0], *REAL))
    assert "one draw of Pulsar's random choices (seed 0)" in single and "replay --seeds 0-4" in single
    assert confidence_band(BY_NAME["unloads"], 13.0, {}, None, 2.5) == 2.5  # the seeds' spread alone is a band
    assert confidence_band(BY_NAME["unloads"], 13.0, {"unloads": 1.0}, 0.1, 2.5) == 3.5  # a count: no model term
    assert confidence_band(BY_NAME["peak_usage"], 0.5, {"peak_usage": 0.02}, 0.1, 0.01) == pytest.approx(0.08)


def test_only_pred_joins_seeds_and_each_once() -> None:
    assert split_seeds(["a+b", "c", " d + e "]) == ["a", "b", "c", "d", "e"]
    check_prediction_runs(["p0+p1+p2", "b", "b2", "a"])
    with pytest.raises(UsageError, match="only PRED"):
        check_prediction_runs(["p0", "b+b2", "b2", "a"])
    with pytest.raises(UsageError, match="distinct, none empty"):
        check_prediction_runs(["p0+p0", "b", "b2", "a"])
    with pytest.raises(UsageError, match="distinct, none empty"):
        check_prediction_runs(["p0+", "b", "b2", "a"])


def test_replay_seeds_are_parsed_as_ranges_and_lists() -> None:
    from lbreplay.replay.spark_replay import parse_seeds, seeded_run_ids

    assert parse_seeds("0-4") == [0, 1, 2, 3, 4] and parse_seeds("0-2,7") == [0, 1, 2, 7] and parse_seeds("5") == [5]
    assert seeded_run_ids("pred", [0, 7]) == ["pred-s0", "pred-s7"] and seeded_run_ids(None, [0]) == []
    for bad in ("4-2", "a", "", "0,,1", "-1"):
        with pytest.raises(UsageError, match="--seeds: expected"):
            parse_seeds(bad)
    with pytest.raises(UsageError, match="names a seed twice"):
        parse_seeds("0-2,1")


@pytest.mark.spark
def test_replay_seeds_then_prediction_reads_the_seeds_median(spark: Any, lake: str) -> None:
    """``replay --seeds 0-2 --run-id R`` makes R-s0..R-s2 in one job (runs.seed 0, 1, 2); ``prediction`` takes them
    as R-s0+R-s1+R-s2 (as ``report --prediction`` does, through the same ``load_runs_kpis``) and names the seeds; a
    '+' joining runs of another config or a repeated run is exit 2, as --seed with --seeds."""
    from tests.hostile.harness import cli
    from tests.report_runs import CLUSTER, replayed_runs

    runs = replayed_runs(spark, lake)
    base = ["--lake", lake, "--cluster", CLUSTER, "--config", "conf/strategies/avg-shedder.yaml"]
    got = cli(spark, "replay", *base, "--seeds", "0-2", "--run-id", "pred-seeds")
    assert (got.code, got.out.split()) == (0, ["pred-seeds-s0", "pred-seeds-s1", "pred-seeds-s2"]), got.err
    assert "as `prediction`'s PRED: pred-seeds-s0+pred-seeds-s1+pred-seeds-s2" in got.err
    seeds = spark.sql("SELECT run_id, seed FROM lbreplay.runs WHERE run_id LIKE 'pred-seeds-%' ORDER BY run_id")
    assert [(r["run_id"], r["seed"]) for r in seeds.collect()] == [(f"pred-seeds-s{i}", i) for i in range(3)]
    pred = "pred-seeds-s0+pred-seeds-s1+pred-seeds-s2"
    others = f"{runs.avg},{runs.threshold},{runs.observed}"
    got = cli(spark, "prediction", "--lake", lake, "--runs", f"{pred},{others}")
    assert got.code in (0, 1) and "seeds 0, 1, 2 of the same closed loop" in got.out, got.err
    assert f"predicted B (seeds 0, 1, 2: {pred.replace('+', ', ')})" in got.out
    for bad in (f"pred-seeds-s0+{runs.threshold},{others}", f"pred-seeds-s0+pred-seeds-s0,{others}"):
        got = cli(spark, "prediction", "--lake", lake, "--runs", bad)
        assert got.code == 2 and got.err.count("\n") == 1, got.err
    got = cli(spark, "replay", *base, "--seeds", "0-2", "--seed", "1")
    assert got.code == 2 and "--seed and --seeds" in got.err
