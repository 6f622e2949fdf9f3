"""The leader's load manager behind one interface (PULSAR-LB-SPEC.md §4, §6): ``ModularLoadManagerImpl`` and
``ExtensibleLoadManagerImpl`` (PIP-192).

Both families run the same cycle on the leader; only the view each reads differs (``LoadData`` for the modular
manager, ``ExtensibleContext`` for the extensible one):

* refresh -- the modular ``updateAll`` (``cleanupDeadBrokersData``, ``updateAllBrokerData``, ``updateBundleData``;
  :meth:`ModularLoadManager.update_all`, :meth:`ModularLoadManager.refresh`); the extensible leader's stores on a
  broker's deletion (the ``BrokerRegistry`` listener takes it out of the available set,
  ``ServiceUnitStateChannelImpl.doCleanup`` removes its load data: :meth:`ExtensibleLoadManager.refresh`);
* shed -- ``doLoadShedding`` / ``UnloadScheduler.execute``;
* split -- ``checkNamespaceBundleSplit`` (the end of ``updateAll``) / ``SplitScheduler.execute``;
* place -- ``selectBrokerForAssignment`` / ``ExtensibleLoadManagerImpl.assign``;
* the owner of a bundle, and the leader's state between two calls (``set_state`` / ``get_state``: ``decide``'s
  ``strategyState``);
* the two timer tasks -- ``LoadSheddingTask`` and ``LoadResourceQuotaUpdaterTask`` (modular), the
  ``UnloadScheduler`` and ``SplitScheduler`` timers (extensible): :class:`LeaderTimers`.

``decide`` and the replay drivers create the manager with :func:`create_load_manager` and call it; neither
assembles Pulsar's steps itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol, TypeVar, Union

import numpy as np

from lbreplay.kernel.config import PulsarConfig, is_extensible
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.extensible_load_manager import ExtensibleLoadManager
from lbreplay.kernel.leader_election import runs_at
from lbreplay.kernel.load_data import LoadData
from lbreplay.kernel.modular_load_manager import LeaderTask, ModularLoadManager, RunClock, Shedding, Splitting
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.split_algorithms import TopicStats
from lbreplay.kernel.strategy import Unload

__all__ = [
    "AnyLoadManager", "ExtensibleLoadManager", "LeaderTimers", "LoadManager", "ModularLoadManager", "Shedding",
    "Splitting", "create_load_manager", "task_runs",
]

ViewT = TypeVar("ViewT", LoadData, ExtensibleContext, contravariant=True)


class LoadManager(Protocol[ViewT]):
    """What the leader does with its view, for both families (``LoadManager`` / ``ExtensibleLoadManager``)."""

    family: str

    def refresh(self, view: ViewT, departed: Iterable[str] = ()) -> list[str]:
        """The leader's refresh of its view: ``updateAll``'s ``cleanupDeadBrokersData`` (modular) or the stores'
        clean-up of a deleted broker (extensible); the brokers dropped."""
        ...

    def shed(self, view: ViewT, now_ms: int, clock: RunClock | None = None,
             issue: Callable[[Unload], bool] | None = None) -> Shedding:
        """One shedding pass: the unloads issued (``issue`` may refuse one), or why none were."""
        ...

    def split(self, view: ViewT, layouts_for: Callable[[Iterable[str]], Mapping[str, np.ndarray]],
              topics: Mapping[str, TopicStats] | None = None) -> Splitting:
        """One split check (``checkNamespaceBundleSplit`` / ``SplitScheduler.execute``) over the namespaces'
        layouts (``layouts_for(namespaces)``)."""
        ...

    def assign(self, bundles: Iterable[str], view: ViewT) -> list[tuple[str, str | None]]:
        """Each bundle's broker in order (None: no broker left), as the leader places it at its lookup."""
        ...

    def owner(self, view: ViewT, bundle: str) -> str | None:
        """The broker the view says owns ``bundle``."""
        ...

    def set_state(self, state: Mapping[str, Any], view: ViewT, given: Collection[str] = ()) -> None:
        """Restore the leader's state between two calls (``strategyState``); ``given``: the scheduler maps the
        view already holds as the leader's."""
        ...

    def get_state(self, view: ViewT) -> dict[str, Any]:
        """The leader's state after a call (``strategyState`` without ``version`` and ``mode``)."""
        ...


AnyLoadManager = Union[ModularLoadManager, ExtensibleLoadManager]


def create_load_manager(conf: PulsarConfig, policies: NamespacePolicies | None,
                        rng: np.random.Generator) -> AnyLoadManager:
    """``loadManagerClassName``: ``ExtensibleLoadManagerImpl`` (or the ``TransferShedder`` strategy) gives the
    extensible manager, anything else ``ModularLoadManagerImpl`` with its configured strategies."""
    if is_extensible(conf):
        return ExtensibleLoadManager(conf=conf, rng=rng)
    return ModularLoadManager(conf, policies or NamespacePolicies(), rng)


def task_runs(task: LeaderTask, now_ms: int, interval_minutes: int, timer_minute: int | None) -> bool:
    """Does a timed leader task run now: at its timer minutes (``kernel.leader_election``) when the leader's
    election is known, else one interval after its last run (``LeaderTask.due``)."""
    if timer_minute is not None:
        return runs_at(timer_minute, int(interval_minutes))
    return task.due(now_ms, int(interval_minutes) * 60_000)


class LeaderTimers:
    """The leader's two timed tasks: ``LoadSheddingTask`` (``loadBalancerSheddingIntervalMinutes``) and
    ``LoadResourceQuotaUpdaterTask`` (``loadBalancerResourceQuotaUpdateIntervalMinutes``), both scheduled by
    ``ModularLoadManagerImpl.startLoadBalancerTasks`` at a fixed rate; the extensible ``UnloadScheduler`` runs on
    the shedding interval too (its split timer is ``SplitScheduler.due``)."""

    def __init__(self, conf: PulsarConfig) -> None:
        self.conf = conf
        self.shedding = LeaderTask()
        self.quota = LeaderTask()

    def shedding_due(self, now_ms: int, timer_minute: int | None) -> bool:
        return task_runs(self.shedding, now_ms, self.conf["loadBalancerSheddingIntervalMinutes"], timer_minute)

    def quota_due(self, now_ms: int, timer_minute: int | None) -> bool:
        return task_runs(self.quota, now_ms, self.conf["loadBalancerResourceQuotaUpdateIntervalMinutes"],
                         timer_minute)

    def first_runs_together(self, timer_minute: int | None) -> bool:
        """Both tasks' first runs at one instant (``startLoadBalancerTasks`` scheduled ``LoadSheddingTask``
        first, so it runs first)."""
        return timer_minute == int(self.conf["loadBalancerSheddingIntervalMinutes"])
