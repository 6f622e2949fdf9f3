"""lbreplay.kernel.java_hash_map against the JDK's own HashMap / HashSet / LinkedHashMap / ConcurrentHashMap.

Random histories (put, remove, an iterator's remove (``removeIf``), computeIfAbsent, clear, copy construction;
broker ids, bundle names, unicode,
keys colliding in full (``Aa`` / ``BB`` blocks) or in their bin) run through tests/kernel/java/JavaHashOrder.java,
compiled once per module and kept open as one JVM reading a history per line; the key order must be equal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.kernel.java_hash_map import (
    JavaConcurrentHashMap,
    JavaHashMap,
    JavaLinkedHashMap,
    JavaMap,
    concurrent_spread,
    hash_map_hash,
    iteration_order,
    java_hash_set_copy,
    java_string_hash,
    new_map,
    table_size_for,
)
from tests.kernel.jdk_process import JdkProcess, compiled
from tests.kernel.jdk_process import hex_key as _hex
from tests.kernel.jdk_process import unhex_key as _unhex

Op = tuple[str, tuple[str, ...]]

BROKERS = [f"10.0.{i // 7}.{i * 13 % 250}:8080" for i in range(60)] + [
    f"broker-{i}.pulsar.svc.cluster.local:8080" for i in range(40)
]
BUNDLES = [f"tenant{t}/ns{n}/0x{b << 28:08x}_0x{(b + 1) << 28:08x}" for t in range(3) for n in range(3) for b in range(8)]
COLLIDING = ["".join(c) for c in itertools.product(("Aa", "BB"), repeat=5)]  # 32 keys, one hash
SAME_BIN_HM = [k for k in (f"k{i}" for i in range(40000)) if hash_map_hash(k) & 255 == 0][:40]
SAME_BIN_CHM = [k for k in (f"q{i}" for i in range(40000)) if concurrent_spread(k) & 255 == 7][:40]
POOLS = [BROKERS, BUNDLES, COLLIDING, SAME_BIN_HM, SAME_BIN_CHM, COLLIDING[:12] + SAME_BIN_HM[:12] + BROKERS[:12]]


class Jvm(JdkProcess):
    """One ``java JavaHashOrder`` process: a history line in, the key order line out."""

    def order(self, kind: str, capacity: int | None, ops: list[Op]) -> list[str]:
        fields = [kind, str(-1 if capacity is None else capacity)]
        for code, keys in ops:
            fields.append(code + (",".join("k" + _hex(k) for k in keys) if code == "=" else "".join(_hex(k) for k in keys)))
        line = self.ask("\t".join(fields))
        assert not line.startswith("!"), line
        return [_unhex(h[1:]) for h in line.split(" ")] if line else []


@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jvm]:
    yield from compiled(tmp_path_factory, "JavaHashOrder", Jvm)


def replay(kind: str, capacity: int | None, ops: list[Op]) -> list[str]:
    """The history on the Python mirror."""
    m: JavaMap = new_map(kind, capacity)
    for code, keys in ops:
        if code == "+":
            m.put(keys[0])
        elif code == "-":
            m.remove(keys[0])
        elif code == "x":  # removeIf: an iterator's remove (HashMap: movable=false; the others as remove(key))
            if isinstance(m, JavaHashMap):
                m.remove(keys[0], movable=False)
            else:
                m.remove(keys[0])
        elif code == "?":
            m.compute_if_absent(keys[0])
        elif code == "c":
            m.clear()
        else:
            source = m.keys() + list(keys)
            if kind == "HashSet":
                m = java_hash_set_copy(source)
            elif kind == "HashMap":
                m = JavaHashMap.copy_of(source)
            elif kind == "ConcurrentHashMap":
                m = JavaConcurrentHashMap.copy_of(source)
            else:
                m = JavaLinkedHashMap.copy_of(source)
    return m.keys()


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, int | None, list[Op]]:
    kind = draw(st.sampled_from(["HashMap", "HashSet", "LinkedHashMap", "ConcurrentHashMap"]))
    capacity = draw(st.one_of(st.none(), st.integers(0, 40), st.sampled_from([64, 100, 128, 256])))
    pool = draw(st.sampled_from(POOLS))
    key = st.one_of(st.sampled_from(pool), st.text(max_size=6)) if draw(st.booleans()) else st.sampled_from(pool)
    codes = ["+"] * 6 + ["-"] * 2 + ["x"] + ([] if kind == "HashSet" else ["?"] * 2)
    ops: list[Op] = []
    for _ in range(draw(st.integers(0, 200))):
        r = draw(st.integers(0, 199))
        if r == 0:
            ops.append(("c", ()))
        elif r == 1:
            ops.append(("=", tuple(draw(st.lists(key, max_size=40)))))
        else:
            ops.append((draw(st.sampled_from(codes)), (draw(key),)))
    return kind, capacity, ops


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories())
def test_iteration_order_matches_the_jdk(jvm: Jvm, history: tuple[str, int | None, list[Op]]) -> None:
    kind, capacity, ops = history
    assert replay(kind, capacity, ops) == jvm.order(kind, capacity, ops)


def test_iterator_removal_keeps_a_tree_bin_and_its_first_node(jvm: Jvm) -> None:
    """``removeIf`` (an iterator's remove, ``movable=false``) leaves a shrinking tree bin a tree with its first node
    in place, where ``remove(key)`` turns it back into a list with the root first: the orders differ."""
    grow = _ops("+", COLLIDING[:12])
    for code in ("x", "-"):
        ops = grow + _ops(code, COLLIDING[2:11])
        assert replay("HashSet", 64, ops) == jvm.order("HashSet", 64, ops)
    assert replay("HashSet", 64, grow + _ops("x", COLLIDING[2:11])) != replay("HashSet", 64, grow + _ops("-", COLLIDING[2:11]))


def _ops(code: str, keys: list[str]) -> list[Op]:
    return [(code, (k,)) for k in keys]


def test_tree_bins_and_presizing_match_the_jdk(jvm: Jvm) -> None:
    """Deterministic cases that reach tree bins (put, remove back to a list, resize splits) and presizing."""
    grow = _ops("+", COLLIDING + SAME_BIN_HM + BROKERS)
    shrink = _ops("-", COLLIDING[::2] + SAME_BIN_HM[1::3])
    for kind in ("HashMap", "ConcurrentHashMap"):
        for capacity in (None, 1, 64):
            for ops in (grow, grow + shrink, grow + shrink + grow[::-1]):
                assert replay(kind, capacity, ops) == jvm.order(kind, capacity, ops)
    nine = _ops("+", COLLIDING[:9])  # ConcurrentHashMap at 16: treeifyBin presizes to 128 instead
    assert replay("ConcurrentHashMap", None, nine) == jvm.order("ConcurrentHashMap", None, nine)
    m = JavaHashMap(64)
    for k in COLLIDING:
        m.put(k)
    bins = [b for b in m._table or () if b is not None]
    assert len(bins) == 1 and bins[0].tree  # one tree bin, iterated root first
    assert m.keys() != COLLIDING and sorted(m.keys()) == sorted(COLLIDING)


def test_string_hash_and_table_size() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("broker-1.pulsar.svc.cluster.local:8080") < 0  # 32-bit overflow wraps
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    assert [table_size_for(c) for c in (0, 1, 2, 16, 17, 100)] == [1, 1, 2, 16, 32, 128]


def test_orders_differ_between_maps_and_from_insertion() -> None:
    keys = [f"10.0.0.{i}:8080" for i in range(1, 13)]
    hm = iteration_order(keys)
    assert sorted(hm) == sorted(keys)
    assert hm != keys  # the JVM does not keep insertion order ...
    assert iteration_order(keys, "LinkedHashMap") == keys  # ... LinkedHashMap does
    assert iteration_order(keys, "HashSet") == hm
    assert iteration_order(["Aa", "BB"]) == ["Aa", "BB"]  # one hash: a bin keeps insertion order
    assert iteration_order(["BB", "Aa"]) == ["BB", "Aa"]
    with pytest.raises(ValueError, match="unknown Java map kind"):
        iteration_order(keys, "TreeMap")
    with pytest.raises(ValueError, match="Illegal initial capacity"):
        JavaHashMap(-1)
