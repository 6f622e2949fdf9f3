"""Strategy interfaces of the modular load manager and the registry of their implementations.

Mirrors ``LoadSheddingStrategy`` (``findBundlesForUnloading``, ``onActiveBrokersChange``,
``onUnloadAttemptCompleted``) and ``ModularLoadManagerStrategy`` (``selectBroker``). A strategy object
holds Pulsar's cross-tick state (EWMA maps, hit counters …); ``get_state``/``set_state`` thread that
state through ``decide``'s ``strategyState`` and through replay ticks.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from lbreplay.kernel.config import PulsarConfig, short_class
from lbreplay.kernel.load_data import LoadData


@dataclass
class Unload:
    """One bundle a strategy selected for unloading (an entry of the returned multimap)."""

    broker: str
    bundle: str
    reason: str
    destination: str | None = None  # set where the strategy or the load manager chose it
    details: dict[str, float] = field(default_factory=dict)
    # the brokers the placement drew ``destination`` from at random (sorted ids); None: no draw
    drawn_among: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Kept:
    """A planned bundle ``ModularLoadManagerImpl.doLoadShedding`` left on its owner: ``selectBroker`` chose the
    owner itself (WARN "The destination broker {} is the same as the current owner broker for Bundle {}"), so no
    unload. ``drawn_among``: the brokers that choice was drawn from at random (sorted ids); None: no draw."""

    broker: str
    bundle: str
    drawn_among: tuple[str, ...] | None = None


class LoadSheddingStrategy(Protocol):
    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]: ...

    def on_active_brokers_change(self, active: set[str]) -> None: ...

    def on_unload_attempt_completed(self, bundles: set[str]) -> None: ...

    def stats(self) -> dict[str, Any]:
        """Figures computed by the last call (``loadAvg``, ``loadStd`` …), for ``decide``'s ``stats``."""
        ...

    def skip_reason(self) -> str | None:
        """Why the last call decided nothing, in Pulsar's words, or None."""
        ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


def best_draw(best: np.ndarray, rng: np.random.Generator) -> tuple[int, np.ndarray | None]:
    """``bestBrokers.get(ThreadLocalRandom.current().nextInt(size))`` of the placement strategies
    (``LeastLongTermMessageRate``, ``LeastResourceUsageWithWeight``; AvgShedder's ``getExpectedBroker``), drawn
    only when several are best: the row (-1 for none) and the rows drawn among (ascending; None: no draw). The
    seeded draw is over the rows in ascending order, whatever order the candidates came in (Pulsar's draw is
    random: the candidate set's order does not decide it). The one place a placement draws."""
    if best.size <= 1:
        return (int(best[0]) if best.size else -1), None
    rows = np.sort(best)
    return int(rows[rng.integers(best.size)]), rows


class ModularLoadManagerStrategy(Protocol):
    def select_broker(
        self, candidates: np.ndarray, bundle: str, ld: LoadData, conf: PulsarConfig, rng: np.random.Generator
    ) -> int:
        """Pick a broker row among ``candidates`` (broker rows in the candidate set's iteration order; a seeded draw
        among equally good brokers is over them in ascending order) for ``bundle``; -1 if none. A strategy that
        draws keeps the rows it drew among in ``drawn`` (ascending; None: the last call drew nothing)."""
        ...

    def on_active_brokers_change(self, active: set[str]) -> None: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


# Short Pulsar class name -> "module:Class" implementing it.
SHEDDING_STRATEGIES: dict[str, str] = {
    "OverloadShedder": "lbreplay.kernel.overload_shedder:OverloadShedder",
    "ThresholdShedder": "lbreplay.kernel.threshold_shedder:ThresholdShedder",
    "UniformLoadShedder": "lbreplay.kernel.uniform_load_shedder:UniformLoadShedder",
    "AvgShedder": "lbreplay.kernel.avg_shedder:AvgShedder",
    "TransferShedder": "lbreplay.kernel.extensible.transfer_shedder:TransferShedder",
}
PLACEMENT_STRATEGIES: dict[str, str] = {
    "LeastLongTermMessageRate": "lbreplay.kernel.least_long_term_message_rate:LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight": "lbreplay.kernel.least_resource_usage_with_weight:LeastResourceUsageWithWeight",
    "AvgShedder": "lbreplay.kernel.avg_shedder:AvgShedder",
    "RoundRobinBrokerSelector": "lbreplay.kernel.round_robin_broker_selector:RoundRobinBrokerSelector",
}


def _load(spec: str) -> type:
    module, _, cls = spec.partition(":")
    return getattr(importlib.import_module(module), cls)


def strategy_class(kind: str, class_name: str) -> type:
    """The implementation of a Pulsar strategy class (full or short name); ``kind`` is 'shedding' or 'placement'."""
    from lbreplay.errors import UsageError

    table = SHEDDING_STRATEGIES if kind == "shedding" else PLACEMENT_STRATEGIES
    short = short_class(class_name)
    if short not in table:
        key = "loadBalancerLoadSheddingStrategy" if kind == "shedding" else "loadBalancerLoadPlacementStrategy"
        raise UsageError(f"config.{key}: unsupported strategy {class_name!r}; supported: {', '.join(table)}")
    return _load(table[short])
