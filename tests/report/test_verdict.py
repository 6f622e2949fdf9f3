"""The verdict: the KPI registry, balance targets per strategy, objectives and limits, the baseline, flags,
ranking, the broker.conf diff, names, the text of ``compare`` and ``gate``; balance KPIs computed in Spark."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lbreplay.errors import UsageError
from lbreplay.report.balance import balance_target
from lbreplay.report.compare import verdict_text
from lbreplay.report.gate import gate_summary
from lbreplay.report.kpis import BY_NAME, KPIS, format_delta, format_value, kpi
from lbreplay.report.objectives import load_objective, parse_limit
from lbreplay.report.verdict import DID_NOTHING, NEVER_BALANCED, RunView, build_verdict, conf_diff, predicted_changes

THR = "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
T0 = dt.datetime(2026, 1, 1)


def _metrics(ttb: float | None, moved: float, unloads: float | None = None, unbalanced: float = 5.0,
             **more: float) -> dict[str, float | None]:
    m: dict[str, float | None] = {
        "time_to_balance_minutes": ttb, "never_balanced": 1.0 if ttb is None else 0.0, "unbalanced_ticks": unbalanced,
        "bundles_moved": moved, "unloads": moved if unloads is None else unloads, "splits": 0.0,
        "throughput_moved": 0.0, "ping_pong_moves": 0.0, "max_spread": 0.3, "load_spread_p95": 0.2,
        "duration_minutes": 60.0}
    m.update(more)
    return m


def test_registry_names_are_unique_and_every_kpi_is_documented() -> None:
    assert len(BY_NAME) == len(KPIS)
    for k in KPIS:
        assert k.definition and k.computed and k.unit is not None, k.metric
    assert format_value(kpi("time_to_balance_minutes"), None) == "never"
    assert format_value(kpi("max_spread"), 0.2345) == "23.45 pp"
    assert format_value(kpi("unloads_per_hour"), kpi("unloads_per_hour").value({"unloads": 15, "duration_minutes": 30})) \
        == "30.0 /h"
    assert format_delta(kpi("bundles_moved"), 4.0, 10.0) == "−6"
    assert format_delta(kpi("max_spread"), 0.25, 0.2) == "+5.00 pp"


def test_balance_target_is_each_strategy_own_threshold() -> None:
    t = balance_target({})
    assert (t.strategy, t.criterion.measure, t.limit) == ("ThresholdShedder", "max_minus_mean", pytest.approx(0.10))
    t = balance_target({"loadBalancerLoadSheddingStrategy": THR, "loadBalancerBrokerThresholdShedderPercentage": 25})
    assert t.limit == pytest.approx(0.25) and "25 pp above the mean" in t.describe()
    t = balance_target({"loadBalancerLoadSheddingStrategy": "AvgShedder", "name": "avg"})
    assert (t.criterion.measure, t.limit) == ("spread", pytest.approx(0.15))
    t = balance_target({"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"})
    assert (t.strategy, t.criterion.measure, t.limit) == ("TransferShedder", "std", 0.25)
    assert balance_target({"loadBalancerLoadSheddingStrategy": "OverloadShedder"}).limit == pytest.approx(0.85)


def test_limits_parse_check_and_did_you_mean() -> None:
    lim = parse_limit("unloads_per_hour<=30")
    assert lim.check({"unloads": 10, "duration_minutes": 60}) is None
    assert lim.check({"unloads": 45, "duration_minutes": 60}) == \
        "unloads_per_hour<=30 broken: unloads_per_hour=45.0 /h (15.0 /h beyond the limit)"
    assert parse_limit("max_spread <= 20").check({"max_spread": 0.234}) == \
        "max_spread<=20 broken: max_spread=23.40 pp (3.40 pp beyond the limit)"
    assert parse_limit("time_to_balance_minutes<=30").check({"time_to_balance_minutes": None}) is not None
    with pytest.raises(UsageError, match="unknown KPI 'unload_per_hour'; did you mean unloads_per_hour"):
        parse_limit("unload_per_hour<=30")
    with pytest.raises(UsageError, match="expected KPI<=number"):
        parse_limit("unloads_per_hour=<30")


def test_default_objective_is_data_and_scores_lower_better() -> None:
    o = load_objective()
    assert o.name == "balance" and "fewest bundle moves" in o.description
    assert [t.kpi.metric for t in o.terms][:2] == ["time_to_balance_minutes", "bundles_moved"]
    assert o.score(_metrics(10.0, 10.0)) == pytest.approx(2.0)  # 10 min / 10 + 10 moves / 10
    assert o.score(_metrics(None, 0.0)) is None
    assert o.formula().startswith("score = 1 × time to balance / 10.0 min + 1 × bundles moved / 10")
    with pytest.raises(UsageError, match="no such objective"):
        load_objective("no-such-objective")


def test_conf_diff_lists_only_keys_whose_effective_value_differs() -> None:
    base = {"loadBalancerLoadSheddingStrategy": THR, "loadBalancerBrokerThresholdShedderPercentage": 10, "name": "a"}
    cand = {"loadBalancerBrokerThresholdShedderPercentage": 5, "loadBalancerSheddingGracePeriodMinutes": 30,
            "name": "b"}
    assert conf_diff(base, cand) == ["-loadBalancerBrokerThresholdShedderPercentage=10",
                                     "+loadBalancerBrokerThresholdShedderPercentage=5"]  # grace 30 is the default


def _runs() -> list[RunView]:
    return [
        RunView("obs", "observed", {}, _metrics(None, 40.0)),
        RunView("idle", "closed-loop", {"loadBalancerBrokerThresholdShedderPercentage": 100}, _metrics(None, 0.0)),
        RunView("thr5", "closed-loop", {"loadBalancerBrokerThresholdShedderPercentage": 5}, _metrics(12.0, 14.0)),
        RunView("named", "closed-loop", {"name": "lower grace", "loadBalancerSheddingGracePeriodMinutes": 10},
                _metrics(30.0, 30.0)),
        RunView("noisy", "closed-loop", {"loadBalancerBrokerThresholdShedderPercentage": 15},
                _metrics(5.0, 8.0, unloads=200.0)),
    ]


def test_verdict_observed_baseline_flags_ranking_and_diff() -> None:
    """The observed run is the baseline; the idle run never balanced and did nothing; the noisy one breaks the
    unloads limit; of the rest thr5 scores best (1.2 + 1.4 = 2.6 < 6) and is recommended, as a broker.conf diff."""
    o = load_objective().with_limits([parse_limit("unloads_per_hour<=30")])
    v = build_verdict(_runs(), o)
    assert v.baseline.run_id == "obs" and "observed" in v.baseline_note
    rows = {r.run.run_id: r for r in v.ranked}
    assert rows["idle"].flags == [NEVER_BALANCED, DID_NOTHING]
    assert rows["noisy"].flags == ["unloads_per_hour<=30 broken: unloads_per_hour=200.0 /h (170.0 /h beyond the limit)"]
    assert [r.run.run_id for r in v.ranked][:2] == ["thr5", "named"]
    assert v.recommended is rows["thr5"] and rows["thr5"].score == pytest.approx(2.6)
    assert [r.run.name for r in v.ranked[:2]] == ["loadBalancerBrokerThresholdShedderPercentage=5", "lower grace"]
    assert rows["obs"].run.name == "observed"
    assert v.diff == ["-loadBalancerBrokerThresholdShedderPercentage=10", "+loadBalancerBrokerThresholdShedderPercentage=5"]
    assert v.sentence.startswith("Recommended: loadBalancerBrokerThresholdShedderPercentage=5 over the baseline observed")
    assert "time to balance never → 12.0 min" in v.sentence
    assert "Bundles moved: 40 → 14 (−26)" in predicted_changes(v)
    text = verdict_text(v)
    for line in ("Baseline: observed (obs, observed)", "  -loadBalancerBrokerThresholdShedderPercentage=10",
                 "  +loadBalancerBrokerThresholdShedderPercentage=5", "Verdict: Recommended:", "never balanced; did nothing"):
        assert line in text, line


def test_verdict_keeps_the_baseline_when_no_candidate_is_better_or_all_are_flagged() -> None:
    runs = _runs()
    o = load_objective().with_limits([parse_limit("unloads_per_hour<=30")])
    v = build_verdict(runs, o, baseline_id="thr5")  # "lower grace" scores 6.0 against thr5's 2.6; the rest flagged
    assert v.recommended is None and v.diff == [] and v.baseline.name == "thr5"  # no key differs from itself
    assert v.sentence == ("Keep the baseline thr5: no unflagged candidate scores better on the balance objective "
                          "(best: lower grace).")
    v = build_verdict(runs[:2], load_objective())
    assert v.recommended is None and v.sentence == (
        "No recommendation: every candidate is flagged (did nothing, never balanced); keep the baseline observed.")
    v = build_verdict(runs[2:], load_objective())
    assert v.baseline.run_id == "thr5" and "assumed the first run" in v.baseline_note
    with pytest.raises(UsageError, match="--baseline: nope is not among --runs"):
        build_verdict(runs, load_objective(), baseline_id="nope")


def test_gate_summary_names_the_broken_limit() -> None:
    runs = _runs()
    text, broken = gate_summary(load_objective(), runs[2], runs[4], [parse_limit("unloads_per_hour<=30"),
                                                                     parse_limit("max_spread<=40")], "c1")
    assert broken == ["unloads_per_hour<=30 broken: unloads_per_hour=200.0 /h (170.0 /h beyond the limit)"]
    assert "gate: FAIL — 1 of 2 limit(s) broken" in text and "max_spread<=40" in text and "ok (30.00 pp)" in text
    assert "  -loadBalancerBrokerThresholdShedderPercentage=5" in text


@pytest.mark.spark
def test_balance_metrics_time_to_balance_never_idle_and_spread(spark: Any) -> None:
    """ThresholdShedder at 10 %: run 'late' is 20 pp above the mean until tick 2, then within (balanced from minute
    3, one unbalanced blip at tick 1 before); 'never' is unbalanced at its last tick; 'flat' is balanced
    throughout and one of its brokers owns nothing (idle 4 ticks x 1 min)."""
    from lbreplay.report.balance import balance_metrics, targets_frame

    usage = {"late": [[0.5, 0.1], [0.5, 0.1], [0.5, 0.1], [0.3, 0.2], [0.3, 0.25]],
             "never": [[0.3, 0.3], [0.3, 0.3], [0.3, 0.3], [0.3, 0.3], [0.6, 0.1]],
             "flat": [[0.2, 0.2]] * 4}
    rows = [(r, t, T0 + dt.timedelta(minutes=t), f"b{b}", u, 1.0, 0 if (r == "flat" and b == 1) else 2, True)
            for r, ticks in usage.items() for t, us in enumerate(ticks) for b, u in enumerate(us)]
    bt = spark.createDataFrame(rows, "run_id STRING, tick BIGINT, ts TIMESTAMP, broker STRING, weighted_max_usage DOUBLE, "
                                     "msg_rate DOUBLE, num_bundles BIGINT, alive BOOLEAN")
    got: dict[str, dict[str, float | None]] = {}
    for r in balance_metrics(bt, targets_frame(spark, {k: {} for k in usage})).collect():
        got.setdefault(r["run_id"], {})[r["metric"]] = r["value"]
    assert got["late"]["time_to_balance_minutes"] == 3.0 and got["late"]["unbalanced_ticks"] == 3.0
    assert got["late"]["max_spread"] == pytest.approx(0.4) and got["late"]["duration_minutes"] == 5.0
    assert got["never"]["time_to_balance_minutes"] is None and got["never"]["never_balanced"] == 1.0
    assert got["flat"]["time_to_balance_minutes"] == 0.0 and got["flat"]["never_balanced"] == 0.0
    assert got["flat"]["idle_broker_minutes"] == 4.0 and got["late"]["idle_broker_minutes"] == 0.0


@pytest.mark.spark
def test_compare_on_real_runs(spark: Any, lake: str, capsys: pytest.CaptureFixture[str]) -> None:
    """compare over the shared runs: the observed audit of their history joins as the baseline, the 100 %
    threshold run is flagged (judged by the baseline's 10 % target it never balances, and it never unloads)."""
    from lbreplay.report.compare import compare_command
    from tests.report_runs import replayed_runs

    runs = replayed_runs(spark, lake)
    v = compare_command([runs.threshold, runs.avg, runs.idle], None, "balance", [], lake)
    out = capsys.readouterr().out
    print(out)
    assert v.baseline.run_id == runs.observed
    idle = v.row(runs.idle)
    assert idle.flags == [NEVER_BALANCED, DID_NOTHING] and idle.run.name == "loadBalancerBrokerThresholdShedderPercentage=100"
    assert out.splitlines()[0].startswith("Objective balance: Reach and keep balance")
    assert "Baseline: observed (report-observed, observed)" in out


def test_gate_cli_refuses_an_unknown_kpi_before_spark(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Any) -> None:
    """A limit on an unknown KPI is a usage error (exit 2) with a did-you-mean, before any replay."""
    import sys

    from lbreplay import cli

    monkeypatch.setattr(sys, "argv", ["lbreplay", "gate", "--cluster", "c", "--baseline", "a.conf", "--candidate",
                                      "b.conf", "--limit", "max_sprad<=20", "--lake", str(tmp_path / "none")])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    assert "unknown KPI 'max_sprad'; did you mean max_spread" in capsys.readouterr().err


@pytest.mark.spark
def test_gate_replays_both_confs_and_fails_on_a_broken_limit(spark: Any, lake: str, tmp_path: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """gate over the shared history: ThresholdShedder (baseline) against AvgShedder (candidate), both replayed
    closed-loop in this session; AvgShedder unloads 2 bundles in 30 minutes (4 per hour): a 3 per hour limit is
    broken by 1.0 /h (exit 1), a 10 per hour one and a 30 pp max spread are kept."""
    from lbreplay.report.gate import LimitBroken, gate_command, gate_views
    from tests.report_runs import CLUSTER, replayed_runs

    replayed_runs(spark, lake)
    base, cand = tmp_path / "base.conf", tmp_path / "cand.conf"
    base.write_text("loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\n")
    cand.write_text("# candidate\nloadBalancerLoadSheddingStrategy=AvgShedder\nloadBalancerLoadPlacementStrategy=AvgShedder\n")
    with pytest.raises(LimitBroken, match="unloads_per_hour<=3 broken: unloads_per_hour=4.0 /h \\(1.0 /h beyond"):
        gate_command(CLUSTER, str(base), str(cand), ["unloads_per_hour<=3", "max_spread<=30"], lake, quiet=True)
    out = capsys.readouterr().out
    assert "gate: FAIL — 1 of 2 limit(s) broken" in out and "  max_spread<=30               ok (23.44 pp)" in out
    assert "+loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgShedder" in out
    runs = {r["run_id"]: r["config"] for r in spark.sql(
        f"SELECT run_id, config FROM lbreplay.runs WHERE cluster = '{CLUSTER}' AND run_id LIKE 'run-%'").collect()}
    assert len(runs) == 2  # ids derived from inputs + config + seed
    cand_id = next(rid for rid, conf in runs.items() if "AvgShedder" in conf)
    base_id = next(rid for rid, conf in runs.items() if "AvgShedder" not in conf)
    from lbreplay.report.objectives import load_objective, parse_limit

    text, broken = gate_views(spark, load_objective(), base_id, cand_id,
                              [parse_limit("unloads_per_hour<=10"), parse_limit("max_spread<=30")], CLUSTER)
    assert broken == [] and "gate: PASS — 0 of 2 limit(s) broken" in text


def test_baseline_given_as_the_clusters_broker_conf(tmp_path: Any) -> None:
    """--baseline broker.conf picks the run replaying exactly its load-balancer keys (defaults spelled out or not);
    none matching is a usage error naming the file."""
    from lbreplay.report.compare import conf_baseline

    conf = tmp_path / "broker.conf"
    conf.write_text("# the cluster's\nloadBalancerBrokerThresholdShedderPercentage=5\n"
                    "loadBalancerSheddingGracePeriodMinutes=30\n")
    assert conf_baseline(_runs(), str(conf)) == ("thr5", f"the run whose config equals {conf}")
    conf.write_text("loadBalancerBrokerThresholdShedderPercentage=7\n")
    with pytest.raises(UsageError, match="broker.conf: no run among --runs replays"):
        conf_baseline(_runs(), str(conf))


def test_names_from_sweep_labels_and_diff_of_keys_lbreplay_does_not_model() -> None:
    """A sweep point is named by its label (the grid values that vary), a config file's run by its name, an audit
    stays "observed"; broker.conf keys lbreplay does not model still show in the diff, as given."""
    from lbreplay.report.verdict import run_names

    runs = [RunView("a", "observed", {}, _metrics(None, 1.0), given_name="threshold-lltmr"),
            RunView("b", "closed-loop", {"loadBalancerBrokerThresholdShedderPercentage": 5}, _metrics(1.0, 1.0),
                    given_name="loadBalancerBrokerThresholdShedderPercentage=5"),
            RunView("c", "closed-loop", {"managedLedgerMaxEntriesPerLedger": 100}, _metrics(1.0, 1.0),
                    given_name="threshold-lltmr")]
    run_names(runs, runs[0])
    assert [r.name for r in runs] == ["observed (threshold-lltmr)", "loadBalancerBrokerThresholdShedderPercentage=5",
                                      "threshold-lltmr"]
    assert conf_diff({"managedLedgerMaxEntriesPerLedger": 50}, runs[2].config) == [
        "-managedLedgerMaxEntriesPerLedger=50", "+managedLedgerMaxEntriesPerLedger=100"]
    assert conf_diff({}, runs[2].config) == ["+managedLedgerMaxEntriesPerLedger=100"]
