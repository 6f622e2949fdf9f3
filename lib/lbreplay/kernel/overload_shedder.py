"""``org.apache.pulsar.broker.loadbalance.impl.OverloadShedder`` (the default before 2.10).

Sheds from every broker whose usage reaches ``loadBalancerBrokerOverloadedThresholdPercentage``
enough throughput to land 5 % below it (``ADDITIONAL_THRESHOLD_PERCENT_MARGIN``), largest short-term
bundles first. Equality counts as overloaded (the source skips only ``usage < threshold``); there is no
minimum-throughput gate; a broker with a single bundle is only warned about. The usage is
``getMaxResourceUsage()`` before PIP-358 and the weighted max since 4.0 (``overload_check_usage``).
Across ticks only the table length of ``selectedBundlesCache`` (the ``ArrayListMultimap`` field the plan is put
into, cleared each call; state key ``selectedBundlesCache``, :mod:`lbreplay.kernel.guava_multimap`). Brokers are
visited in ``LoadData.getBrokerData()``'s JVM order and bundles of equal throughput keep
``getBundleDataForLoadShedding()``'s order (:mod:`lbreplay.kernel.load_data_order`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.guava_multimap import SelectedBundlesCache
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.load_data_order import broker_data_order
from lbreplay.kernel.resource_usage import overload_check_usage
from lbreplay.kernel.selection import (
    OwnedCandidates,
    SkipReasons,
    StatelessShedder,
    population_std,
    ranked_candidates,
    select_largest_first,
    shedding_candidates,
    short_term_throughput,
)
from lbreplay.kernel.strategy import Unload

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05  # OverloadShedder.ADDITIONAL_THRESHOLD_PERCENT_MARGIN
REASON = "resource usage above overload threshold"
# Skip reasons, least to most progress: nothing overloaded; overloaded but no/one bundle; nothing selectable.
SKIPS = ("NoBrokers", "Balanced", "NoBundles", "SoleBundle", "NoCandidates")


class OverloadShedder(StatelessShedder):
    """``OverloadShedder.findBundlesForUnloading``; across ticks only its plan multimap's table length."""

    def __init__(self) -> None:
        super().__init__()
        self.selected_bundles_cache = SelectedBundlesCache()  # the plan's multimap: its table kept across runs

    def get_state(self) -> dict[str, Any]:
        table = self.selected_bundles_cache.get_state()
        return {"selectedBundlesCache": table} if table else {}

    def set_state(self, state: dict[str, Any] | None) -> None:
        self.selected_bundles_cache = SelectedBundlesCache()
        self.selected_bundles_cache.set_state((state or {}).get("selectedBundlesCache"))

    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]:
        brokers = ld.brokers
        skip = SkipReasons(SKIPS)
        self._stats = {}
        if len(brokers) == 0:
            skip.note("NoBrokers")
            return self._finish([], skip)
        overload = conf.overload_threshold
        usage = overload_check_usage(brokers.usage, brokers.limit, conf)
        throughput = brokers.msg_throughput
        need = throughput * (usage - overload + ADDITIONAL_THRESHOLD_PERCENT_MARGIN)
        counts = ld.bundle_count()
        overloaded = ~(usage < overload)  # equality (and NaN, as in Java) counts as overloaded
        self._stats = {
            "loadAvg": float(np.mean(usage)),
            "loadStd": population_std(usage),
            "overloadThreshold": overload,
            "usage": {brokers.ids[i]: float(u) for i, u in enumerate(usage)},
        }
        if not overloaded.any():
            skip.note("Balanced")
            return self._finish([], skip)
        candidates = OwnedCandidates(ld, shedding_candidates(ld, conf))
        values = short_term_throughput(ld)
        at_least_one = bool(conf["atLeastOneBundleSelected"])
        out: list[Unload] = []
        for i in broker_data_order(ld)[overloaded[broker_data_order(ld)]].tolist():  # getBrokerData().forEach
            if counts[i] > 1:
                rows, vals = ranked_candidates(ld, i, values, candidates)
                picked = select_largest_first(rows, vals, float(need[i]), at_least_one)
                if picked.size == 0:
                    skip.note("NoCandidates")
                for k, row in enumerate(picked.tolist()):
                    out.append(
                        Unload(
                            broker=brokers.ids[i],
                            bundle=ld.bundles.names[row],
                            reason=REASON,
                            details={
                                "usage": float(usage[i]),
                                "threshold": overload,
                                "required": float(need[i]),
                                "brokerThroughput": float(throughput[i]),
                                "bundleLoad": float(vals[k]),
                            },
                        )
                    )
            else:
                skip.note("SoleBundle" if counts[i] == 1 else "NoBundles")
        return self._finish(out, skip)
