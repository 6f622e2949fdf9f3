"""replay/outputs.py: run_metrics are the same bits whatever order the rows reach Spark's aggregates in
(execution shape: slices, partitions, shuffle), since the issue's determinism rule covers every output table."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from lbreplay.replay.outputs import combine_metrics

pytestmark = pytest.mark.spark

# values whose floating-point sum depends on the order they are added in
USAGE = [0.1, 0.7, 0.2, 1e-17, 0.30000000000000004, 0.9, 0.3333333333333333, 0.6666666666666666]


def _frames(spark: Any, seed: int, partitions: int) -> tuple[Any, Any]:
    rng = random.Random(seed)
    ticks = [("r", t, b, True, USAGE[(t * 3 + b) % len(USAGE)] * (1 + t / 7)) for t in range(40) for b in range(5)]
    rng.shuffle(ticks)
    seq = [("r", "throughput_moved", v) for v in (1e16, 1.0, -1e16, 3.5, 0.1, 0.2)] + [("r", "task_peak_rss_mb", 9.0)]
    rng.shuffle(seq)
    bt = spark.createDataFrame(ticks, "run_id STRING, tick LONG, broker LONG, alive BOOLEAN, "
                                      "weighted_max_usage DOUBLE").repartition(partitions)
    sm = spark.createDataFrame(seq, "run_id STRING, metric STRING, value DOUBLE").repartition(partitions)
    return sm, bt


def test_run_metrics_do_not_depend_on_row_order(spark: Any) -> None:
    results = []
    for seed, parts in ((1, 1), (2, 3), (3, 5)):
        sm, bt = _frames(spark, seed, parts)
        results.append({r["metric"]: r["value"] for r in combine_metrics(sm, bt).collect()})
    assert results[0] == results[1] == results[2]  # exact equality: the same bits
    m = results[0]
    # the figures are the ones numpy gives for the same data (mean over ticks of the per-tick population std)
    per_tick = [[USAGE[(t * 3 + b) % len(USAGE)] * (1 + t / 7) for b in range(5)] for t in range(40)]
    assert m["load_std_mean"] == pytest.approx(float(np.mean([np.std(u) for u in per_tick])), rel=1e-12)
    assert m["load_max_over_mean_mean"] == pytest.approx(
        float(np.mean([max(u) / np.mean(u) for u in per_tick])), rel=1e-12)
    assert m["throughput_moved"] == pytest.approx(4.8, abs=2.0)  # 1e16 and -1e16 cancel in the sorted order
    assert m["task_peak_rss_mb"] == 9.0
