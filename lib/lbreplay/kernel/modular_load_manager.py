"""The modular load manager's leader (PULSAR-LB-SPEC.md §6, §4): ``ModularLoadManagerImpl``.

Mirrors ``ModularLoadManagerImpl.doLoadShedding`` (with ``shouldNamespacePoliciesUnload`` /
``shouldAntiAffinityNamespaceUnload`` and the destination chosen by ``selectBroker``), the strategy pairing of
``ModularLoadManagerImpl.initialize``, ``checkNamespaceBundleSplit`` and, for a list of bundles,
``selectBrokerForAssignment`` in order, and ``cleanupDeadBrokersData`` (``onActiveBrokersChange`` at every
refresh). :class:`ModularLoadManager` holds the leader's strategies and state and runs ``updateAll``
(:meth:`ModularLoadManager.update_all`); ``decide`` and the replay drive it through ``kernel.load_manager``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.bundle_split import SplitDecision, check_namespace_bundle_split
from lbreplay.kernel.config import PulsarConfig, short_class
from lbreplay.kernel.guava_multimap import plan_order
from lbreplay.kernel.leader_state import LeaderState
from lbreplay.kernel.load_data import LoadData, StoredRead, derived_cache, update_bundle_data
from lbreplay.kernel.naming import split_bundle_name
from lbreplay.kernel.placement import Placement, clear_preallocations, selection
from lbreplay.kernel.policies import NamespacePolicies, parse_broker_host
from lbreplay.kernel.split_algorithms import TopicStats
from lbreplay.kernel.strategy import Kept, LoadSheddingStrategy, ModularLoadManagerStrategy, Unload, strategy_class
from lbreplay.kernel.version_profile import profile_for

MINUTE_MS = 60_000


def create_strategies(conf: PulsarConfig) -> tuple[LoadSheddingStrategy, ModularLoadManagerStrategy]:
    """``ModularLoadManagerImpl.initialize``: the placement strategy from ``loadBalancerLoadPlacementStrategy``;
    when it is also a shedding strategy (AvgShedder) the shedding strategy must be the same class and the SAME
    instance is used for both, otherwise ``loadBalancerLoadSheddingStrategy`` is created on its own."""
    placement_name = conf["loadBalancerLoadPlacementStrategy"]
    shedding_name = conf["loadBalancerLoadSheddingStrategy"]
    profile = profile_for(conf["pulsarVersion"])
    absent = set(profile.absent_strategies) | (set() if profile.avg_shedder_available else {"AvgShedder"})
    for key, name in (("loadBalancerLoadPlacementStrategy", placement_name),
                      ("loadBalancerLoadSheddingStrategy", shedding_name)):
        if short_class(name) in absent:  # Reflections.createInstance would fail: the class is not in the jar
            raise InvalidInputError(
                f"config.{key}: {short_class(name)} does not exist in Pulsar {profile.name} "
                f"(pulsarVersion {conf['pulsarVersion']!r}); pick another strategy or a newer pulsarVersion")
    placement_cls = strategy_class("placement", placement_name)
    placement = placement_cls()
    if hasattr(placement, "find_bundles_for_unloading"):
        if short_class(shedding_name) != short_class(placement_name):
            raise UsageError(
                f"config.loadBalancerLoadSheddingStrategy: the load shedding strategy {shedding_name} "
                f"can't work with the placement strategy {placement_name}"
            )
        return placement, placement
    return strategy_class("shedding", shedding_name)(), placement


def prune_recently_unloaded(ld: LoadData, conf: PulsarConfig, now_ms: int) -> None:
    """Drop ``recentlyUnloadedBundles`` entries older than ``loadBalancerSheddingGracePeriodMinutes`` (strict ``<``)."""
    cutoff = now_ms - int(conf["loadBalancerSheddingGracePeriodMinutes"]) * MINUTE_MS
    ld.recently_unloaded_bundles = {b: t for b, t in ld.recently_unloaded_bundles.items() if not t < cutoff}


@dataclass
class RunClock:
    """The leader's clock through one ``doLoadShedding`` run, for a replay on the leader's timer: each planned
    bundle that reaches its destination choice or its unload call (``selectBroker``, the synchronous
    ``unloadNamespaceBundle``) takes one step of ``step_ms``; an unload is stamped in ``recentlyUnloadedBundles``
    when its step ends, and the run ends with its last step (``end_ms``). ``LoadSheddingTask`` starts the next run
    one interval after that end, so a bundle unloaded before a later step of its run is past a grace period of one
    interval at the next run, and one unloaded at the run's last step is not (Pulsar's ``<`` on equal
    milliseconds)."""

    step_ms: int = 1
    end_ms: int = 0


def do_load_shedding(
    ld: LoadData,
    conf: PulsarConfig,
    shedder: LoadSheddingStrategy,
    placement_strategy: ModularLoadManagerStrategy,
    leader_state: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    now_ms: int,
    available: np.ndarray | None = None,
    clock: RunClock | None = None,
    kept: list[Kept] | None = None,
) -> list[Unload]:
    """``ModularLoadManagerImpl.doLoadShedding``: the unloads the leader actually issues, in order.

    * Nothing when ``loadBalancerEnabled``/``loadBalancerSheddingEnabled`` is off, or when at most one broker is
      available ("Only 1 broker available") -- the strategy is not called, so its state does not advance.
    * Prunes ``recentlyUnloadedBundles`` by the grace period, then asks the strategy for its plan.
    * Brokers of the plan are visited in the strategy's ``ArrayListMultimap`` order (``asMap().forEach``: its
      ``HashMap``'s iteration order, :mod:`lbreplay.kernel.guava_multimap`), bundles in plan order.
      Skipped: shedding-excluded namespaces (PIP-380), bundles no other broker may own under the namespace
      isolation policies (2.11+), anti-affinity refusals. [3.x+] The destination is ``selectBroker`` (full pipeline, no
      preallocation, the owner stays a candidate); none or the owner itself -> skipped (the owner itself: WARN "The
      destination broker {} is the same as the current owner broker", appended to ``kept`` with the draw). Each
      unload carries the brokers its destination was drawn from (``Unload.drawn_among``). [2.x] no destination (the
      bundle is placed at its next lookup); 2.10 has no namespace-policies check.
    * Each issued unload is recorded in ``recentlyUnloadedBundles`` at ``now_ms`` (with a ``clock``: when its step
      ends, :class:`RunClock`).
    * ``on_unload_attempt_completed(planned bundles)`` runs in a ``finally``.
    """
    if not (conf["loadBalancerEnabled"] and conf["loadBalancerSheddingEnabled"]):
        return []
    br = ld.brokers
    avail = np.ones(len(br), dtype=bool) if available is None else np.asarray(available, dtype=bool)
    if clock is not None:
        clock.end_ms = now_ms
    if int(avail.sum()) <= 1:
        return []
    prune_recently_unloaded(ld, conf, now_ms)
    with derived_cache(ld):
        return _shed(ld, conf, shedder, placement_strategy, leader_state, policies, rng, now_ms, avail, clock, kept)


def _shed(
    ld: LoadData,
    conf: PulsarConfig,
    shedder: LoadSheddingStrategy,
    placement_strategy: ModularLoadManagerStrategy,
    leader_state: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    now_ms: int,
    avail: np.ndarray,
    clock: RunClock | None = None,
    kept: list[Kept] | None = None,
) -> list[Unload]:
    br = ld.brokers
    stamp = now_ms
    plan = shedder.find_bundles_for_unloading(ld, conf)
    planned = {u.bundle for u in plan}
    profile = profile_for(conf["pulsarVersion"])
    with_destination = profile.unload_with_destination
    excluded = profile.shedding_excluded_namespaces  # PIP-380 (4.1+)
    check_policies = with_destination or profile.unload_checks_namespace_policies  # #16476 (2.11+)
    place = selection(ld, conf, placement_strategy, leader_state, policies, avail) if check_policies else None
    issued: list[Unload] = []
    try:
        # asMap().forEach over the strategy's ArrayListMultimap: brokers in its HashMap's order, bundles as put
        for broker, bundles in plan_order(shedder, ((u.broker, u) for u in plan), conf["pulsarVersion"]):
            source = br.index(broker)
            for u in bundles:
                ns, _ = split_bundle_name(u.bundle)
                if excluded and policies.is_shedding_excluded(ns):
                    continue
                if place is not None:  # shouldNamespacePoliciesUnload (fills brokerCandidateCache)
                    place.policies_check(ns)
                    if not _other_broker_allowed(place.policy_rows(ns), source):
                        continue
                if policies.anti_affinity_group(ns) is not None and not policies.should_anti_affinity_namespace_unload(
                    ns, source, br, avail, leader_state.bundle_ranges
                ):  # without a group the check always passes
                    continue
                if clock is not None:  # this bundle's step: its destination choice or unload call
                    stamp = clock.end_ms = stamp + clock.step_ms
                dest: str | None = None
                drawn: tuple[str, ...] | None = None
                if place is not None and with_destination:
                    chosen = place.select(u.bundle, rng)  # select_broker
                    dest, drawn = chosen.broker, chosen.drawn_among
                    if dest is None:
                        continue
                    if dest == broker:  # "The destination broker {} is the same as the current owner broker"
                        if kept is not None:
                            kept.append(Kept(broker, u.bundle, drawn))
                        continue
                issued.append(Unload(broker, u.bundle, u.reason, dest, dict(u.details), drawn))
                ld.recently_unloaded_bundles[u.bundle] = stamp
    finally:
        shedder.on_unload_attempt_completed(planned)
    return issued


def _other_broker_allowed(rows: np.ndarray, source: int) -> bool:
    """``shouldNamespacePoliciesUnload`` (``policies.should_namespace_policies_unload``) on the rows of the
    namespace's policy set: some broker other than ``source`` passes."""
    return rows.size > 1 or (rows.size == 1 and int(rows[0]) != source)


def assign(
    bundles: Iterable[str],
    ld: LoadData,
    conf: PulsarConfig,
    placement_strategy: ModularLoadManagerStrategy,
    leader_state: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
) -> list[tuple[str, str | None]]:
    """``selectBrokerForAssignment`` for each bundle in order (with preallocation); (bundle, broker or None).

    The loop runs inside one ``load_data.derived_cache`` block, so per-broker figures are computed once and only
    the preallocation-dependent ones are refreshed after each placement.
    """
    return [(b, p.broker) for b, p in assign_detailed(bundles, ld, conf, placement_strategy, leader_state, policies,
                                                      rng, available)]


def assign_detailed(
    bundles: Iterable[str],
    ld: LoadData,
    conf: PulsarConfig,
    placement_strategy: ModularLoadManagerStrategy,
    leader_state: LeaderState,
    policies: NamespacePolicies,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    observed: Mapping[str, str] | None = None,
) -> list[tuple[str, Placement]]:
    """:func:`assign` with each bundle's :class:`Placement` (its ``drawn_among``: the brokers it was drawn from);
    ``observed``: per bundle, the broker the real leader preallocated it to (``Selection.assign_detailed``)."""
    seen = observed or {}
    with derived_cache(ld):
        place = selection(ld, conf, placement_strategy, leader_state, policies, available)
        return [(b, place.assign_detailed(b, rng, seen.get(b))) for b in bundles]  # select_broker_for_assignment


def strategies_state(shedder: LoadSheddingStrategy, placement: ModularLoadManagerStrategy) -> dict[str, Any]:
    """Both strategies' state for ``strategyState`` (one entry when they are the same instance)."""
    if shedder is placement:
        return {"shedding": shedder.get_state()}
    return {"shedding": shedder.get_state(), "placement": placement.get_state()}


class LeaderTask:
    """A task the leader runs every ``interval_ms`` (``LoadSheddingTask``, ``LoadResourceQuotaUpdaterTask``):
    the first run is one interval after leadership starts."""

    def __init__(self) -> None:
        self.last_ms: int | None = None

    def due(self, now_ms: int, interval_ms: int) -> bool:
        """True (and the run recorded) when one interval passed since the last run."""
        if self.last_ms is None:
            self.last_ms = now_ms
            return False
        if now_ms - self.last_ms >= interval_ms:
            self.last_ms = now_ms
            return True
        return False


@dataclass
class Shedding:
    """One ``doLoadShedding`` pass: the unloads issued, why none were (``skip``), the strategy's figures, and the
    planned bundles kept on their owner because ``selectBroker`` chose the owner (``kept``, :class:`Kept`)."""

    unloads: list[Unload]
    skip: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    kept: list[Kept] = field(default_factory=list)


@dataclass
class Splitting:
    """One split check: the splits it makes (each with ``namespace``, ``lower``, ``upper``, ``boundaries``,
    ``broker``, ``bundle``, ``algorithm``, ``reason``) and the strategy's figures (None: it keeps none)."""

    splits: list[Any]
    stats: dict[str, Any] | None = None


def restore_component(component: Any, saved: Mapping[str, Any] | None, class_name: str, key: str) -> None:
    """Restore a strategy's saved state (``strategyState.<key>``) when the same class saved it; a different class
    starts afresh, like a broker restarted with another strategy."""
    saved = saved or {}
    if saved.get("class") != class_name:
        return
    try:
        component.set_state(saved.get("state") or {})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"$.strategyState.{key}.state: cannot restore {class_name} state: {exc}") from None


class ModularLoadManager:
    """``ModularLoadManagerImpl`` on the leader: its strategies, ``LeaderState`` and namespace policies."""

    family = "modular"

    def __init__(self, conf: PulsarConfig, policies: NamespacePolicies, rng: np.random.Generator,
                 strategies: tuple[LoadSheddingStrategy, ModularLoadManagerStrategy] | None = None) -> None:
        self.conf = conf
        # LoadManagerShared.parseBrokerHost from 3.0.7 / 3.2.0 (VersionProfile.broker_host_by_last_colon)
        by_last_colon = profile_for(conf["pulsarVersion"]).broker_host_by_last_colon
        self.policies = replace(policies, host_of=parse_broker_host) if by_last_colon else policies
        self.rng = rng
        self.shedder, self.placement = strategies if strategies is not None else create_strategies(conf)
        self.leader_state: LeaderState | None = None
        self._active: frozenset[str] | None = None  # the brokers of the last cleanupDeadBrokersData
        self.assign_draws: dict[str, tuple[str, ...]] = {}  # the last assign's random draws: bundle -> drawn among

    def update_all(
        self,
        ld: LoadData,
        *,
        samples: int,
        refresh: bool,
        stored: StoredRead | None = None,
        after_samples: Callable[[LoadData], None] | None = None,
        leader_owned: Callable[[LoadData], set[str] | None] | None = None,
    ) -> None:
        """``ModularLoadManagerImpl.updateAll`` (and the ``updateBundleData`` of
        ``writeBundleDataOnZooKeeper``) on the leader's LoadData, whose brokers are the active ones:

        * ``cleanupDeadBrokersData`` when a report notification came (``refresh``) or the active brokers changed;
        * ``samples`` runs of ``updateBundleData`` (one per ``updateAll`` and per quota-task write), each one
          BundleData sample of every reported bundle (``stored``: the recorded BundleData a new one starts from);
          then every broker's ``TimeAverageBrokerData`` as reset (``after_samples`` sees it), [M] the BundleData of
          bundles no broker reported dropped, the preallocations cleared (``leader_owned``: the bundles the
          leader's ``getOwnedServiceUnits()`` holds; None: the reported-with-BundleData rule alone) and
          ``brokerToNamespaceToBundleRange`` rebuilt. ``checkNamespaceBundleSplit`` (:meth:`check_split`) ends
          ``updateAll``; the caller runs it with the bundle layouts."""
        active = frozenset(ld.brokers.ids)
        if refresh or active != self._active:
            self.cleanup_dead_brokers_data(active)
            self._active = active
        if not samples:
            return
        ld.tabd = None  # updateBundleData resets every broker's TimeAverageBrokerData from its samples
        for _ in range(samples):
            update_bundle_data(ld, stored)
        if after_samples is not None:
            after_samples(ld)
        if profile_for(self.conf["pulsarVersion"]).drop_unreported_bundle_data:
            ld.bundles.has_bundle_data &= ld.bundles.owner >= 0
        clear_preallocations(ld, leader_owned(ld) if leader_owned is not None else None)
        self.leader(ld).reload(ld)

    def refresh(self, ld: LoadData, departed: Iterable[str] = ()) -> list[str]:
        """One ``updateAll`` notification without new samples: ``cleanupDeadBrokersData`` on the brokers ``ld``
        holds (a broker gone from it is ``departed`` implicitly; ``departed`` is for the interface's sake). Returns
        the brokers the last refresh had that ``ld`` no longer has."""
        before = self._active or frozenset()
        self.update_all(ld, samples=0, refresh=True)
        return sorted((before - frozenset(ld.brokers.ids)) | (set(departed) & before))

    def cleanup_dead_brokers_data(self, active: Iterable[str]) -> None:
        """``ModularLoadManagerImpl.cleanupDeadBrokersData``, the first step of every ``updateAll`` on the leader:
        ``onActiveBrokersChange(activeBrokers)`` on the shedding strategy, then on the placement strategy (both
        calls even when they are one instance, as the source does). ThresholdShedder and
        LeastResourceUsageWithWeight forget the EWMA of a broker that left, so it restarts from its raw usage when
        the broker returns."""
        if not profile_for(self.conf["pulsarVersion"]).active_brokers_change_hook:  # 2.10 / 2.11 (#19560)
            return
        current = set(active)
        self.shedder.on_active_brokers_change(current)
        self.placement.on_active_brokers_change(current)

    def leader(self, ld: LoadData) -> LeaderState:
        """The leader's state (created from the first LoadData it sees)."""
        if self.leader_state is None:
            self.leader_state = LeaderState.from_load_data(ld)
        return self.leader_state

    def shed(self, ld: LoadData, now_ms: int, clock: RunClock | None = None,
             issue: Callable[[Unload], bool] | None = None) -> Shedding:
        """``doLoadShedding`` with the reason nothing was unloaded: ``Disabled``, ``NoBrokers`` ("Only 1 broker
        available"), the strategy's own reason, or ``NoDestination`` (planned, but none issued). ``issue`` sees each
        issued unload in order (the caller's bookkeeping; doLoadShedding has already recorded it)."""
        conf = self.conf
        if not (conf["loadBalancerEnabled"] and conf["loadBalancerSheddingEnabled"]):
            return Shedding([], "Disabled")
        if len(ld.brokers) <= 1:
            return Shedding([], "NoBrokers")
        kept: list[Kept] = []
        unloads = do_load_shedding(ld, conf, self.shedder, self.placement, self.leader(ld), self.policies,
                                   self.rng, now_ms, clock=clock, kept=kept)
        if issue is not None:
            unloads = [u for u in unloads if issue(u)]
        stats = dict(self.shedder.stats())
        if unloads:
            stats["unloadDetails"] = [{"bundle": u.bundle, **u.details} for u in unloads]
        skip = None if unloads else (self.shedder.skip_reason() or "NoDestination")
        return Shedding(unloads, skip, stats, kept)

    def check_split(
        self,
        ld: LoadData,
        layouts: Mapping[str, np.ndarray],
        *,
        should_unload: Callable[[str, str], bool] | None = None,
        topics: Mapping[str, TopicStats] | None = None,
    ) -> list[SplitDecision]:
        """``checkNamespaceBundleSplit``: the splits of this refresh. "Make sure the same bundle is not selected
        again": each parent's BundleData goes before the split is tried (also when it fails)."""
        found = check_namespace_bundle_split(ld, self.conf, layouts, should_unload=should_unload, topics=topics)
        for d in found:
            row = ld.bundles.index(d.bundle)
            if row >= 0:
                ld.bundles.has_bundle_data[row] = False
        return found

    def split_children_unload(self, ld: LoadData) -> Callable[[str, str], bool]:
        """``checkNamespaceBundleSplit``'s check before unloading a split's children
        (``loadBalancerAutoUnloadSplitBundlesEnabled``): ``shouldNamespacePoliciesUnload`` and
        ``shouldAntiAffinityNamespaceUnload`` for the namespace on the parent's broker, every broker available."""
        policies, leader = self.policies, self.leader(ld)
        avail = np.ones(len(ld.brokers), dtype=bool)

        def should_unload(bundle: str, broker: str) -> bool:
            ns = bundle.rpartition("/")[0]
            row = ld.brokers.index(broker)
            return policies.should_namespace_policies_unload(ns, row, ld.brokers, avail) and \
                policies.should_anti_affinity_namespace_unload(ns, row, ld.brokers, avail, leader.bundle_ranges)

        return should_unload

    def split(self, ld: LoadData, layouts_for: Callable[[Iterable[str]], Mapping[str, np.ndarray]],
              topics: Mapping[str, TopicStats] | None = None) -> Splitting:
        """``checkNamespaceBundleSplit`` over the layouts of ``ld``'s namespaces: the splits it makes (a failed
        one is left out; its BundleData is gone all the same)."""
        found = self.check_split(ld, layouts_for(ld.bundles.namespaces), topics=topics)
        return Splitting([d for d in found if d.ok])

    def owner(self, ld: LoadData, bundle: str) -> str | None:
        """The broker whose report lists ``bundle`` (the newest), None when none does."""
        row = ld.bundles.index(bundle)
        if row >= 0 and ld.bundles.owner[row] >= 0:
            return ld.brokers.ids[int(ld.bundles.owner[row])]
        return None

    def assign(self, bundles: Iterable[str], ld: LoadData,
               observed: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
        """``selectBrokerForAssignment`` for each bundle in order; (bundle, broker or None). ``assign_draws`` then
        holds, per bundle whose broker was drawn at random, the brokers it was drawn from. ``observed``: per
        bundle, the broker the real leader logged choosing (the preallocation follows it; the result is the
        strategy's own choice)."""
        placed = assign_detailed(bundles, ld, self.conf, self.placement, self.leader(ld), self.policies, self.rng,
                                 observed=observed)
        self.assign_draws = {b: p.drawn_among for b, p in placed if p.drawn_among is not None}
        return [(b, p.broker) for b, p in placed]

    # --- the leader's state between two calls (decide's ``strategyState``) -----------------------------
    def set_state(self, state: Mapping[str, Any], ld: LoadData, given: Collection[str] = ()) -> None:
        """Restore ``strategyState``: each strategy when the same class saved it, the leader's ``LeaderState``
        (then the refresh between two ticks: ``updateBundleData``'s preallocation clean-up, the range reload) and
        ``recentlyUnloadedBundles`` unless the view already has the leader's map (``given``)."""
        shed_name, place_name = self.class_names()
        restore_component(self.shedder, state.get("shedding"), shed_name, "shedding")
        if self.placement is not self.shedder:
            restore_component(self.placement, state.get("placement"), place_name, "placement")
        saved = state.get("leader") or {}
        self.leader_state = LeaderState()
        try:
            self.leader_state.set_state(dict(saved), ld)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"$.strategyState.leader: cannot restore leader state: {exc}") from None
        if saved:
            clear_preallocations(ld)
        self.leader_state.reload(ld)
        if "recentlyUnloadedBundles" not in given:
            for bundle, ts in (saved.get("recentlyUnloadedBundles") or {}).items():
                ld.recently_unloaded_bundles[str(bundle)] = int(ts)

    def get_state(self, ld: LoadData) -> dict[str, Any]:
        """``strategyState`` after the call: the strategies' state (one entry when one instance serves both) and
        the leader's (``LeaderState`` and ``recentlyUnloadedBundles``)."""
        shed_name, place_name = self.class_names()
        out: dict[str, Any] = {"shedding": {"class": shed_name, "state": self.shedder.get_state()}}
        if self.placement is not self.shedder:
            out["placement"] = {"class": place_name, "state": self.placement.get_state()}
        leader = self.leader(ld).get_state(ld)
        leader["recentlyUnloadedBundles"] = dict(sorted(ld.recently_unloaded_bundles.items()))
        out["leader"] = leader
        return out

    def class_names(self) -> tuple[str, str]:
        """The configured shedding and placement classes' short names."""
        return (short_class(self.conf["loadBalancerLoadSheddingStrategy"]),
                short_class(self.conf["loadBalancerLoadPlacementStrategy"]))
