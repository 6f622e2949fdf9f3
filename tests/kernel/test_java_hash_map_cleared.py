"""The maps of the extensible load manager that live across cycles, against the JDK's own ConcurrentHashMap.

``JavaConcurrentHashMap.cleared`` (a map grown and then ``clear()``ed: ``PulsarStats.bundleStats`` each stats
cycle) and ``map_order.LoadDataStoreOrder`` (the load-data store's ``TableViewImpl`` map, rebuilt each cycle from
the table size and key order kept in ``TransferShedder``'s state) must iterate exactly as the JDK's map with the
same history does (tests/kernel/java/JavaHashOrder.java, the JVM of ``test_java_hash_map``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.kernel.extensible.map_order import LoadDataStoreOrder, bundle_stats_order
from lbreplay.kernel.java_hash_map import JavaConcurrentHashMap
from tests.kernel.test_java_hash_map import BROKERS, BUNDLES, COLLIDING, SAME_BIN_CHM, Jvm, Op, jvm  # noqa: F401 (the JDK fixture)

KEYS = BROKERS + BUNDLES + COLLIDING[:6] + SAME_BIN_CHM[:10]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])


@SETTINGS
@given(st.lists(st.sampled_from(KEYS), max_size=120), st.lists(st.sampled_from(KEYS), max_size=60))
def test_cleared_map_keeps_its_table_like_the_jdk(jvm: Jvm, grow: list[str], refill: list[str]) -> None:  # noqa: F811
    """Put ``grow``, ``clear()``, put ``refill``: the mirror rebuilt from the grown table's size agrees."""
    ops: list[Op] = [("+", (k,)) for k in grow] + [("c", ())] + [("+", (k,)) for k in refill]
    grown = JavaConcurrentHashMap()
    for k in grow:
        grown.put(k)
    m = JavaConcurrentHashMap.cleared(grown.capacity)
    for k in refill:
        m.put(k)
    assert m.keys() == jvm.order("ConcurrentHashMap", None, ops)
    assert bundle_stats_order(tuple(refill), grown.capacity)[0] == tuple(
        jvm.order("ConcurrentHashMap", None, [("+", (k,)) for k in grow] + [("c", ())]
                  + [("+", (k,)) for k in sorted(set(refill))]))


@SETTINGS
@given(st.lists(st.sets(st.sampled_from(KEYS), max_size=40), min_size=1, max_size=5))
def test_load_data_store_across_cycles_like_the_jdk(jvm: Jvm, cycles: list[set[str]]) -> None:  # noqa: F811
    """Each cycle removes the brokers gone and puts the new ones in sorted order into one long-lived map; the
    store rebuilt from the state (table size, key order) iterates as the JDK's map after the same history."""
    ops: list[Op] = []
    held: set[str] = set()
    state = None
    for brokers in cycles:
        ops += [("-", (k,)) for k in sorted(held - brokers)] + [("+", (k,)) for k in sorted(brokers - held)]
        held = set(brokers)
        store = LoadDataStoreOrder()
        store.set_state(state)
        assert store.update(brokers) == jvm.order("ConcurrentHashMap", None, ops)
        state = store.get_state()


def test_cleared_capacity_and_fresh_map() -> None:
    grown = JavaConcurrentHashMap()
    for k in BROKERS[:13]:  # 13 >= 0.75 x 16: the table doubles
        grown.put(k)
    assert grown.capacity == 32 and JavaConcurrentHashMap().capacity == 0
    assert JavaConcurrentHashMap.cleared(32).capacity == 32 and JavaConcurrentHashMap.cleared(32).keys() == []
    fresh, cleared = JavaConcurrentHashMap(), JavaConcurrentHashMap.cleared(32)
    for k in BROKERS[:5]:
        fresh.put(k)
        cleared.put(k)
    assert sorted(fresh.keys()) == sorted(cleared.keys()) and fresh.keys() != cleared.keys()  # 16 vs 32 bins
