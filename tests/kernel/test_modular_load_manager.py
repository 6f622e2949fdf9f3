"""doLoadShedding orchestration and assignment loop (lbreplay.kernel.modular_load_manager).

The shedding strategy is a tiny fake defined here: these tests are about what the load manager does with a plan.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.least_long_term_message_rate import LeastLongTermMessageRate
from lbreplay.kernel.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.load_data import THR_IN, THR_OUT, LoadData
from lbreplay.kernel.modular_load_manager import (
    RunClock,
    assign,
    assign_detailed,
    create_strategies,
    do_load_shedding,
)
from lbreplay.kernel.placement import LeaderState
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.strategy import Unload
from tests.kernel.placement_fixtures import Br, Bu, World, conf, mask

FULL = "0x00000000_0xffffffff"
NOW = 1_700_000_000_000
MB = 1024 * 1024


class FakeShedder:
    """Returns a fixed plan; records calls and the completed-attempt set."""

    def __init__(self, plan: list[tuple[str, str]]) -> None:
        self.plan = plan
        self.calls = 0
        self.completed: set[str] | None = None
        self.seen_recently_unloaded: dict[str, int] | None = None

    def find_bundles_for_unloading(self, ld: LoadData, conf: PulsarConfig) -> list[Unload]:
        self.calls += 1
        self.seen_recently_unloaded = dict(ld.recently_unloaded_bundles)
        return [Unload(broker, bundle, "fake") for broker, bundle in self.plan]

    def on_active_brokers_change(self, active: set[str]) -> None:
        pass

    def on_unload_attempt_completed(self, bundles: set[str]) -> None:
        self.completed = set(bundles)

    def stats(self) -> dict[str, Any]:
        return {}

    def skip_reason(self) -> str | None:
        return None

    def get_state(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


class ExplodingPlacement(LeastLongTermMessageRate):
    def select_broker(self, *args: Any, **kwargs: Any) -> int:
        raise RuntimeError("boom")


def _world() -> World:
    """a owns two bundles of distinct namespaces; b and c are idle (b less loaded in the long term)."""
    return World(
        brokers={"a:8080": Br(usage=90), "b:8080": Br(), "c:8080": Br()},
        bundles={
            f"t/n1/{FULL}": Bu(owner="a:8080", long_rate=(100, 100)),
            f"t/n2/{FULL}": Bu(owner="a:8080", long_rate=(200, 200)),
            f"t/c/{FULL}": Bu(owner="c:8080", long_rate=(10, 10)),
        },
    )


def _shed(ld: LoadData, shedder: FakeShedder, c: PulsarConfig | None = None, policies: NamespacePolicies | None = None,
          placement: Any = None, available: np.ndarray | None = None, seed: int = 0) -> list[Unload]:
    return do_load_shedding(
        ld, c or conf(), shedder, placement or LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
        policies or NamespacePolicies(), np.random.default_rng(seed), NOW, available,
    )


def test_unloads_with_destination_and_records_recently_unloaded() -> None:
    """[M] doLoadShedding: destination = selectBroker (b: no load at all), recentlyUnloadedBundles[bundle] = now,
    onUnloadAttemptCompleted gets the planned bundles."""
    ld = _world().build()
    shedder = FakeShedder([("a:8080", f"t/n2/{FULL}"), ("a:8080", f"t/n1/{FULL}")])
    out = _shed(ld, shedder)
    assert [(u.broker, u.bundle, u.destination, u.reason) for u in out] == [
        ("a:8080", f"t/n2/{FULL}", "b:8080", "fake"),
        ("a:8080", f"t/n1/{FULL}", "b:8080", "fake"),
    ]
    assert ld.recently_unloaded_bundles == {f"t/n2/{FULL}": NOW, f"t/n1/{FULL}": NOW}
    assert shedder.completed == {f"t/n1/{FULL}", f"t/n2/{FULL}"}
    assert ld.preallocated_bundle_to_broker == {}  # selectBroker, not selectBrokerForAssignment


def test_run_clock_stamps_each_unload_when_its_step_ends() -> None:
    """A replay on the leader's timer (RunClock): each planned bundle that reaches its destination choice or its
    synchronous unload call is one step; an unload is stamped when its step ends and the run ends with its last
    step. Pulsar's live run of 2026-11-27 (4.0.7): a bundle unloaded before a skipped destination choice was past
    the one-minute grace at the next run, one unloaded at the run's last step was not (equal milliseconds)."""
    ld = World(
        brokers={"a:8080": Br(usage=90), "b:8080": Br(usage=95), "c:8080": Br()},
        bundles={f"t/n1/{FULL}": Bu(owner="a:8080", long_rate=(100, 100)),
                 f"t/n2/{FULL}": Bu(owner="c:8080", long_rate=(1, 1))},
    ).build()
    # a's bundle goes to c (least long-term rate among a, c: b is overloaded); c's own bundle stays on c (skipped)
    clock = RunClock()
    out = do_load_shedding(ld, conf(loadBalancerDistributeBundlesEvenlyEnabled=False),
                           FakeShedder([("a:8080", f"t/n1/{FULL}"), ("c:8080", f"t/n2/{FULL}")]),
                           LeastLongTermMessageRate(), LeaderState.from_load_data(ld), NamespacePolicies(),
                           np.random.default_rng(0), NOW, clock=clock)
    assert [(u.bundle, u.destination) for u in out] == [(f"t/n1/{FULL}", "c:8080")]
    assert ld.recently_unloaded_bundles == {f"t/n1/{FULL}": NOW + 1}
    assert clock.end_ms == NOW + 2  # the skipped destination choice is the run's last step
    idle = RunClock()
    assert do_load_shedding(ld, conf(), FakeShedder([]), LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                            NamespacePolicies(), np.random.default_rng(0), NOW + 60_000, clock=idle) == []
    assert idle.end_ms == NOW + 60_000


def test_disabled_or_single_broker_does_not_call_strategy() -> None:
    """loadBalancerEnabled/loadBalancerSheddingEnabled off, or "Only 1 broker available": return before
    findBundlesForUnloading, so the strategy state does not advance."""
    shedder = FakeShedder([("a:8080", f"t/n1/{FULL}")])
    assert _shed(_world().build(), shedder, conf(loadBalancerSheddingEnabled=False)) == []
    assert _shed(_world().build(), shedder, conf(loadBalancerEnabled=False)) == []
    ld = _world().build()
    assert _shed(ld, shedder, available=mask(ld, "a:8080")) == []
    assert shedder.calls == 0 and shedder.completed is None


def test_grace_period_pruning_before_the_strategy_runs() -> None:
    """Entries older than now - loadBalancerSheddingGracePeriodMinutes are removed (strict <) before the plan."""
    ld = _world().build()
    cutoff = NOW - 30 * 60_000
    ld.recently_unloaded_bundles = {"old/x/0": cutoff - 1, "edge/x/0": cutoff, "new/x/0": NOW - 1}
    shedder = FakeShedder([])
    assert _shed(ld, shedder) == []
    assert shedder.seen_recently_unloaded == {"edge/x/0": cutoff, "new/x/0": NOW - 1}
    assert shedder.completed == set()


def test_excluded_namespace_and_destination_equal_to_owner_are_skipped() -> None:
    """PIP-380: loadBalancerSheddingExcludedNamespaces are never unloaded; a destination equal to the owner is
    skipped ("The destination broker is the same as the current owner") and not recorded."""
    ld = World(
        brokers={"a:8080": Br(), "b:8080": Br(usage=95)},
        bundles={f"t/n1/{FULL}": Bu(owner="a:8080", long_rate=(1, 1)), f"t/ex/{FULL}": Bu(owner="a:8080", long_rate=(1, 1))},
    ).build()
    shedder = FakeShedder([("a:8080", f"t/ex/{FULL}"), ("a:8080", f"t/n1/{FULL}")])
    pol = NamespacePolicies(shedding_excluded_namespaces=frozenset({"t/ex"}))
    # b is overloaded (+inf), so LLTMR keeps a: destination == owner -> nothing issued.
    assert _shed(ld, shedder, conf(loadBalancerDistributeBundlesEvenlyEnabled=False), pol) == []
    assert ld.recently_unloaded_bundles == {}
    assert shedder.completed == {f"t/ex/{FULL}", f"t/n1/{FULL}"}


def test_namespace_isolation_blocks_unload() -> None:
    """shouldNamespacePoliciesUnload: a namespace whose only permitted broker is the owner is not unloaded."""
    ld = _world().build()
    pol = NamespacePolicies.from_json(
        {"p": {"namespaces": ["t/n1"], "primary": ["a"], "secondary": [], "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"}}}}
    )
    out = _shed(ld, FakeShedder([("a:8080", f"t/n1/{FULL}"), ("a:8080", f"t/n2/{FULL}")]), policies=pol)
    assert [u.bundle for u in out] == [f"t/n2/{FULL}"]


def test_anti_affinity_blocks_unload() -> None:
    """shouldAntiAffinityNamespaceUnload: every candidate owns one namespace of the group -> refuse."""
    w = _world()
    w.bundles[f"t/g2/{FULL}"] = Bu(owner="b:8080", long_rate=(1, 1))
    w.bundles[f"t/g3/{FULL}"] = Bu(owner="c:8080", long_rate=(1, 1))
    ld = w.build()
    groups = {f"t/{ns}": {"policies": {"namespaceAntiAffinityGroup": "g"}} for ns in ("n1", "g2", "g3")}
    out = _shed(ld, FakeShedder([("a:8080", f"t/n1/{FULL}"), ("a:8080", f"t/n2/{FULL}")]),
                policies=NamespacePolicies.from_json(None, None, groups))
    assert [u.bundle for u in out] == [f"t/n2/{FULL}"]


def test_completed_callback_runs_even_when_placement_fails() -> None:
    """onUnloadAttemptCompleted is called in a finally block."""
    ld = _world().build()
    shedder = FakeShedder([("a:8080", f"t/n1/{FULL}")])
    with pytest.raises(RuntimeError):
        _shed(ld, shedder, placement=ExplodingPlacement())
    assert shedder.completed == {f"t/n1/{FULL}"}


def test_brokers_visited_in_the_plans_multimap_order() -> None:
    """The plan's brokers are visited in its ``ArrayListMultimap``'s order (``asMap().forEach``: the backing
    ``HashMap``'s, a table of 16 on 4.0; :mod:`lbreplay.kernel.guava_multimap`), not in the order planned: c was
    put first, but "a:8080" comes first in that table, so LRUWW's per-call EWMA and the issued unloads follow."""
    w = _world()
    w.bundles[f"t/cc/{FULL}"] = Bu(owner="c:8080", long_rate=(1, 1))
    ld = w.build()
    out = _shed(ld, FakeShedder([("c:8080", f"t/cc/{FULL}"), ("a:8080", f"t/n1/{FULL}")]))
    assert [u.broker for u in out] == ["a:8080", "c:8080"]


def test_legacy_profile_unloads_without_destination() -> None:
    """[2.x] doLoadShedding unloads without a destination (placement happens at the next lookup) and has no
    namespace-policies check; even an isolated namespace is unloaded."""
    ld = _world().build()
    pol = NamespacePolicies.from_json(
        {"p": {"namespaces": ["t/n1"], "primary": ["a"], "secondary": [], "auto_failover_policy": {"parameters": {"min_limit": "1", "usage_threshold": "80"}}}}
    )
    out = _shed(ld, FakeShedder([("a:8080", f"t/n1/{FULL}")]), conf(pulsarVersion="2.10"), pol)
    assert [(u.bundle, u.destination) for u in out] == [(f"t/n1/{FULL}", None)]
    assert ld.recently_unloaded_bundles == {f"t/n1/{FULL}": NOW}


def test_assign_in_order_with_preallocation() -> None:
    """assign = selectBrokerForAssignment per bundle, in order; a repeated bundle returns the cached broker."""
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=150)}).build()
    leader = LeaderState.from_load_data(ld)
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    got = assign([f"x/1/{FULL}", f"x/2/{FULL}", f"x/1/{FULL}", f"x/3/{FULL}"], ld, c, LeastLongTermMessageRate(),
                 leader, NamespacePolicies(), np.random.default_rng(0))
    # Default BundleData is 100 msg/s: a scores 0 -> x/1; 100 < 150 -> x/2; x/1 cached; 200 > 150 -> x/3 on b.
    assert got == [(f"x/1/{FULL}", "a:8080"), (f"x/2/{FULL}", "a:8080"), (f"x/1/{FULL}", "a:8080"), (f"x/3/{FULL}", "b:8080")]


def test_an_observed_lookup_is_preallocated_where_the_leader_put_it() -> None:
    """An audit's logged lookup (``observed``: the leader's "Selected broker"): the strategy is called as on the
    leader and its own choice is returned, but ``preallocateBundle`` goes to the leader's broker, so the next
    placement scores that broker with the bundle's default 100 msg/s (``LeastLongTermMessageRate.getScore``)."""
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=150)}).build()
    leader = LeaderState.from_load_data(ld)
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    got = assign_detailed([f"x/1/{FULL}", f"x/2/{FULL}"], ld, c, LeastLongTermMessageRate(), leader,
                          NamespacePolicies(), np.random.default_rng(0), observed={f"x/1/{FULL}": "b:8080"})
    # a scores 0 -> the strategy picks a for x/1, but the leader put it on b (250 now); x/2 then goes to a
    assert [(b, p.broker) for b, p in got] == [(f"x/1/{FULL}", "a:8080"), (f"x/2/{FULL}", "a:8080")]
    assert ld.preallocated_bundle_to_broker == {f"x/1/{FULL}": "b:8080", f"x/2/{FULL}": "a:8080"}
    ld = World(brokers={"a:8080": Br(long_rate_in=0), "b:8080": Br(long_rate_in=150)}).build()
    assign_detailed([f"x/1/{FULL}"], ld, c, LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                    NamespacePolicies(), np.random.default_rng(0),
                    observed={f"x/1/{FULL}": "gone:8080"})  # not a broker of this LoadData: its own choice
    assert ld.preallocated_bundle_to_broker == {f"x/1/{FULL}": "a:8080"}


def test_create_strategies_pairs_avg_shedder() -> None:
    """ModularLoadManagerImpl.initialize: a placement strategy that is also a shedder (AvgShedder) must be the
    configured shedding strategy and is the same instance; otherwise IllegalArgumentException (usage error)."""
    shed, place = create_strategies(conf())
    assert type(shed).__name__ == "ThresholdShedder" and isinstance(place, LeastLongTermMessageRate)
    shed, place = create_strategies(conf(loadBalancerLoadPlacementStrategy="LeastResourceUsageWithWeight"))
    assert isinstance(place, LeastResourceUsageWithWeight)
    shed, place = create_strategies(conf(loadBalancerLoadPlacementStrategy="AvgShedder", loadBalancerLoadSheddingStrategy="AvgShedder"))
    assert shed is place and type(shed).__name__ == "AvgShedder"
    with pytest.raises(UsageError, match="can't work with"):
        create_strategies(conf(loadBalancerLoadPlacementStrategy="AvgShedder"))


def test_with_real_threshold_shedder() -> None:
    """ThresholdShedder (first EWMA sample raw): usages 90/10/20% -> avg 0.4; a >= avg + 0.1 needs
    100 MiB/s x (0.9 - 0.4 - 0.1 + 0.05) = 45 MiB/s -> its 60 MiB/s bundle; a is overloaded and the even spread
    drops it, so LLTMR picks c (long-term 20 msg/s) over b (1000 msg/s)."""
    from lbreplay.kernel.threshold_shedder import ThresholdShedder

    w = World(
        brokers={"a:8080": Br(usage=90), "b:8080": Br(usage=10), "c:8080": Br(usage=20)},
        bundles={
            f"t/big/{FULL}": Bu(owner="a:8080", long_rate=(100, 100)),
            f"t/small/{FULL}": Bu(owner="a:8080", long_rate=(50, 50)),
            f"t/bb/{FULL}": Bu(owner="b:8080", long_rate=(500, 500)),
            f"t/cc/{FULL}": Bu(owner="c:8080", long_rate=(10, 10)),
        },
    )
    ld = w.build()
    ld.brokers.msg_throughput_in[ld.brokers.index("a:8080")] = 100 * MB
    for name, thr in ((f"t/big/{FULL}", 60 * MB), (f"t/small/{FULL}", 40 * MB)):
        j = ld.bundles.index(name)
        ld.bundles.short[j, THR_IN], ld.bundles.short[j, THR_OUT] = thr, 0.0
    shedder = ThresholdShedder()
    out = do_load_shedding(ld, conf(), shedder, LeastLongTermMessageRate(), LeaderState.from_load_data(ld),
                           NamespacePolicies(), np.random.default_rng(0), NOW)
    assert [(u.broker, u.bundle, u.destination) for u in out] == [("a:8080", f"t/big/{FULL}", "c:8080")]
    assert ld.recently_unloaded_bundles == {f"t/big/{FULL}": NOW}


def test_avg_shedder_plan_is_honoured_and_kept() -> None:
    """The scenario of ModularLoadManagerImplTest#testAvgShedderPlanIsScopedToOneUnloadAttempt: one AvgShedder
    instance for shedding and placement (hit count high 1, minUnloadMessage 1, maxUnloadPercentage 0.5). Scores
    80/30/50: the 80-30 pair (gap 50 >= 40) sheds the source's 900 msg/s bundle (need (20000 - 2000) x 0.5 = 9000)
    planned for the 30% broker; doLoadShedding's selectBroker returns that plan and the unload is recorded. That
    test's scoping of the plan to one attempt is apache/pulsar#26246, in no release: every released jar
    (3.3.6 .. 5.0.0-M1, checked by the oracle) keeps the planned target in ``bundleBrokerMap`` after the attempt."""
    c = conf(
        loadBalancerLoadSheddingStrategy="AvgShedder",
        loadBalancerLoadPlacementStrategy="AvgShedder",
        loadBalancerAvgShedderHighThreshold=40,
        loadBalancerAvgShedderHitCountHighThreshold=1,
        minUnloadMessage=1,
        maxUnloadPercentage=0.5,
    )
    bundle = f"test/avg-shedder-e2e/{FULL}"
    w = World(
        brokers={
            "source:8080": Br(usage=80, rate_in=10_000, rate_out=10_000),
            "dest:8080": Br(usage=30, rate_in=1_000, rate_out=1_000),
            "other:8080": Br(usage=50, rate_in=5_000, rate_out=5_000),
        },
        bundles={bundle: Bu(owner="source:8080", long_rate=(450, 450))},
    )
    ld = w.build()
    shed, place = create_strategies(c)
    out = do_load_shedding(ld, c, shed, place, LeaderState.from_load_data(ld), NamespacePolicies(),
                           np.random.default_rng(0), NOW)
    assert [(u.broker, u.bundle, u.destination) for u in out] == [("source:8080", bundle, "dest:8080")]
    assert ld.recently_unloaded_bundles == {bundle: NOW}
    assert shed.get_state().get("pendingTargets") == {bundle: "dest:8080"}


def test_a_destination_drawn_among_ties_is_carried_and_the_owner_drawn_is_kept() -> None:
    """``doLoadShedding`` with ``LeastLongTermMessageRate``: every broker above the overload threshold scores +inf,
    so ``selectBroker`` draws among all three (and again in the overload re-check, whose draw is the one kept). An
    issued unload carries the set; a bundle whose draw hit its owner is not unloaded ("The destination broker … is
    the same as the current owner broker") and is recorded as kept, with the set. A single best broker: no draw."""
    from lbreplay.kernel.strategy import Kept

    every = ("a:8080", "b:8080", "c:8080")
    world = World(brokers={b: Br(usage=95) for b in every},
                  bundles={f"t/n{i}/{FULL}": Bu(owner="a:8080", long_rate=(1, 1)) for i in range(6)})
    plan = [("a:8080", f"t/n{i}/{FULL}") for i in range(6)]
    ld = world.build()
    kept: list[Kept] = []
    out = do_load_shedding(ld, conf(loadBalancerDistributeBundlesEvenlyEnabled=False), FakeShedder(plan),
                           LeastLongTermMessageRate(), LeaderState.from_load_data(ld), NamespacePolicies(),
                           np.random.default_rng(1), NOW, kept=kept)
    assert out and kept and len(out) + len(kept) == 6
    assert all(u.drawn_among == every and u.destination in every[1:] for u in out)
    assert all(k == Kept("a:8080", k.bundle, every) for k in kept)
    assert {u.bundle for u in out} | {k.bundle for k in kept} == {b for _, b in plan}
    assert set(ld.recently_unloaded_bundles) == {u.bundle for u in out}
    ld = _world().build()
    kept = []
    out = do_load_shedding(ld, conf(), FakeShedder([("a:8080", f"t/n1/{FULL}")]), LeastLongTermMessageRate(),
                           LeaderState.from_load_data(ld), NamespacePolicies(), np.random.default_rng(0), NOW, kept=kept)
    assert [(u.destination, u.drawn_among) for u in out] == [("b:8080", None)] and kept == []
