"""The replay's bundle layout and ownership: who owns which bundle, and the ownership intervals it writes.

Closed loop, the ownership evolves from the replay's own decisions; in an audit it is the observed one,
re-read every tick. Splits replace a parent by its children (``NamespaceBundleFactory#splitBundles``).
"""

from __future__ import annotations

import numpy as np

from lbreplay.kernel.naming import bundle_bounds
from lbreplay.replay.records import OwnershipInterval
from lbreplay.replay.ring_load import bundle_span, finest


class Layout:
    """The replay's current bundles (sorted by name) with their owners (broker universe rows)."""

    # the last names parsed and what they gave: most ticks observe the same bundles as the tick before
    _last: tuple[list[str], list[str], tuple] | None = None

    def __init__(self, names: list[str], owner: np.ndarray, namespaces: list[str]):
        last = Layout._last
        if last is not None and last[0] == names and last[1] == namespaces:
            order, self.names, self.namespace, self.ns_idx, self.lower, self.upper, self.start, self.end = \
                (v.copy() for v in last[2])
            self.owner = owner[order].astype(np.int32)
            return
        order = np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
        self.names = [names[i] for i in order.tolist()]
        self.owner = owner[order].astype(np.int32)
        ns_index = {ns: i for i, ns in enumerate(namespaces)}
        parsed = [bundle_bounds(n) for n in self.names]
        self.namespace = [p[0] for p in parsed]
        self.ns_idx = np.array([ns_index[p[0]] for p in parsed], dtype=np.int64)
        self.lower = np.array([p[1] for p in parsed], dtype=np.int64)
        self.upper = np.array([p[2] for p in parsed], dtype=np.int64)
        self.start, self.end = bundle_span(self.ns_idx, self.lower, self.upper)
        Layout._last = (list(names), list(namespaces), (order, self.names, self.namespace, self.ns_idx, self.lower,
                                                       self.upper, self.start, self.end))

    def __len__(self) -> int:
        return len(self.names)

    def counts_per_namespace(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ns in self.namespace:
            out[ns] = out.get(ns, 0) + 1
        return out

    def rows(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def unowned(self) -> list[str]:
        return [self.names[r] for r in np.flatnonzero(self.owner < 0)]


class Ownership:
    """The layout, its owners and the open ownership intervals; closed intervals collect per tick."""

    def __init__(self, broker_ids: list[str], namespaces: list[str]):
        self.broker_ids = broker_ids
        self.namespaces = namespaces
        self._layout: Layout | None = None
        self.open_intervals: dict[str, tuple[int, int, int]] = {}  # bundle -> (broker, from_tick, from_ts)
        self.closed: list[OwnershipInterval] = []
        self.tick = 0
        self.ts_ms = 0

    @property
    def layout(self) -> Layout:
        assert self._layout is not None, "no layout before the first tick"
        return self._layout

    @property
    def started(self) -> bool:
        return self._layout is not None

    def begin_tick(self, tick: int, ts_ms: int) -> None:
        """Stamp for the intervals this tick opens and closes; the closed list starts empty."""
        self.tick, self.ts_ms = tick, ts_ms
        self.closed = []

    def follow(self, observed: Layout) -> None:
        """Take the observed layout and owners (the first tick, and every tick of an audit)."""
        if self._layout is None:
            for row, name in enumerate(observed.names):
                if observed.owner[row] >= 0:
                    self.open_intervals[name] = (int(observed.owner[row]), self.tick, self.ts_ms)
        else:
            for row, name in enumerate(observed.names):
                cur = self.open_intervals.get(name)
                own = int(observed.owner[row])
                if cur is None or cur[0] != own:
                    self._close(name)
                    if own >= 0:
                        self.open_intervals[name] = (own, self.tick, self.ts_ms)
            observed_names = set(observed.names)
            for name in [n for n in self.open_intervals if n not in observed_names]:
                self._close(name)
        self._layout = observed

    def adopt(self, observed: Layout) -> list[str]:
        """A recording's closed loop: the observed bundles whose range no bundle of the layout overlaps (a
        namespace's bundles appear as the recording's brokers first report them) join the layout with their
        recorded owner; the finest of nested observed ranges are taken (a split parent still in an older report
        beside its children). Returns the adopted names."""
        layout = self.layout
        known = set(layout.names)
        if all(n in known for n in observed.names):
            return []
        rows = np.flatnonzero(finest(observed.start, observed.end) & (observed.owner >= 0))
        order = np.argsort(layout.start, kind="stable")
        starts, ends = layout.start[order], layout.end[order]
        new = []
        for r in rows.tolist():
            k = int(np.searchsorted(starts, observed.end[r], side="left"))  # layout bundles starting before its end
            if observed.names[r] not in known and not (k > 0 and ends[:k].max() > observed.start[r]):
                new.append(r)
        if not new:
            return []
        names = [observed.names[r] for r in new]
        owner = observed.owner[np.array(new, dtype=np.int64)].astype(np.int32)
        for name, own in zip(names, owner.tolist()):
            self.open_intervals[name] = (int(own), self.tick, self.ts_ms)
        self._layout = Layout(layout.names + names, np.concatenate([layout.owner, owner]), self.namespaces)
        return names

    def restamp(self) -> None:
        """The open intervals start at this tick (a closed loop taking over the audit's ownership after its
        lead-in); the intervals closed before are dropped."""
        self.open_intervals = {n: (b, self.tick, self.ts_ms) for n, (b, _, _) in self.open_intervals.items()}
        self.closed = []

    def release(self, alive: np.ndarray) -> None:
        """Brokers that left release their bundles (orphans, assigned at their next lookup)."""
        layout = self.layout
        dead = (layout.owner >= 0) & ~alive[np.maximum(layout.owner, 0)]
        for row in np.flatnonzero(dead):
            self.set_owner(int(row), -1)

    def owner_id(self, row: int) -> str | None:
        owner = int(self.layout.owner[row])
        return self.broker_ids[owner] if owner >= 0 else None

    def set_owner(self, row: int, broker: int) -> None:
        layout = self.layout
        name = layout.names[row]
        current = self.open_intervals.get(name)
        if current is not None and current[0] == broker:
            layout.owner[row] = broker
            return
        self._close(name)
        layout.owner[row] = broker
        if broker >= 0:
            self.open_intervals[name] = (broker, self.tick, self.ts_ms)

    def split(self, parent: str, children: list[str], unload: bool) -> int | None:
        """Replace ``parent`` by ``children`` in the layout (``NamespaceBundleFactory#splitBundles``).

        The children stay with the parent's owner, or are left unowned for their next lookup when ``unload``
        (``loadBalancerAutoUnloadSplitBundlesEnabled``). Returns the parent's owner row (-1: unowned), or None
        when the parent is not in the layout.
        """
        layout = self.layout
        try:
            i = layout.names.index(parent)
        except ValueError:
            return None
        parent_owner = int(layout.owner[i])
        self._close(parent)
        child_owner = -1 if unload else parent_owner
        names = layout.names[:i] + layout.names[i + 1:] + list(children)
        owner = np.concatenate([np.delete(layout.owner, i), np.full(len(children), child_owner, dtype=np.int32)])
        if child_owner >= 0:
            for c in children:
                self.open_intervals[c] = (child_owner, self.tick, self.ts_ms)
        self._layout = Layout(names, owner, self.namespaces)
        return parent_owner

    def finish(self) -> list[OwnershipInterval]:
        """Still-open ownership intervals (``to_*`` null)."""
        out = []
        for bundle, (broker, f_tick, f_ts) in sorted(self.open_intervals.items()):
            ns, lo, hi = bundle_bounds(bundle)
            out.append(OwnershipInterval(bundle, ns, lo, hi, self.broker_ids[broker], f_tick, None, f_ts, None))
        return out

    def _close(self, bundle: str) -> None:
        entry = self.open_intervals.pop(bundle, None)
        if entry is None:
            return
        broker, f_tick, f_ts = entry
        ns, lo, hi = bundle_bounds(bundle)
        self.closed.append(OwnershipInterval(bundle, ns, lo, hi, self.broker_ids[broker], f_tick, self.tick, f_ts,
                                             self.ts_ms))
