"""The engine's calls into the kernel: ``doLoadShedding``, ``checkNamespaceBundleSplit`` and
``selectBrokerForAssignment``, applied to the replay's ownership and layout, recorded as decisions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lbreplay.kernel.bundle_split import check_namespace_bundle_split
from lbreplay.kernel.load_data import derived_cache
from lbreplay.kernel.modular_load_manager import do_load_shedding
from lbreplay.kernel.placement import LeaderState, select_broker_for_assignment
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.split_algorithms import apply_split

if TYPE_CHECKING:
    from lbreplay.replay.engine import Decision, ObservedTick, OwnershipInterval, Replay

_NO_POLICIES = NamespacePolicies()


def policies_of(replay: "Replay") -> NamespacePolicies:
    return replay.static.policies or _NO_POLICIES


def leader_of(replay: "Replay") -> LeaderState:
    assert replay.ld is not None
    if replay.leader is None:
        replay.leader = LeaderState.from_load_data(replay.ld)
    return replay.leader


def shed(replay: "Replay", ld, obs: "ObservedTick", to_assign: list[str], closed: list["OwnershipInterval"]) -> list["Decision"]:
    """Run ``doLoadShedding``; a bundle unloaded with a destination moves there, without one it is placed later."""
    ids = replay.static.broker_ids
    index = {b: i for i, b in enumerate(ids)}
    unloads = do_load_shedding(ld, replay.conf, replay.shedder, replay.placement, leader_of(replay),
                               policies_of(replay), replay.rng, obs.ts_ms)
    layout = replay.layout
    assert layout is not None
    row_of = {n: i for i, n in enumerate(layout.names)}
    out = []
    for u in unloads:
        row = row_of.get(u.bundle)
        if row is None:
            continue
        src = int(layout.owner[row])
        src_id = ids[src] if src >= 0 else u.broker
        details = dict(u.details)
        if replay.closed_loop:
            if u.destination is not None:
                replay._set_owner(row, index[u.destination], obs.tick, obs.ts_ms, closed)
            else:
                replay._set_owner(row, -1, obs.tick, obs.ts_ms, closed)
                to_assign.append(u.bundle)
        out.append(replay._decision(obs, "UNLOAD", u.bundle, src_id, u.destination, u.reason, details))
    return out


def split(replay: "Replay", ld, obs: "ObservedTick", to_assign: list[str], closed: list["OwnershipInterval"]) -> list["Decision"]:
    """Run the split check; apply splits to the layout (children stay with the owner, then are unloaded)."""
    layout = replay.layout
    assert layout is not None
    bounds: dict[str, list[int]] = {}
    for ns, lo, hi in zip(layout.namespace, layout.lower, layout.upper):
        bounds.setdefault(ns, []).append(int(lo))
    ns_bounds = {}
    for ns, lows in bounds.items():
        ups = [int(u) for n, u in zip(layout.namespace, layout.upper) if n == ns]
        ns_bounds[ns] = np.array(sorted(lows) + [max(ups)], dtype=np.int64)
    policies = policies_of(replay)
    leader = leader_of(replay)
    avail = np.ones(len(ld.brokers), dtype=bool)

    def should_unload(bundle: str, broker: str) -> bool:
        ns = bundle.rpartition("/")[0]
        row = ld.brokers.index(broker)
        return policies.should_namespace_policies_unload(ns, row, ld.brokers, avail) and \
            policies.should_anti_affinity_namespace_unload(ns, row, ld.brokers, avail, leader.bundle_ranges)

    found = check_namespace_bundle_split(ld, replay.conf, ns_bounds, should_unload=should_unload)
    if not found:
        return []
    out = []
    changed = False
    ids = replay.static.broker_ids
    owner_of = dict(zip(layout.names, layout.owner.tolist()))
    for d in found:
        # "Make sure the same bundle is not selected again": the parent's BundleData goes before the split is
        # tried (ModularLoadManagerImpl#checkNamespaceBundleSplit), also in an audit and when the split fails
        ld.bundles.has_bundle_data[d.bundle_row] = False
        if not d.ok or d.bundle not in owner_of:
            continue
        if replay.closed_loop:  # the what-if applies the split; an audit only records it
            replay.apply_split(d.bundle, list(d.children), d.unload, obs, closed)
            if d.unload:
                to_assign += d.children
            changed = True
        parent_owner = owner_of[d.bundle]
        details = dict(d.details)
        details["boundaries"] = float(len(d.boundaries))
        src = ids[parent_owner] if parent_owner >= 0 else d.broker
        out.append(replay._decision(obs, "SPLIT", d.bundle, src, src if not d.unload else None, d.reason, details,
                                    children=list(d.children), strategy="BundleSplitterTask"))
    if changed:
        replay.rebuild_leader_rows()
    return out


def assign(replay: "Replay", bundles: list[str], obs: "ObservedTick", closed: list["OwnershipInterval"]) -> list["Decision"]:
    """``selectBrokerForAssignment`` for each bundle in order (the next lookup of an unowned bundle)."""
    ld = replay.ld
    assert ld is not None and replay.layout is not None
    ids = replay.static.broker_ids
    index = {b: i for i, b in enumerate(ids)}
    row_of = {n: i for i, n in enumerate(replay.layout.names)}
    leader = leader_of(replay)
    policies = policies_of(replay)
    out = []
    # one derived-value cache for the whole assignment burst (only kernel calls mutate ld inside it)
    with derived_cache(ld):
        for bundle in bundles:
            row = row_of.get(bundle)
            if row is None or replay.layout.owner[row] >= 0:
                continue
            broker = select_broker_for_assignment(bundle, ld, replay.conf, replay.placement, leader, policies,
                                                  replay.rng)
            if broker is None:
                continue
            replay._set_owner(row, index[broker], obs.tick, obs.ts_ms, closed)
            out.append(replay._decision(obs, "ASSIGN", bundle, None, broker, "Assignment", {},
                                        strategy=replay.placement_name))
    return out


__all__ = ["shed", "split", "assign"]
