"""The what-if proven on committed real recordings (data/samples/whatif/<config>-<n>/: configs A and B, each run
twice on a real cluster under the same seeded traffic): the closed loop of A's recording under B's broker.conf
(the load model calibrated on A only) predicts B's real KPIs within the targets of issue 33, B against B' giving
the noise band, A the other side of the decision. The prediction runs seeds 0-4 of the closed loop (Pulsar's random
choices drawn from each, as ``replay --seeds 0-4``): each KPI is their median, its band widened by half their range.
The engine runs on the recordings' tick streams (no Spark: tests/replay/recording.py), a fraction of a second per
run."""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from lbreplay.report.kpis import BY_NAME
from lbreplay.report.prediction import (
    DEFAULT_NOISE,
    PREDICTED,
    SEED_SPREAD,
    RunKpis,
    compare_prediction,
    load_noise,
    over_seeds,
    prediction_text,
)

WHATIF = Path(__file__).resolve().parents[2] / "data" / "samples" / "whatif"
SEEDS = range(5)  # the prediction's seeds (replay --seeds 0-4)


def recordings() -> dict[str, list[Path]]:
    """config -> its committed runs (``<config>-<n>``, in run order), modular recordings only."""
    out: dict[str, list[Path]] = defaultdict(list)
    for run in sorted(WHATIF.glob("*-*")) if WHATIF.is_dir() else ():
        if (run / "broker.conf").is_file() and (run / "loadbalance" / "brokers").is_dir():
            out[run.name.rsplit("-", 1)[0]].append(run)
    return dict(out)


def run_kpis(sample: Path, mode: str, broker_conf: Path | None = None, seed: int = 0) -> RunKpis:
    """The KPIs and spread curve of the engine's run over ``sample`` (``replay.metrics.RunMetrics``) under ``seed``."""
    from lbreplay.kernel.config import PulsarConfig, parse_broker_conf, typed_overrides
    from lbreplay.replay.metrics import RunMetrics
    from tests.replay.recording import replay_results

    conf_file = broker_conf or sample / "broker.conf"
    conf = PulsarConfig.resolve(typed_overrides(parse_broker_conf(conf_file.read_text(encoding="utf-8")),
                                                path="broker.conf"))
    ids, results = replay_results(sample, mode, broker_conf, recorded_line=True, seed=seed)
    metrics = RunMetrics(float(conf["loadBalancerSheddingGracePeriodMinutes"]))
    for res in results:
        metrics.add(res, ids, {})
    name = f"{sample.name} {mode}" + (f" under {broker_conf.parent.name}'s broker.conf" if broker_conf else "")
    return RunKpis(name, dict(metrics.rows() + metrics.distribution_rows()), metrics.spread_curve(), seed)


@lru_cache(maxsize=2)
def predicted(a1: Path, b1: Path) -> RunKpis:
    """A-1's closed loop under B-1's broker.conf over :data:`SEEDS`: their median (``prediction.over_seeds``)."""
    return over_seeds([run_kpis(a1, "closed-loop", b1 / "broker.conf", s) for s in SEEDS],
                      f"{a1.name} closed-loop under {b1.name}'s broker.conf")


PAIRS = recordings()
READY = len(PAIRS) >= 2 and all(len(runs) >= 2 for runs in PAIRS.values())


#: the targets the prediction over :data:`SEEDS` misses on the committed pairs, each explained (a miss not listed, or
#: a listed one now met, fails the test: update the list and the explanation with the model)
KNOWN_MISSES: dict[str, str] = {}

#: the targets seed 0 alone misses (one draw of Pulsar's random choices, read as if it were the answer): the seeds'
#: median and band meet them (splits: seeds 7-11, median 8 +- 4 around real 10; final spread: seeds 1.49-18.64 pp,
#: median 5.91 pp on real B's side of A's 7.22; the curve within 89 % of the minutes)
SEED_0_MISSES: dict[str, str] = {
    "splits": "7 predicted vs B-1's 10: B-1's audit, which drops the SIGKILLed broker at its departure as its leader "
              "did, makes the leader's splits of 0x80000000_0x90000000 (+6.0 min) and of its child "
              "0x80000000_0x88000000 (+7.0 min); in A-1's recording under B that bundle is placed on another broker "
              "at the departure and its BundleData does not reach the split thresholds before the recording ends; "
              "0x18000000_0x20000000 (B-1 at +7.0 min): the prediction splits its parent (+6.1 min) but the child's "
              "BundleData does not reach the thresholds before A-1's recording ends (timing)",
    "load_spread_final": "predicted 17.61 pp vs B-1's 2.80 (A-1 7.22): at the SIGKILLed broker's departure (+4.1 min) "
                         "the prediction places its six bundles at once on the least loaded broker, a minute before "
                         "the held report would have expired; UniformLoadShedder then moves them between the two "
                         "busiest brokers, and the window ends mid-swing (the final value is one sample; B-1 and B-2 "
                         "end at 2.80 and 6.82 pp)",
    "spread curve": "7 of 9 minutes within the band (target 8 of 9): the last two minutes, the swing after the "
                    "departure's re-placement (see load_spread_final)",
}


@pytest.mark.skipif(not READY, reason="data/samples/whatif: needs two configs with two recorded runs each")
def test_the_closed_loop_of_a_predicts_b_within_the_noise_band() -> None:
    """Predicted B (A-1 under B's broker.conf, seeds 0-4) vs real B (B-1's audit), noise band B-1 vs B-2 and A-1
    vs A-2, decision vs A-1: every target met but the known, explained misses; seed 0 alone misses its own."""
    a, b = sorted(PAIRS)[:2]
    a1, a2, b1, b2 = PAIRS[a][0], PAIRS[a][1], PAIRS[b][0], PAIRS[b][1]
    real = (run_kpis(b1, "observed"), run_kpis(b2, "observed"), run_kpis(a1, "observed"), run_kpis(a2, "observed"))
    seeds = predicted(a1, b1)
    p = compare_prediction(seeds, *real)
    print(prediction_text(p))
    assert p.checks and p.curve_minutes > 0 and [r.seed for r in seeds.seeds] == list(SEEDS)
    assert "seeds 0, 1, 2, 3, 4 of the same closed loop" in prediction_text(p)
    assert sorted(m.split(":")[0] for m in p.misses) == sorted(KNOWN_MISSES), p.misses
    one = compare_prediction(seeds.seeds[0], *real)
    assert sorted(m.split(":")[0] for m in one.misses) == sorted(SEED_0_MISSES), one.misses


def measured_noise() -> dict[str, float]:
    """Per KPI, the largest difference between two real runs of one config (their audits), over the configs."""
    out: dict[str, float] = {}
    for runs in PAIRS.values():
        first, second = run_kpis(runs[0], "observed"), run_kpis(runs[1], "observed")
        for m in PREDICTED:
            a, b = first.metrics.get(m), second.metrics.get(m)
            if a is not None and b is not None:
                out[m] = max(out.get(m, 0.0), abs(a - b))
    return out


def measured_seed_spread() -> dict[str, float]:
    """Per KPI, half the range of the committed prediction's seeds (A-1 under B-1's broker.conf, :data:`SEEDS`)."""
    a, b = sorted(PAIRS)[:2]
    seeds = predicted(PAIRS[a][0], PAIRS[b][0])
    out = {}
    for m in PREDICTED:
        values = seeds.seed_values(BY_NAME[m])
        if values:
            out[m] = (max(values) - min(values)) / 2
    return out


@pytest.mark.skipif(not READY, reason="data/samples/whatif: needs two configs with two recorded runs each")
def test_the_stored_noise_band_is_the_committed_pairs_own() -> None:
    """conf/noise/whatif.yaml (the what-if runs' confidence band) holds what the committed pairs measure: the
    noise of two real runs of one config and the seeds' spread of the prediction (regenerate: python -m
    tests.report.test_whatif_pairs)."""
    assert load_noise(DEFAULT_NOISE) == pytest.approx(measured_noise(), abs=1e-6)
    spread = load_noise(DEFAULT_NOISE, SEED_SPREAD)
    assert spread == pytest.approx(measured_seed_spread(), abs=1e-6) and spread["unloads"] == 12.0


if __name__ == "__main__":  # write conf/noise/whatif.yaml from the committed pairs
    import yaml

    doc = {"source": "data/samples/whatif: kpis, per KPI the largest |run 1 - run 2| of one config's two real runs "
                     "(their audits), over the configs; seed_spread, per KPI half the range of seeds 0-4 of the "
                     "closed loop of A-1 under B-1's broker.conf (what one seed of a what-if leaves out); regenerate "
                     "with python -m tests.report.test_whatif_pairs",
           "kpis": {k: round(v, 6) for k, v in sorted(measured_noise().items())},
           SEED_SPREAD: {k: round(v, 6) for k, v in sorted(measured_seed_spread().items())}}
    DEFAULT_NOISE.parent.mkdir(parents=True, exist_ok=True)
    DEFAULT_NOISE.write_text(yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
    print(DEFAULT_NOISE.read_text(encoding="utf-8"))
