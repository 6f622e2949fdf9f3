"""The iteration order of the JVM's own hash maps (JDK 17): ``HashMap``, ``HashSet``, ``LinkedHashMap``,
``ConcurrentHashMap``, for ``String`` keys and a given history of operations.

Pulsar iterates such maps wherever a tie, a cap or "the first that fits" decides an outcome, so the JVM's
order is part of the behaviour. It is fixed by ``String.hashCode`` (UTF-16 code units), the spread function
(``HashMap.hash``: ``h ^ (h >>> 16)``; ``ConcurrentHashMap.spread``: the same ``& 0x7fffffff``), the table size
(a power of two; ``HashMap(n)``: ``tableSizeFor(n)``, resized when ``size > 0.75 * table``;
``ConcurrentHashMap(n)`` in JDK 17: ``tableSizeFor((long) (1.0 + n / 0.75f))``, resized when
``size >= 0.75 * table``, and ``treeifyBin`` on a small table presizes by ``tryPresize(2 * table)``, which
doubles it until 3/4 of it reach ``tableSizeFor(3 * table + 1)``), the order within a bin (``HashMap``: appended by
``put``, prepended by ``computeIfAbsent``, split into lo / hi in order on resize; ``ConcurrentHashMap``:
appended, and ``transfer`` keeps the last run of nodes going to the same half and prepends the others, i.e.
reverses them) and tree bins (9 keys in one bin with a table of 64+; below 64 the table grows instead):
mirrored exactly in :mod:`lbreplay.kernel.java_tree_bin` (``HashMap`` keeps the tree's root first and links a
new node after its tree parent; ``ConcurrentHashMap.TreeBin`` prepends new nodes). Checked against the real
JDK classes by ``tests/kernel/test_java_hash_map.py`` (random histories, colliding keys).

Where Pulsar (``org.apache.pulsar.broker.loadbalance``; read on master and the 4.0 line) iterates them:

* ``LoadData.brokerData`` / ``bundleData`` / ``recentlyUnloadedBundles``: ``ConcurrentHashMap`` (default
  constructor, ``LoadData()``); brokers put by ``ModularLoadManagerImpl.updateAllBrokerData`` and removed when
  they leave. ``AvgShedder.calculateScoresAndSort`` (4.0.7 bytecode) clears its ``brokerScoreMap`` (a
  ``HashMap`` field of the strategy: ``clear()`` keeps the table at its largest size), puts every broker in
  ``loadData.getBrokerData()`` order, then sorts ``brokerScoreMap.entrySet().stream()`` with ``(int) (a - b)``
  (:mod:`lbreplay.kernel.java_tim_sort`): brokers within one percentage point tie, so that ``HashMap``'s order
  decides the pairing (on the 3.3+ lines' ``comparingDouble`` too, for equal scores). Against the 4.0.7 jar with
  its own maps (``lbreplay verify``'s 300 AvgShedder cases, seed 0), sorted-id order agrees in 257; this
  module's order (``brokerData`` built in the snapshot's broker order, then ``brokerScoreMap`` kept across
  calls) in 300. ``OverloadShedder.findBundlesForUnloading`` (``getBrokerData().forEach``),
  ``UniformLoadShedder.findBundlesForUnloading`` (``brokersData.forEach`` with strict ``>`` / ``<``: the first
  broker in this order wins a tie for max / min) and ``ThresholdShedder`` visit brokers in ``brokerData``'s order.
* ``LoadData.getBundleDataForLoadShedding()``: a ``HashMap`` (``Collectors.toMap``, ``putIfAbsent`` in
  ``bundleData``'s order); ``AvgShedder`` / ``UniformLoadShedder`` / ``OverloadShedder`` stream it and sort the
  bundles by traffic with a stable sort, so bundles of equal traffic keep this map's order.
* ``BundleSplitterTask.findBundlesToSplit`` (``ModularLoadManagerImpl.checkNamespaceBundleSplit``'s strategy):
  ``loadData.getBrokerData().forEach``, then each broker's ``getLastStats()``; the namespace cap
  (``loadBalancerNamespaceMaximumBundles`` with ``namespaceBundleCount``, a ``HashMap``) lets the first bundles
  in this order through; the result ``bundleCache`` is a ``HashSet`` that ``checkNamespaceBundleSplit`` iterates
  (``for (String bundleName : bundlesToBeSplit)``). The extensible manager's
  ``DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit`` caps at
  ``loadBalancerMaxNumberOfBundlesToSplitPerCycle`` over ``getBrokerService().getBundleStats()``.
* ``ModularLoadManagerImpl``: ``brokerCandidateCache`` (``HashSet``, cleared and refilled per assignment by
  ``LoadManagerShared.applyNamespacePolicies`` through the thread's two ``HashSet`` caches, thinned by the broker
  filters: :mod:`lbreplay.kernel.broker_candidate_cache`) is the candidate set placement walks
  (``RoundRobinBrokerSelector``'s ``List.copyOf``, ``LeastResourceUsageWithWeight``'s sum);
  ``preallocatedBundleToBroker`` (``ConcurrentHashMap``).
* ``AvgShedder.brokerHitCountForHigh`` / ``brokerHitCountForLow`` (``HashMap``): read by key only, their order
  never matters; ``bundleBrokerMap`` (``HashMap`` keyed by ``BundleData``) likewise.

``LinkedHashMap`` iterates in insertion order (a re-put keeps the position, remove and put moves to the end).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from lbreplay.kernel import java_tree_bin as tb
from lbreplay.kernel.java_tree_bin import UNTREEIFY_THRESHOLD, Node

MAXIMUM_CAPACITY = 1 << 30
TREEIFY_THRESHOLD = 8
MIN_TREEIFY_CAPACITY = 64
KINDS = ("HashMap", "HashSet", "LinkedHashMap", "ConcurrentHashMap")


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def java_string_hash(s: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, 32-bit signed."""
    units = tb.utf16(s)
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return _int32(h)


@lru_cache(maxsize=1 << 17)
def hash_map_hash(key: str) -> int:
    """``HashMap.hash``: ``h ^ (h >>> 16)`` (memoised: the same broker and bundle names are hashed every tick)."""
    u = java_string_hash(key) & 0xFFFFFFFF
    return _int32(u ^ (u >> 16))


def concurrent_spread(key: str) -> int:
    """``ConcurrentHashMap.spread``: ``(h ^ (h >>> 16)) & HASH_BITS``."""
    return hash_map_hash(key) & 0x7FFFFFFF


def table_size_for(cap: int) -> int:
    """``HashMap.tableSizeFor``: the least power of two >= ``cap`` (1 for 0 and 1)."""
    if cap <= 1:
        return 1
    return min(1 << (cap - 1).bit_length(), MAXIMUM_CAPACITY)


def _check_capacity(initial_capacity: int | None) -> None:
    if initial_capacity is not None and initial_capacity < 0:
        raise ValueError(f"Illegal initial capacity: {initial_capacity}")


def _f32(x: float | np.floating) -> float:
    return float(np.float32(x))


class JavaHashMap:
    """``java.util.HashMap<String, ?>`` (and ``HashSet``, which is one): keys in the JVM's iteration order."""

    def __init__(self, initial_capacity: int | None = None) -> None:
        _check_capacity(initial_capacity)
        self._table: list[Node | None] | None = None
        self._size = 0
        self._threshold = 0 if initial_capacity is None else table_size_for(initial_capacity)

    @classmethod
    def copy_of(cls, keys: Iterable[str]) -> JavaHashMap:
        """``new HashMap<>(map)`` of a map iterating ``keys`` (``putMapEntries``' presize: ``s / 0.75f + 1``)."""
        ks = list(dict.fromkeys(keys))
        m = cls()
        if ks:
            t = int(_f32(_f32(np.float32(len(ks)) / np.float32(0.75)) + 1.0))
            if t > m._threshold:
                m._threshold = table_size_for(t)
        for k in ks:
            m.put(k)
        return m

    def __len__(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        """The table's length (0 before the first put): what a cleared map keeps of its history."""
        return len(self._table) if self._table else 0

    @classmethod
    def cleared(cls, capacity: int) -> JavaHashMap:
        """A default-constructed ``HashMap`` grown to ``capacity`` (a power of two >= 16, or 0) and then cleared."""
        m = cls()
        if capacity:
            n = table_size_for(max(capacity, 16))
            m._table, m._threshold = [None] * n, n * 3 // 4
        return m

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in set(self.keys())

    def keys(self) -> list[str]:
        """The keys as ``keySet().iterator()`` returns them."""
        out: list[str] = []
        for e in self._table or ():
            while e is not None:
                out.append(e.key)
                e = e.next
        return out

    # --- put / computeIfAbsent ------------------------------------------------------------------------
    def put(self, key: str) -> None:
        """``put(key, v)`` (``HashSet.add``): a new key goes to the end of its bin; a present key stays."""
        h = hash_map_hash(key)
        tab = self._table if self._table else self._resize()
        i = (len(tab) - 1) & h
        p = tab[i]
        if p is None:
            tab[i] = Node(h, key)
        elif p.hash == h and p.key == key:
            return
        elif p.tree:
            if not self._put_tree_val(tab, i, h, key):
                return
        else:
            bin_count = 0
            while True:
                e = p.next
                if e is None:
                    p.next = Node(h, key)
                    if bin_count >= TREEIFY_THRESHOLD - 1:
                        self._treeify_bin(tab, h)
                    break
                if e.hash == h and e.key == key:
                    return
                p = e
                bin_count += 1
        self._size += 1
        if self._size > self._threshold:
            self._resize()

    def compute_if_absent(self, key: str) -> None:
        """``computeIfAbsent`` (also ``compute`` / ``merge`` adding a key): resize first, new key at the bin's head."""
        h = hash_map_hash(key)
        tab = self._table
        if self._size > self._threshold or not tab:
            tab = self._resize()
        i = (len(tab) - 1) & h
        first = tab[i]
        bin_count = 0
        if first is not None:
            if first.tree:
                if tb.find(tb.root_of(first), h, key) is not None:
                    return
                self._put_tree_val(tab, i, h, key)
                self._size += 1
                return
            e: Node | None = first
            while e is not None:
                if e.hash == h and e.key == key:
                    return
                bin_count += 1
                e = e.next
        tab[i] = Node(h, key, first)
        if bin_count >= TREEIFY_THRESHOLD - 1:
            self._treeify_bin(tab, h)
        self._size += 1

    def _put_tree_val(self, tab: list[Node | None], i: int, h: int, key: str) -> bool:
        """``TreeNode.putTreeVal``: the new node follows its tree parent in the bin. False if present."""
        first = tab[i]
        assert first is not None
        root = tb.root_of(first)
        if tb.find(root, h, key) is not None:
            return False
        x, xp, new_root = tb.attach(root, h, key)
        xpn = xp.next
        xp.next = x
        x.next = xpn
        x.prev = xp
        if xpn is not None:
            xpn.prev = x
        tb.move_root_to_front(tab, new_root)
        return True

    def _treeify_bin(self, tab: list[Node | None], h: int) -> None:
        """``treeifyBin``: resize a table below 64, else turn the bin into a tree (root moved first)."""
        if len(tab) < MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        index = (len(tab) - 1) & h
        hd = tab[index]
        prev: Node | None = None
        e = hd
        while e is not None:
            e.prev = prev
            prev = e
            e = e.next
        if hd is not None:
            tb.move_root_to_front(tab, tb.build_tree(hd))

    # --- remove / clear -------------------------------------------------------------------------------
    def remove(self, key: str, movable: bool = True) -> None:
        """``remove(key)``: the others keep their order (a tree bin may turn back into a list).
        ``movable=False``: an iterator's ``remove()`` (``removeIf``, ``keySet().removeIf``): a tree bin stays a tree
        and keeps its first node (``removeNode(..., movable=false)``)."""
        tab = self._table
        if not tab:
            return
        h = hash_map_hash(key)
        index = (len(tab) - 1) & h
        p = tab[index]
        if p is None:
            return
        node: Node | None = None
        if p.hash == h and p.key == key:
            node = p
        elif p.next is not None:
            if p.tree:
                node = tb.find(tb.root_of(p), h, key)
            else:
                e: Node | None = p.next
                while e is not None:
                    if e.hash == h and e.key == key:
                        node = e
                        break
                    p = e
                    e = e.next
        if node is None:
            return
        if node.tree:
            tb.remove_tree_node(tab, node, movable)
        elif node is p:
            tab[index] = node.next
        else:
            p.next = node.next
        self._size -= 1

    def clear(self) -> None:
        """``clear()``: the table keeps its size."""
        if self._table and self._size > 0:
            self._size = 0
            self._table = [None] * len(self._table)

    # --- resize ---------------------------------------------------------------------------------------
    def _resize(self) -> list[Node | None]:
        """``resize()``: double the table (or allocate it); each bin splits into lo / hi in order."""
        old = self._table
        old_cap = len(old) if old else 0
        old_thr = self._threshold
        new_thr = 0
        if old_cap > 0:
            new_cap = old_cap << 1
            if new_cap < MAXIMUM_CAPACITY and old_cap >= 16:
                new_thr = old_thr << 1
        elif old_thr > 0:
            new_cap = old_thr
        else:
            new_cap, new_thr = 16, 12
        if new_thr == 0:
            new_thr = int(new_cap * 0.75)
        self._threshold = new_thr
        tab: list[Node | None] = [None] * new_cap
        self._table = tab
        for j in range(old_cap):
            assert old is not None
            e = old[j]
            if e is None:
                continue
            if e.next is None:
                tab[e.hash & (new_cap - 1)] = e
            elif e.tree:
                tb.split_tree(tab, e, j, old_cap)
            else:
                lo, hi = tb.split_chain(e, old_cap)
                tab[j], tab[j + old_cap] = lo, hi
        return tab


Bin = Node | tb.TreeBin | None


class JavaConcurrentHashMap:
    """``java.util.concurrent.ConcurrentHashMap<String, ?>``, single-threaded: keys in ``keySet()`` order."""

    def __init__(self, initial_capacity: int | None = None) -> None:
        _check_capacity(initial_capacity)
        self._table: list[Bin] | None = None
        self._size = 0
        if initial_capacity is None:
            self._size_ctl = 0
        else:  # JDK 17: this(initialCapacity, LOAD_FACTOR, 1)
            size = int(1.0 + _f32(np.float32(max(initial_capacity, 1)) / np.float32(0.75)))
            self._size_ctl = MAXIMUM_CAPACITY if size >= MAXIMUM_CAPACITY else table_size_for(size)

    @classmethod
    def copy_of(cls, keys: Iterable[str]) -> JavaConcurrentHashMap:
        """``new ConcurrentHashMap<>(map)`` of a map iterating ``keys``: ``sizeCtl = 16``, ``putAll``."""
        ks = list(dict.fromkeys(keys))
        m = cls()
        m._size_ctl = 16
        m._try_presize(len(ks))
        for k in ks:
            m.put(k)
        return m

    def __len__(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        """The table's length (0 before the first put): what ``clear()`` keeps of its history."""
        return len(self._table) if self._table else 0

    @classmethod
    def cleared(cls, capacity: int) -> JavaConcurrentHashMap:
        """A default ``ConcurrentHashMap`` grown to ``capacity`` (a power of two >= 16, or 0), then ``clear()``ed:
        empty bins, the table and ``sizeCtl`` (``n - n / 4``) kept."""
        m = cls()
        if capacity:
            n = table_size_for(max(capacity, 16))
            m._table, m._size_ctl = [None] * n, n - (n >> 2)
        return m

    def keys(self) -> list[str]:
        """The keys as ``keySet().iterator()`` (a ``Traverser``) returns them."""
        out: list[str] = []
        for b in self._table or ():
            e = b.first if isinstance(b, tb.TreeBin) else b
            while e is not None:
                out.append(e.key)
                e = e.next
        return out

    def put(self, key: str) -> None:
        """``put`` / ``putIfAbsent`` / ``computeIfAbsent``: a new key goes to the end of a list bin, the front
        of a tree bin; a bin found holding 8+ keys is treeified (even when the key was present)."""
        h = concurrent_spread(key)
        tab = self._table if self._table else self._init_table()
        i = (len(tab) - 1) & h
        f = tab[i]
        if f is None:
            tab[i] = Node(h, key)
            self._add_count()
            return
        if isinstance(f, tb.TreeBin):
            bin_count, added = 2, f.put_tree_val(h, key)
        else:
            bin_count, added, e = 1, False, f
            while True:
                if e.hash == h and e.key == key:
                    break
                if e.next is None:
                    e.next = Node(h, key)
                    added = True
                    break
                e = e.next
                bin_count += 1
        if bin_count >= TREEIFY_THRESHOLD:
            self._treeify_bin(tab, i)
        if added:
            self._add_count()

    compute_if_absent = put

    def remove(self, key: str) -> None:
        """``remove(key)`` (``replaceNode``)."""
        tab = self._table
        if not tab:
            return
        h = concurrent_spread(key)
        i = (len(tab) - 1) & h
        f = tab[i]
        if isinstance(f, tb.TreeBin):
            p = tb.find(f.root, h, key)
            if p is None:
                return
            if f.remove_tree_node(p):
                tab[i] = tb.untreeify(f.first)
        else:
            pred: Node | None = None
            e = f
            while e is not None and not (e.hash == h and e.key == key):
                pred, e = e, e.next
            if e is None:
                return
            if pred is None:
                tab[i] = e.next
            else:
                pred.next = e.next
        self._size -= 1

    def clear(self) -> None:
        """``clear()``: the table keeps its size and ``sizeCtl``."""
        if self._table:
            self._table = [None] * len(self._table)
        self._size = 0

    def _init_table(self) -> list[Bin]:
        n = self._size_ctl if self._size_ctl > 0 else 16
        self._table = [None] * n
        self._size_ctl = n - (n >> 2)
        return self._table

    def _add_count(self) -> None:
        """``addCount(1, check >= 0)``: transfer while ``size >= sizeCtl``."""
        self._size += 1
        while self._table and self._size >= self._size_ctl and len(self._table) < MAXIMUM_CAPACITY:
            self._transfer()

    def _try_presize(self, size: int) -> None:
        """``tryPresize``: grow until ``tableSizeFor(1.5 * size + 1) <= sizeCtl``."""
        c = MAXIMUM_CAPACITY if size >= MAXIMUM_CAPACITY >> 1 else table_size_for(size + (size >> 1) + 1)
        while True:
            if not self._table:
                n = max(self._size_ctl, c)
                self._table = [None] * n
                self._size_ctl = n - (n >> 2)
            elif c <= self._size_ctl or len(self._table) >= MAXIMUM_CAPACITY:
                return
            else:
                self._transfer()

    def _treeify_bin(self, tab: list[Bin], index: int) -> None:
        """``treeifyBin``: ``tryPresize(2 * table)`` below 64, else the list bin becomes a ``TreeBin``."""
        if len(tab) < MIN_TREEIFY_CAPACITY:
            self._try_presize(len(tab) << 1)
            return
        b = tab[index]
        if isinstance(b, Node):
            prev: Node | None = None
            e: Node | None = b
            while e is not None:
                e.prev = prev
                prev, e = e, e.next
            tab[index] = tb.TreeBin(b)

    def _transfer(self) -> None:
        """``transfer``: double the table; a list bin keeps its last same-half run, the nodes before it are
        prepended (reversed) to their half; a ``TreeBin`` splits in order."""
        old = self._table
        assert old is not None
        n = len(old)
        nxt: list[Bin] = [None] * (n << 1)
        for i, f in enumerate(old):
            if isinstance(f, tb.TreeBin):
                lo, hi = tb.split_chain(tb.untreeify(f.first), n)
                nxt[i], nxt[i + n] = _tree_half(lo, hi, f), _tree_half(hi, lo, f)
            elif f is not None:
                nxt[i], nxt[i + n] = _transfer_chain(f, n)
        self._table = nxt
        self._size_ctl = (n << 1) - (n >> 1)


def _tree_half(half: Node | None, other: Node | None, t: tb.TreeBin) -> Bin:
    """One half of a split ``TreeBin``: a list if 6 or fewer, the old bin if nothing left it, else a new one."""
    count, e = 0, half
    while e is not None:
        count, e = count + 1, e.next
    if count <= UNTREEIFY_THRESHOLD:
        return half
    if other is None:
        return t
    assert half is not None
    return tb.TreeBin(half)


def _transfer_chain(f: Node, n: int) -> tuple[Node | None, Node | None]:
    run_bit, last_run = f.hash & n, f
    p = f.next
    while p is not None:
        if (p.hash & n) != run_bit:
            run_bit, last_run = p.hash & n, p
        p = p.next
    ln, hn = (last_run, None) if run_bit == 0 else (None, last_run)
    q: Node | None = f
    while q is not None and q is not last_run:
        if q.hash & n == 0:
            ln = Node(q.hash, q.key, ln)
        else:
            hn = Node(q.hash, q.key, hn)
        q = q.next
    return ln, hn


class JavaLinkedHashMap:
    """``java.util.LinkedHashMap<String, ?>`` (insertion order, ``accessOrder = false``)."""

    def __init__(self, initial_capacity: int | None = None) -> None:
        _check_capacity(initial_capacity)
        self._keys: dict[str, None] = {}

    @classmethod
    def copy_of(cls, keys: Iterable[str]) -> JavaLinkedHashMap:
        m = cls()
        for k in keys:
            m.put(k)
        return m

    def __len__(self) -> int:
        return len(self._keys)

    def keys(self) -> list[str]:
        return list(self._keys)

    def put(self, key: str) -> None:
        self._keys.setdefault(key, None)

    compute_if_absent = put

    def remove(self, key: str) -> None:
        self._keys.pop(key, None)

    def clear(self) -> None:
        self._keys.clear()


def java_hash_set_copy(keys: Iterable[str]) -> JavaHashMap:
    """``new HashSet<>(collection)``: ``new HashMap<>(max((int) (size / .75f) + 1, 16))``, then ``addAll``."""
    ks = list(keys)
    m = JavaHashMap(max(int(_f32(np.float32(len(ks)) / np.float32(0.75))) + 1, 16))
    for k in ks:
        m.put(k)
    return m


JavaMap = JavaHashMap | JavaConcurrentHashMap | JavaLinkedHashMap


def new_map(kind: str = "HashMap", initial_capacity: int | None = None) -> JavaMap:
    """An empty map of ``kind`` (one of :data:`KINDS`; ``HashSet`` is a ``HashMap``)."""
    if kind in ("HashMap", "HashSet"):
        return JavaHashMap(initial_capacity)
    if kind == "ConcurrentHashMap":
        return JavaConcurrentHashMap(initial_capacity)
    if kind == "LinkedHashMap":
        return JavaLinkedHashMap(initial_capacity)
    raise ValueError(f"unknown Java map kind {kind!r} (one of {', '.join(KINDS)})")


def iteration_order(keys: Iterable[str], kind: str = "HashMap", initial_capacity: int | None = None) -> list[str]:
    """The iteration order of a ``kind`` map built by ``put`` (``add``) of ``keys`` in the given order."""
    m = new_map(kind, initial_capacity)
    for k in keys:
        m.put(k)
    return m.keys()

