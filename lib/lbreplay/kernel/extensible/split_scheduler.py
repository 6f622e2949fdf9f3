"""``SplitScheduler`` (PIP-192): the extensible load manager's split cycle around
``DefaultNamespaceBundleSplitStrategyImpl``."""

from __future__ import annotations

from typing import Any

from lbreplay.kernel.bundle_split import SplitDecision
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.default_namespace_bundle_split_strategy import DefaultNamespaceBundleSplitStrategy

SPLIT_STRATEGY = "DefaultNamespaceBundleSplitStrategyImpl"


class SplitScheduler:
    """``SplitScheduler.execute`` every ``loadBalancerSplitIntervalMinutes`` (the first run at once): the split
    strategy over every broker's bundle stats (see ``DefaultNamespaceBundleSplitStrategy.find_bundles_to_split``
    for the candidate rows)."""

    def __init__(self, splitter: DefaultNamespaceBundleSplitStrategy | None = None) -> None:
        self.splitter = splitter if splitter is not None else DefaultNamespaceBundleSplitStrategy()
        self.last_ms: int | None = None

    def due(self, now_ms: int, conf: PulsarConfig) -> bool:
        """True (and the run recorded) on the first call and once an interval passed since the last run."""
        interval_ms = int(conf["loadBalancerSplitIntervalMinutes"]) * 60_000
        if self.last_ms is not None and now_ms - self.last_ms < interval_ms:
            return False
        self.last_ms = now_ms
        return True

    def find(self, conf: PulsarConfig, **candidates: Any) -> list[SplitDecision]:
        """One run of the strategy over ``candidates`` (the keyword rows of ``find_bundles_to_split``)."""
        return self.splitter.find_bundles_to_split(conf, **candidates)
