"""lbreplay.kernel.broker_candidate_cache: brokerCandidateCache's order, against the JDK's own HashSets.

Random histories of selectBroker / shouldNamespacePoliciesUnload calls (fills of growing and shrinking size, so the
three tables keep an earlier, larger fill; keys colliding in full, so bins of 8+ resize or turn into trees, or in
their bin; some or none within the topic limit) run through
tests/kernel/java/CandidateCacheOrder.java, which does what Pulsar's code does on real ``HashSet`` s (the
topic-count filter's copy included); the candidate order at every strategy call must be equal.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.errors import UsageError
from lbreplay.kernel.broker_candidate_cache import BrokerCandidateCache, PolicyFill
from lbreplay.kernel.modular_load_manager import ModularLoadManager
from lbreplay.kernel.placement import LeaderState, select_broker
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.round_robin_broker_selector import RoundRobinBrokerSelector
from tests.kernel.jdk_process import JdkProcess, compiled
from tests.kernel.jdk_process import hex_key as _hex
from tests.kernel.jdk_process import unhex_key as _unhex
from tests.kernel.placement_fixtures import Br, World, conf
from tests.kernel.test_java_hash_map import BROKERS, COLLIDING, SAME_BIN_HM

B2, B7 = "broker-2.example:8080", "broker-7.example:8080"  # one bin of 16 (11); bins 27 and 11 of 64
Call = tuple[str, PolicyFill, frozenset[str], frozenset[str], bool, bool]


class Jvm(JdkProcess):
    """One ``java CandidateCacheOrder`` process: a history line in, the orders line out."""

    def orders(self, calls: list[Call]) -> list[list[str]]:
        specs = []
        for kind, fill, fit, kept, restored, recheck in calls:
            parts = [kind, ",".join(map(_hex, fill.primaries)), ",".join(map(_hex, fill.secondaries)),
                     str(int(fill.add_secondaries))]
            if kind == "S":
                parts += [",".join(map(_hex, sorted(fit))), ",".join(map(_hex, sorted(kept))), str(int(restored)),
                          str(int(recheck))]
            specs.append(";".join(parts))
        line = self.ask("\t".join(specs))
        selects = sum(1 for c in calls if c[0] == "S")
        parts = line.split("|") if selects else []
        return [[_unhex(h) for h in p.split(" ")] if p else [] for p in parts]


@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jvm]:
    yield from compiled(tmp_path_factory, "CandidateCacheOrder", Jvm)


def replay(calls: list[Call]) -> list[list[str]]:
    """The history on :class:`BrokerCandidateCache`."""
    cache = BrokerCandidateCache()
    out = []
    for kind, fill, fit, kept, restored, recheck in calls:
        if kind == "P":
            cache.policies_check(fill)
        else:
            out.append(list(cache.select_order(fill, fit, kept, restored, recheck)))
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[Call]:
    pool = draw(st.sampled_from([BROKERS, COLLIDING + BROKERS[:20], SAME_BIN_HM + BROKERS[:30]]))
    calls: list[Call] = []
    for _ in range(draw(st.integers(1, 5))):
        available = draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
        roles = [draw(st.integers(0, 2)) for _ in available]  # primary, secondary, neither
        prim = tuple(k for k, r in zip(available, roles) if r == 0)
        sec = tuple(k for k, r in zip(available, roles) if r == 1)
        fill = PolicyFill(prim, sec, draw(st.booleans()))
        filled = list(prim) + (list(sec) if fill.add_secondaries else [])
        fit = frozenset(k for k in filled if draw(st.integers(0, 5)))  # within the topic limit (maybe none)
        kept = frozenset(k for k in (fit or filled) if draw(st.integers(0, 3)))
        kind = "P" if draw(st.integers(0, 5)) == 0 else "S"
        calls.append((kind, fill, fit, kept, draw(st.booleans()), draw(st.booleans())))
    return calls


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories())
def test_candidate_order_matches_the_jdk(jvm: Jvm, calls: list[Call]) -> None:
    assert replay(calls) == jvm.orders(calls)


def test_an_earlier_larger_fill_of_the_thread_cache_reorders_a_bin(jvm: Jvm) -> None:
    """B2 and B7 share bin 11 of a 16-table: a fresh localSecondaryCache adds them in the available order (B2, B7).
    An isolation policy's check with one primary and 64 secondaries without failover (shouldNamespacePoliciesUnload)
    leaves the candidate set at 16 but the secondary cache at 128, where B7 (bin 11) comes before B2 (bin 27): the
    next fill adds B7 first, and the candidate set keeps that order in its shared bin."""
    alone = PolicyFill((), (B2, B7), True)
    isolated = PolicyFill((B2,), tuple(BROKERS[:64]), False)
    two = frozenset((B2, B7))
    calls: list[Call] = [("S", alone, two, two, False, False), ("P", isolated, two, two, False, False),
                         ("S", alone, two, two, False, False)]
    assert replay(calls) == jvm.orders(calls) == [[B2, B7], [B7, B2]]
    cache = BrokerCandidateCache()
    cache.policies_check(isolated)
    assert cache.tables == (16, 16, 128)  # 64 secondaries: the table doubles past 48 (0.75 x 64)


def test_the_topic_count_filter_copy_resizes_a_crowded_bin(jvm: Jvm) -> None:
    """Nine brokers of one hash: the first fill resizes the candidate set to 32 (treeifyBin below 64), the
    topic-count filter's clear + addAll of its copy to 64, so the overload re-check's fill turns the bin into a tree
    (its root first). Without the copy the set would stay at 32, in insertion order."""
    nine = tuple(COLLIDING[:9])
    calls: list[Call] = [("S", PolicyFill(nine, (), False), frozenset(nine), frozenset(), False, True)]
    got = replay(calls)
    assert got == jvm.orders(calls)
    assert got[0] != list(nine) and sorted(got[0]) == sorted(nine)


def test_restore_and_recheck_add_after_the_kept_brokers() -> None:
    """The restore (a filter threw) and the overload re-check add the policy set without clearing: a kept broker
    stays ahead of a re-added one sharing its bin, whatever the fill order."""
    fill, both = PolicyFill((), (B2, B7), True), frozenset((B2, B7))
    assert BrokerCandidateCache().select_order(fill, both, frozenset({B7}), restored=True) == (B7, B2)
    assert BrokerCandidateCache().select_order(fill, both, frozenset({B7}), recheck=True) == (B7, B2)
    assert BrokerCandidateCache().select_order(fill, both, frozenset(), restored=True) == (B2, B7)
    assert BrokerCandidateCache().select_order(fill, both, frozenset({B7})) == (B7,)


def test_round_robin_follows_the_carried_tables() -> None:
    """RoundRobinBrokerSelector's first pick is the candidate set's first broker: B2 for a fresh leader, B7 for a
    leader whose placing thread once filled its secondary cache with 64 brokers (strategyState carries it)."""
    ld = World(brokers={B2: Br(), B7: Br()}).build()
    c = conf(loadBalancerDistributeBundlesEvenlyEnabled=False)

    def first_pick(state: dict[str, object] | None) -> str | None:
        leader = LeaderState.from_load_data(ld)
        if state is not None:
            leader.set_state({"brokerCandidateCache": state})
        return select_broker("t/ns/0x00000000_0xffffffff", ld, c, RoundRobinBrokerSelector(), leader,
                             NamespacePolicies(), np.random.default_rng(0))

    assert first_pick(None) == B2
    assert first_pick({"table": 16, "localSecondaryCache": 128}) == B7
    leader = LeaderState.from_load_data(ld)
    assert leader.get_state()["brokerCandidateCache"] == {"table": 0, "localPrimariesCache": 0, "localSecondaryCache": 0}


def test_a_table_length_that_no_hash_set_has_is_refused() -> None:
    """A carried table length that no HashSet can have: refused with the strategyState path (decide exits 2)."""
    with pytest.raises(ValueError, match="power of two >= 16"):
        BrokerCandidateCache().set_state({"table": 24})
    ld = World(brokers={B2: Br(), B7: Br()}).build()
    manager = ModularLoadManager(conf(), NamespacePolicies(), np.random.default_rng(0))
    with pytest.raises(UsageError, match=r"strategyState.leader: cannot restore leader state"):
        manager.set_state({"leader": {"brokerCandidateCache": {"localSecondaryCache": 8}}}, ld)


def test_the_quick_model_is_the_exact_one_for_ordinary_ids() -> None:
    """Without a crowded bin the insertion-sequence model (no Node objects) gives the exact model's order and tables;
    9 keys of one hash make it hand over to the exact model."""
    from lbreplay.kernel.broker_candidate_cache import _Crowded, _select_steps, _Sets

    ids = tuple(f"broker-{i}.example:{8080 + i % 2}" for i in range(200))
    fill, fit, kept = PolicyFill(ids[:20], ids[20:], True), frozenset(ids[::2]), frozenset(ids[::6])
    for tables in ((0, 0, 0), (16, 16, 512)):
        quick = _select_steps(_Sets(tables, quick=True), fill, fit, kept, True, True)
        assert quick == _select_steps(_Sets(tables), fill, fit, kept, True, True)
        assert quick[1][0] == 512  # 200 candidates: 256 * 0.75 < 200
    with pytest.raises(_Crowded):
        _select_steps(_Sets((0, 0, 0), quick=True), PolicyFill(tuple(COLLIDING[:9]), (), False), frozenset(),
                      frozenset(), False, False)
