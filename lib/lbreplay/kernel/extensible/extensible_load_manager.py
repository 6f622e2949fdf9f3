"""``ExtensibleLoadManagerImpl`` (PIP-192) on the leader: its unload and split schedulers and its assignment."""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import filter_brokers
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.extensible.split_scheduler import SplitScheduler
from lbreplay.kernel.extensible.transfer_shedder import TransferShedder
from lbreplay.kernel.extensible.unload_scheduler import UnloadScheduler

PLACEMENT_STRATEGY = "LeastResourceUsageWithWeight"
SHEDDING_STRATEGY = "TransferShedder"


class ExtensibleLoadManager:
    """The extensible leader's strategies: ``TransferShedder`` in the ``UnloadScheduler``,
    ``DefaultNamespaceBundleSplitStrategyImpl`` in the ``SplitScheduler``, ``LeastResourceUsageWithWeight``."""

    def __init__(self, shedder: TransferShedder | None = None) -> None:
        self.unload_scheduler = UnloadScheduler(shedder)
        self.split_scheduler = SplitScheduler()
        self.selector = LeastResourceUsageWithWeight()

    @property
    def shedder(self) -> TransferShedder:
        return self.unload_scheduler.shedder

    def select_broker(self, ctx: ExtensibleContext, conf: PulsarConfig, bundle: str,
                      rng: np.random.Generator) -> int:
        """``ExtensibleLoadManagerImpl.selectAsync``: the broker filter pipeline, then the placement strategy;
        the broker row, -1 when no broker is left."""
        candidates = filter_brokers(ctx, conf, bundle)
        if candidates is None or not candidates.any():
            return -1
        return self.selector.select(candidates, ctx, conf, rng)
