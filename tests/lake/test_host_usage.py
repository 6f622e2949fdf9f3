"""One host-usage rule: the generator's Spark columns (``lake.host_usage``) equal the kernel's NumPy definitions
on random inputs -- ``LocalBrokerData.getMaxResourceUsage[WithWeight]`` (``kernel.resource_usage``) and
``ModularLoadManagerImpl.needBrokerDataUpdate`` folded over a broker's ticks (``kernel.broker_report``).

Each example is one small DataFrame of many rows (one Spark job), so the properties stay cheap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.kernel.broker_report import WrittenReports
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.resource_usage import overload_check_usage
from lbreplay.kernel.version_profile import PROFILES, profile_for

LINES = sorted(PROFILES)
RES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
SETTINGS = settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# usage / limit pairs with zero, equal and tiny limits (float32 rounding, the limit <= 0 branch)
_value = st.one_of(st.sampled_from([0.0, 1.0, 100.0, 800.0]), st.floats(0.0009765625, 5000.0, width=32))
_row = st.lists(_value, min_size=10, max_size=10)
_weight = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0])


@pytest.mark.spark
@SETTINGS
@given(rows=st.lists(_row, min_size=20, max_size=80), weights=st.tuples(_weight, _weight, _weight, _weight, _weight))
def test_report_usage_column_is_the_kernels_usage(spark, rows, weights) -> None:  # type: ignore[no-untyped-def]
    """``report_usage_column`` (what the generator compares in the write rule) == ``overload_check_usage`` (the
    kernel's U: weighted max from PIP-358, else ``getMaxResourceUsage()``), on every Pulsar line (one column
    each, one Spark job)."""
    from lbreplay.lake.host_usage import report_usage_column

    confs, columns = [], []
    for line in LINES:
        conf = PulsarConfig.resolve({
            "pulsarVersion": line, "loadBalancerCPUResourceWeight": weights[0],
            "loadBalancerMemoryResourceWeight": weights[1], "loadBalancerDirectMemoryResourceWeight": weights[2],
            "loadBalancerBandwithInResourceWeight": weights[3], "loadBalancerBandwithOutResourceWeight": weights[4]})
        prof = profile_for(line)
        weighted = prof.overload_checks_weighted
        confs.append(conf)
        columns.append(report_usage_column(
            weights=conf.resource_weights(), weighted=weighted,
            include_memory=prof.weighted_max_includes_memory if weighted else prof.max_usage_includes_memory
        ).alias(f"u{len(columns)}"))
    schema = ", ".join(f"{r}_{part} double" for r in RES for part in ("usage", "limit"))
    got = np.array([list(r) for r in spark.createDataFrame(rows, schema).select(*columns).collect()])
    arr = np.asarray(rows, dtype=np.float64)
    for k, conf in enumerate(confs):
        want = overload_check_usage(arr[:, 0::2], arr[:, 1::2], conf)
        np.testing.assert_allclose(got[:, k], want, rtol=1e-12, atol=0.0, err_msg=LINES[k])


_tick = st.tuples(st.sampled_from([0.0, 100.0, 105.0, 111.0, 1e4]), st.sampled_from([0.0, 1e6, 1.2e6]),
                  st.integers(0, 12), st.sampled_from([0.0, 0.3, 0.35, 0.45, 0.9]))


@pytest.mark.spark
@SETTINGS
@given(brokers=st.lists(st.lists(_tick, min_size=1, max_size=40), min_size=4, max_size=12),
       threshold=st.sampled_from([4.0, 10.0, 25.0]), max_minutes=st.sampled_from([3, 15]))
def test_report_write_ticks_is_need_broker_data_update(spark, brokers, threshold, max_minutes) -> None:  # type: ignore[no-untyped-def]
    """``report_write_ticks`` (Spark fold, no forced writes, no restarts) writes at the ticks the kernel's
    ``WrittenReports`` (``needBrokerDataUpdate``: > maxInterval, or the largest change > the threshold) does."""
    from lbreplay.lake.host_usage import report_write_ticks

    conf = PulsarConfig.resolve({"loadBalancerReportUpdateThresholdPercentage": threshold,
                                 "loadBalancerReportUpdateMaxIntervalMinutes": max_minutes})
    rows = [(b, t, rate, thr, nb, u, False) for b, ticks in enumerate(brokers) for t, (rate, thr, nb, u) in
            enumerate(ticks)]
    df = spark.createDataFrame(rows, "broker int, tick int, rate_total double, thr_total double, num_bundles int, "
                                     "usage double, forced boolean")
    got = sorted((r["broker"], r["tick"]) for r in report_write_ticks(
        df, tick_seconds=60, threshold_pct=threshold, max_interval_minutes=float(max_minutes)).collect())
    want = []
    for b, ticks in enumerate(brokers):
        reports = WrittenReports(1)
        for t, (rate, thr, nb, u) in enumerate(ticks):
            figures = [np.array([x], dtype=np.float64) for x in (rate, thr, nb, u)]
            if reports.due(t * 60_000, *figures, conf)[0]:
                reports.record(np.array([0]), t * 60_000, *figures)
                want.append((b, t))
    assert got == sorted(want)
