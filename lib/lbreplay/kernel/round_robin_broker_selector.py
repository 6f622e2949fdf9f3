"""``RoundRobinBrokerSelector`` (PULSAR-LB-SPEC.md §4.4): placement for shedding-excluded namespaces (PIP-380).

Mirrors ``org.apache.pulsar.broker.loadbalance.impl.RoundRobinBrokerSelector``: an ``AtomicInteger`` counter that
wraps to 0 after ``Integer.MAX_VALUE`` and a cached candidate list, refreshed when its size differs from the
candidates', when the index falls outside it, or when the cached pick is no longer a candidate. Java copies the
candidate ``HashSet`` (``List.copyOf``) in its iteration order; the candidates come in that order
(:mod:`lbreplay.kernel.broker_candidate_cache`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import LoadData

INT_MAX = 2**31 - 1


class RoundRobinBrokerSelector:
    """State: ``count`` and the cached broker-id list ``ref``."""

    def __init__(self) -> None:
        self.count = 0
        self.cache: list[str] = []

    def select_ids(self, candidates: list[str]) -> str | None:
        """``selectBroker`` over broker ids (``candidates`` in the order the cache copies them)."""
        size = len(candidates)
        if size == 0:
            return None
        cache = self.cache
        index = self.count % size
        self.count = 0 if self.count == INT_MAX else self.count + 1
        if len(cache) <= index or size != len(cache):
            cache = list(candidates)
        selected = cache[index]
        if selected not in candidates:
            cache = list(candidates)
            selected = cache[index]
        self.cache = cache
        return selected

    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """``ModularLoadManagerStrategy.selectBroker`` on broker rows in the candidate set's order; -1 if none.
        ``rng`` is unused."""
        ids = [ld.brokers.ids[i] for i in np.asarray(candidates, dtype=np.int64)]
        pick = self.select_ids(ids)
        return -1 if pick is None else ld.brokers.index(pick)

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Pulsar keeps the cache; a stale entry is replaced at the next pick."""

    def get_state(self) -> dict[str, Any]:
        return {"count": self.count, "cache": list(self.cache)}

    def set_state(self, state: dict[str, Any]) -> None:
        state = state or {}
        self.count = int(state.get("count", 0))
        self.cache = [str(b) for b in state.get("cache", [])]
