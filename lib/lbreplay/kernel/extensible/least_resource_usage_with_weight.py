"""Extensible ``LeastResourceUsageWithWeight`` (``extensions.strategy.LeastResourceUsageWithWeight.select``).

Unlike the modular strategy of the same name it keeps no EWMA of its own: it reads each candidate's reported
``BrokerLoadData.weightedMaxEMA``.

```
select(C):
    if C empty: None
    noData = brokers of C without BrokerLoadData
    if |C| > |noData|:
        avg = mean(weightedMaxEMA over C with data)
        best = [b in C with data and weightedMaxEMA + diff <= avg]    # diff = ...DifferenceThresholdPercentage/100
    if best empty: best = C                                          # includes no-data brokers
    uniform random pick from best
```
Candidates are visited in row order (sorted broker ids) instead of Java ``HashSet`` order; the uniform pick
(``ThreadLocalRandom.nextInt``) uses the generator passed in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.context import ExtensibleContext


def best_brokers(candidates: np.ndarray, ctx: ExtensibleContext, conf: PulsarConfig) -> np.ndarray:
    """Rows ``select`` draws from (ascending row order); empty when there are no candidates."""
    cand = np.flatnonzero(np.asarray(candidates, dtype=bool))
    if cand.size == 0:
        return cand
    with_data = cand[ctx.has_load_data[cand]]
    best = with_data[:0]
    if with_data.size > 0:
        loads = ctx.load.weighted_max_ema[with_data]
        total = 0.0
        for v in loads.tolist():  # summed in visiting order, as Java does
            total += v
        avg = total / with_data.size
        diff = conf["loadBalancerAverageResourceUsageDifferenceThresholdPercentage"] / 100.0
        best = with_data[loads + diff <= avg]
    if best.size == 0:
        best = cand
    return best


class LeastResourceUsageWithWeight:
    """``BrokerSelectionStrategy`` of the extensible load manager (stateless)."""

    def select(
        self, candidates: np.ndarray, ctx: ExtensibleContext, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """Pick a broker row among the ``candidates`` mask; -1 if there is none."""
        best = best_brokers(candidates, ctx, conf)
        if best.size == 0:
            return -1
        return int(best[int(rng.integers(best.size))])

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None
