"""``UnloadScheduler`` (PIP-192): the extensible load manager's shedding cycle around ``TransferShedder``."""

from __future__ import annotations

from collections.abc import Callable

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.transfer_shedder import TransferShedder, expire_recently_unloaded_bundles
from lbreplay.kernel.modular_load_manager import Shedding
from lbreplay.kernel.strategy import Unload


class UnloadScheduler:
    """``UnloadScheduler.execute``: skip when shedding is off, expire ``recentlyUnloadedBundles`` older than the
    grace period, skip with at most one available broker, run ``TransferShedder.findBundlesForUnloading`` and
    record every issued decision's bundle and source broker as recently unloaded at ``now``."""

    def __init__(self, shedder: TransferShedder | None = None) -> None:
        self.shedder = shedder if shedder is not None else TransferShedder()

    def execute(
        self, ctx: ExtensibleContext, conf: PulsarConfig, issue: Callable[[Unload], bool] | None = None
    ) -> Shedding:
        """The decisions issued, why none were (``Disabled``, ``NoBrokers`` or the shedder's reason) and the
        shedder's figures. ``issue`` (default: all) decides which planned decisions are issued; the
        recently-unloaded maps of ``ctx`` record the issued ones."""
        if not (conf["loadBalancerEnabled"] and conf["loadBalancerSheddingEnabled"]):
            return Shedding([], "Disabled")
        expire_recently_unloaded_bundles(ctx.recently_unloaded_bundles, ctx.now_ms, conf)
        if int(ctx.available.sum()) <= 1:
            return Shedding([], "NoBrokers")  # "Only 1 broker available: no load shedding will be performed"
        issued = []
        for u in self.shedder.find_bundles_for_unloading(ctx, conf):
            if issue is not None and not issue(u):
                continue
            ctx.recently_unloaded_bundles[u.bundle] = ctx.now_ms
            ctx.recently_unloaded_brokers[u.broker] = ctx.now_ms
            issued.append(u)
        stats = dict(self.shedder.stats())
        if issued:
            stats["unloadDetails"] = [{"bundle": u.bundle, **u.details} for u in issued]
        return Shedding(issued, None if issued else self.shedder.skip_reason(), stats)
