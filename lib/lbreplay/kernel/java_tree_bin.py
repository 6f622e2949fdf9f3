"""The red-black tree bins of ``java.util.HashMap.TreeNode`` and ``ConcurrentHashMap.TreeBin`` (JDK 17).

A bin of either map becomes a tree once it holds too many colliding keys; its iteration then follows the
nodes' ``next`` links, whose order depends on the tree's shape: ``HashMap`` moves the root to the front of the
bin (``moveRootToFront``) and links a new node right after its tree parent (``putTreeVal``), and whether a
removal turns the bin back into a list depends on the root's children (``removeTreeNode``). Both maps share
the balancing code (``rotateLeft``, ``rotateRight``, ``balanceInsertion``, ``balanceDeletion``), mirrored here
step by step. Keys are Java ``String`` s: ordered in the tree by hash, then ``String.compareTo`` (UTF-16 code
units), so ``tieBreakOrder`` (identity hash codes) is never reached.
"""

from __future__ import annotations

UNTREEIFY_THRESHOLD = 6


class Node:
    """A map entry: ``HashMap.Node`` / ``TreeNode`` (``tree`` set) or ``ConcurrentHashMap.Node`` / ``TreeNode``."""

    __slots__ = ("hash", "key", "next", "prev", "parent", "left", "right", "red", "tree")

    def __init__(self, h: int, key: str, nxt: Node | None = None) -> None:
        self.hash = h
        self.key = key
        self.next: Node | None = nxt
        self.prev: Node | None = None
        self.parent: Node | None = None
        self.left: Node | None = None
        self.right: Node | None = None
        self.red = False
        self.tree = False


def utf16(key: str) -> bytes:
    """The key's UTF-16 code units, big-endian: byte order is ``String.compareTo`` order."""
    return key.encode("utf-16-be", "surrogatepass")


def compare_keys(a: str, b: str) -> int:
    """The sign of ``a.compareTo(b)`` for Java strings (code-unit order, then length)."""
    ua, ub = utf16(a), utf16(b)
    return (ua > ub) - (ua < ub)


def direction(h: int, key: str, p: Node) -> int:
    """-1 / 1: left / right of ``p`` (``putTreeVal``, ``treeify``, ``find``); 0: ``p`` holds ``key``."""
    if p.hash > h:
        return -1
    if p.hash < h:
        return 1
    return compare_keys(key, p.key)


def find(root: Node | None, h: int, key: str) -> Node | None:
    """``TreeNode.find``: the node holding ``key`` in the tree under ``root``."""
    p = root
    while p is not None:
        d = direction(h, key, p)
        if d == 0:
            return p
        p = p.left if d < 0 else p.right
    return None


def root_of(p: Node) -> Node:
    """``TreeNode.root()``."""
    while p.parent is not None:
        p = p.parent
    return p


def rotate_left(root: Node, p: Node | None) -> Node:
    """``rotateLeft``."""
    if p is not None and p.right is not None:
        r = p.right
        rl = p.right = r.left
        if rl is not None:
            rl.parent = p
        pp = r.parent = p.parent
        if pp is None:
            root = r
            r.red = False
        elif pp.left is p:
            pp.left = r
        else:
            pp.right = r
        r.left = p
        p.parent = r
    return root


def rotate_right(root: Node, p: Node | None) -> Node:
    """``rotateRight``."""
    if p is not None and p.left is not None:
        left = p.left
        lr = p.left = left.right
        if lr is not None:
            lr.parent = p
        pp = left.parent = p.parent
        if pp is None:
            root = left
            left.red = False
        elif pp.right is p:
            pp.right = left
        else:
            pp.left = left
        left.right = p
        p.parent = left
    return root


def balance_insertion(root: Node, x: Node) -> Node:
    """``balanceInsertion``: the new root."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if xppr is not None and xppr.red:
                xppr.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.right:
                x = xp
                root = rotate_left(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = rotate_right(root, xpp)
        else:
            if xppl is not None and xppl.red:
                xppl.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.left:
                x = xp
                root = rotate_right(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = rotate_left(root, xpp)


def _red(n: Node | None) -> bool:
    return n is not None and n.red


def balance_deletion(root: Node, x: Node | None) -> Node:
    """``balanceDeletion``: the new root."""
    while True:
        if x is None or x is root:
            return root
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        if x.red:
            x.red = False
            return root
        if xp.left is x:
            root, x = _deletion_step(root, x, xp, left_side=True)
        else:
            root, x = _deletion_step(root, x, xp, left_side=False)


def _deletion_step(root: Node, x: Node, xp: Node | None, left_side: bool) -> tuple[Node, Node | None]:
    """One pass of ``balanceDeletion``'s loop body for ``x`` on the left (or, mirrored, right) of ``xp``."""
    near, far = (rotate_left, rotate_right) if left_side else (rotate_right, rotate_left)

    def sib(p: Node | None) -> Node | None:
        if p is None:
            return None
        return p.right if left_side else p.left

    s = sib(xp)
    if s is not None and s.red:
        s.red = False
        assert xp is not None
        xp.red = True
        root = near(root, xp)
        xp = x.parent
        s = sib(xp)
    if s is None:
        return root, xp
    s_near, s_far = (s.left, s.right) if left_side else (s.right, s.left)
    if not _red(s_far) and not _red(s_near):
        s.red = True
        return root, xp
    if not _red(s_far):
        if s_near is not None:
            s_near.red = False
        s.red = True
        root = far(root, s)
        xp = x.parent
        s = sib(xp)
    if s is not None:
        s.red = False if xp is None else xp.red
        s_far = s.right if left_side else s.left
        if s_far is not None:
            s_far.red = False
    if xp is not None:
        xp.red = False
        root = near(root, xp)
    return root, root


def build_tree(head: Node) -> Node:
    """``TreeNode.treeify`` / ``new TreeBin(b)``: the tree of the ``next`` chain from ``head``; its root."""
    root: Node | None = None
    x: Node | None = head
    while x is not None:
        nxt = x.next
        x.left = x.right = None
        x.tree = True
        if root is None:
            x.parent = None
            x.red = False
            root = x
        else:
            p = root
            while True:
                d = direction(x.hash, x.key, p)
                xp = p
                child = p.left if d <= 0 else p.right
                if child is None:
                    x.parent = xp
                    if d <= 0:
                        xp.left = x
                    else:
                        xp.right = x
                    root = balance_insertion(root, x)
                    break
                p = child
        x = nxt
    assert root is not None
    return root


def attach(root: Node, h: int, key: str) -> tuple[Node, Node, Node]:
    """The tree descent of ``putTreeVal`` for a key not in the tree: (new node, its parent, the new root).

    The caller links the node into the ``next`` chain (the maps differ there) after this returns."""
    p = root
    while True:
        d = direction(h, key, p)
        xp = p
        child = p.left if d <= 0 else p.right
        if child is None:
            x = Node(h, key)
            x.tree = True
            x.parent = xp
            if d <= 0:
                xp.left = x
            else:
                xp.right = x
            return x, xp, balance_insertion(root, x)
        p = child


def too_small(root: Node | None) -> bool:
    """``removeTreeNode``'s test for turning the bin back into a list."""
    return root is None or root.right is None or root.left is None or root.left.left is None


def delete(root: Node, p: Node, blacken_new_root: bool) -> Node:
    """The red-black part of ``removeTreeNode`` (after the ``next`` chain was unlinked): the new root.

    ``HashMap`` paints a replacement that becomes the root black here; ``ConcurrentHashMap.TreeBin`` does not."""
    pl, pr = p.left, p.right
    if pl is not None and pr is not None:
        s = pr
        while s.left is not None:
            s = s.left
        s.red, p.red = p.red, s.red
        sr = s.right
        pp = p.parent
        if s is pr:
            p.parent = s
            s.right = p
        else:
            sp = s.parent
            p.parent = sp
            if sp is not None:
                if s is sp.left:
                    sp.left = p
                else:
                    sp.right = p
            s.right = pr
            pr.parent = s
        p.left = None
        p.right = sr
        if sr is not None:
            sr.parent = p
        s.left = pl
        pl.parent = s
        s.parent = pp
        if pp is None:
            root = s
        elif p is pp.left:
            pp.left = s
        else:
            pp.right = s
        replacement = sr if sr is not None else p
    elif pl is not None:
        replacement = pl
    elif pr is not None:
        replacement = pr
    else:
        replacement = p
    if replacement is not p:
        pp = replacement.parent = p.parent
        if pp is None:
            root = replacement
            if blacken_new_root:
                replacement.red = False
        elif p is pp.left:
            pp.left = replacement
        else:
            pp.right = replacement
        p.left = p.right = p.parent = None
    r = root if p.red else balance_deletion(root, replacement)
    if replacement is p:
        pp = p.parent
        p.parent = None
        if pp is not None:
            if p is pp.left:
                pp.left = None
            elif p is pp.right:
                pp.right = None
    return r


def untreeify(first: Node | None) -> Node | None:
    """``untreeify``: the same ``next`` chain as plain list nodes."""
    head: Node | None = None
    tail: Node | None = None
    q = first
    while q is not None:
        n = Node(q.hash, q.key)
        if tail is None:
            head = n
        else:
            tail.next = n
        tail = n
        q = q.next
    return head


# --- HashMap.TreeNode: the bin in the table --------------------------------------------------------
def split_chain(e: Node | None, bit: int) -> tuple[Node | None, Node | None]:
    """The chain from ``e`` split by ``hash & bit`` into (lo, hi), each in its original order."""
    heads: list[Node | None] = [None, None]
    tails: list[Node | None] = [None, None]
    while e is not None:
        nxt = e.next
        e.next = None
        side = 1 if e.hash & bit else 0
        e.prev = tails[side]
        tail = tails[side]
        if tail is None:
            heads[side] = e
        else:
            tail.next = e
        tails[side] = e
        e = nxt
    return heads[0], heads[1]


def split_tree(tab: list[Node | None], b: Node, index: int, bit: int) -> None:
    """``TreeNode.split``: lo / hi in order; a half of 6 or fewer becomes a list, else a tree (rebuilt only if
    the bin really split)."""
    lo, hi = split_chain(b, bit)
    for head, other, at in ((lo, hi, index), (hi, lo, index + bit)):
        if head is None:
            continue
        count = 0
        e: Node | None = head
        while e is not None:
            count += 1
            e = e.next
        if count <= UNTREEIFY_THRESHOLD:
            tab[at] = untreeify(head)
        else:
            tab[at] = head
            if other is not None:
                move_root_to_front(tab, build_tree(head))


def move_root_to_front(tab: list[Node | None], root: Node) -> None:
    """``TreeNode.moveRootToFront``."""
    index = (len(tab) - 1) & root.hash
    first = tab[index]
    if root is not first:
        tab[index] = root
        rp, rn = root.prev, root.next
        if rn is not None:
            rn.prev = rp
        if rp is not None:
            rp.next = rn
        if first is not None:
            first.prev = root
        root.next = first
        root.prev = None


def remove_tree_node(tab: list[Node | None], node: Node, movable: bool = True) -> None:
    """``TreeNode.removeTreeNode(map, tab, movable)``: ``movable`` for ``remove(key)``, not for an iterator's
    ``remove()`` (``removeIf``), which neither turns a small tree back into a list nor moves the root first."""
    index = (len(tab) - 1) & node.hash
    first = tab[index]
    assert first is not None
    root = first
    succ, pred = node.next, node.prev
    if pred is None:
        tab[index] = first = succ
    else:
        pred.next = succ
    if succ is not None:
        succ.prev = pred
    if first is None:
        return
    if root.parent is not None:
        root = root_of(root)
    if movable and too_small(root):
        tab[index] = untreeify(first)
        return
    new_root = delete(root, node, blacken_new_root=True)
    if movable:
        move_root_to_front(tab, new_root)


# --- ConcurrentHashMap.TreeBin ---------------------------------------------------------------------
class TreeBin:
    """``ConcurrentHashMap.TreeBin``: a tree plus the ``first`` of its ``next`` chain (new nodes go first)."""

    __slots__ = ("first", "root")

    def __init__(self, head: Node) -> None:
        self.first: Node | None = head
        self.root: Node | None = build_tree(head)

    def put_tree_val(self, h: int, key: str) -> bool:
        """``TreeBin.putTreeVal``: False if present."""
        if find(self.root, h, key) is not None:
            return False
        assert self.root is not None
        x, _, self.root = attach(self.root, h, key)
        f = self.first
        x.next = f
        self.first = x
        if f is not None:
            f.prev = x
        return True

    def remove_tree_node(self, p: Node) -> bool:
        """``TreeBin.removeTreeNode``: True if the bin is now too small and becomes a list."""
        nxt, pred = p.next, p.prev
        if pred is None:
            self.first = nxt
        else:
            pred.next = nxt
        if nxt is not None:
            nxt.prev = pred
        if self.first is None:
            self.root = None
            return True
        if too_small(self.root):
            return True
        assert self.root is not None
        self.root = delete(self.root, p, blacken_new_root=False)
        return False
