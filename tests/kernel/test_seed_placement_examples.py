"""Worked placement examples of the seed documents, run through the kernel."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.least_long_term_message_rate import LeastLongTermMessageRate
from lbreplay.kernel.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.load_data import THR_IN, THR_OUT
from lbreplay.kernel.modular_load_manager import assign, do_load_shedding
from lbreplay.kernel.placement import LeaderState, select_broker
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.threshold_shedder import ThresholdShedder
from tests.kernel.placement_fixtures import Br, Bu, World, conf

FULL = "0x00000000_0xffffffff"
MB = 1024 * 1024


def _two_brokers_two_bundles() -> World:
    """broker1 / broker2 at long-term 100 / 110; two bundles of 20 each (BundleData long-term 10 in + 10 out)."""
    return World(
        brokers={"broker1:8080": Br(long_rate_in=100), "broker2:8080": Br(long_rate_in=110)},
        bundles={f"t/ns1/{FULL}": Bu(long_rate=(10, 10)), f"t/ns2/{FULL}": Bu(long_rate=(10, 10))},
    )


def test_lltmr_preallocation_avoids_over_placement() -> None:
    """Seed 001 (LeastLongTermMessageRate, §1.2 over-placement): brokers at 100 and 110, two bundles of 20. The
    first goes to broker1; broker1's load report has not changed, but its score now includes the preallocated
    bundle (100 + 20 = 120 > 110), so the second goes to broker2. (The seed says KB/s; LLTMR scores msg/s.)"""
    ld = _two_brokers_two_bundles().build()
    got = assign([f"t/ns1/{FULL}", f"t/ns2/{FULL}"], ld, conf(), LeastLongTermMessageRate(),
                 LeaderState.from_load_data(ld), NamespacePolicies(), np.random.default_rng(0))
    assert got == [(f"t/ns1/{FULL}", "broker1:8080"), (f"t/ns2/{FULL}", "broker2:8080")]


def test_lltmr_without_preallocation_would_over_place() -> None:
    """Seed 001 contrast: selectBroker without preallocateBundle sees the same stale scores twice and sends both
    bundles to broker1 -- the over-placement that preallocation prevents."""
    ld = _two_brokers_two_bundles().build()
    leader, pol = LeaderState.from_load_data(ld), NamespacePolicies()
    got = [select_broker(b, ld, conf(), LeastLongTermMessageRate(), leader, pol, np.random.default_rng(0))
           for b in (f"t/ns1/{FULL}", f"t/ns2/{FULL}")]
    assert got == ["broker1:8080", "broker1:8080"]


@pytest.mark.parametrize("even_spread", [False, True])
def test_threshold_shedder_with_lruww_over_places_on_the_least_loaded(even_spread: bool) -> None:
    """Seed 002 (AvgShedder motivation): scores 20, 51, 52, 80, 80, 80 with ThresholdShedder + LeastResourceUsageWithWeight
    at defaults. The average is 60.5, so ThresholdShedder sheds from the three 80% brokers (>= 60.5 + 10); LRUWW's
    best set is {EWMA + 10 <= avg} = only the 20% broker (51 + 10 > 60.5), so every unloaded bundle in the tick
    goes to it -- with stale data nothing changes between the three selections."""
    scores = {"b20": 20, "b51": 51, "b52": 52, "b80x": 80, "b80y": 80, "b80z": 80}
    w = World(brokers={f"{b}:8080": Br(usage=u, rate_in=100, rate_out=100) for b, u in scores.items()})
    for b in scores:
        w.bundles[f"t/{b}-hot/{FULL}"] = Bu(owner=f"{b}:8080", long_rate=(10, 10))
        w.bundles[f"t/{b}-cold/{FULL}"] = Bu(owner=f"{b}:8080", long_rate=(5, 5))
    ld = w.build()
    for b in scores:
        ld.brokers.msg_throughput_in[ld.brokers.index(f"{b}:8080")] = 100 * MB
        for kind, thr in (("hot", 20 * MB), ("cold", 10 * MB)):
            j = ld.bundles.index(f"t/{b}-{kind}/{FULL}")
            ld.bundles.short[j, THR_IN], ld.bundles.short[j, THR_OUT] = thr, 0.0
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=even_spread)
    lruww = LeastResourceUsageWithWeight()
    out = do_load_shedding(ld, c, ThresholdShedder(), lruww, LeaderState.from_load_data(ld), NamespacePolicies(),
                           np.random.default_rng(0), 1_700_000_000_000)
    assert sorted((u.broker, u.bundle) for u in out) == [
        (f"{b}:8080", f"t/{b}-hot/{FULL}") for b in ("b80x", "b80y", "b80z")
    ]
    assert {u.destination for u in out} == {"b20:8080"}
    if not even_spread:  # all six brokers are candidates: LRUWW's average is the seed's 60.5
        assert lruww.last_average == pytest.approx(0.605)
