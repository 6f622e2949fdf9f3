"""``ExtensibleLoadManagerImpl`` (PIP-192) on the leader: its unload and split schedulers and its assignment."""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.broker_filters import filter_brokers
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.extensible.split_scheduler import SplitScheduler
from lbreplay.kernel.extensible.transfer_shedder import TransferShedder
from lbreplay.kernel.extensible.unload_scheduler import UnloadScheduler
from lbreplay.kernel.modular_load_manager import RunClock, Shedding
from lbreplay.kernel.strategy import Unload

PLACEMENT_STRATEGY = "LeastResourceUsageWithWeight"
SHEDDING_STRATEGY = "TransferShedder"


class ExtensibleLoadManager:
    """The extensible leader's strategies: ``TransferShedder`` in the ``UnloadScheduler``,
    ``DefaultNamespaceBundleSplitStrategyImpl`` in the ``SplitScheduler``, ``LeastResourceUsageWithWeight``.
    ``conf`` and ``rng`` serve :meth:`shed` and :meth:`assign` (the ``kernel.load_manager`` interface)."""

    family = "extensible"

    def __init__(self, shedder: TransferShedder | None = None, *, conf: PulsarConfig | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.unload_scheduler = UnloadScheduler(shedder)
        self.split_scheduler = SplitScheduler()
        self.selector = LeastResourceUsageWithWeight()
        self.conf = conf if conf is not None else PulsarConfig.resolve({})
        self.rng = rng if rng is not None else np.random.default_rng(0)

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

    def shed(self, view: ExtensibleContext, now_ms: int, clock: RunClock | None = None,
             issue: Callable[[Unload], bool] | None = None) -> Shedding:
        """``UnloadScheduler.execute`` on the leader's stores (``view.now_ms`` is the scheduler's clock)."""
        return self.unload_scheduler.execute(view, self.conf, issue)

    def assign(self, bundles: Iterable[str], view: ExtensibleContext,
               assigned: MutableMapping[str, str] | None = None) -> list[tuple[str, str | None]]:
        """``ExtensibleLoadManagerImpl.assign`` for each bundle in order: the owner the service-unit state channel
        has (``view.bundle_owners``, or ``assigned``: what this leader assigned before), else ``selectAsync``;
        each new choice goes into ``assigned``."""
        owners = view.bundle_owners or {}
        out: list[tuple[str, str | None]] = []
        for bundle in bundles:
            owner = owners.get(bundle) or (assigned.get(bundle) if assigned is not None else None)
            if owner is None:
                row = self.select_broker(view, self.conf, bundle, self.rng)
                owner = view.broker_ids[row] if row >= 0 else None
                if owner is not None and assigned is not None:
                    assigned[bundle] = owner
            out.append((bundle, owner))
        return out
