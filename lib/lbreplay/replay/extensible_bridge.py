"""The engine's extensible-load-manager path (PIP-192): ``BrokerLoadDataReporter``, ``TopKBundles``,
``UnloadScheduler`` + ``TransferShedder``, ``DefaultNamespaceBundleSplitStrategyImpl`` and the extensible
``LeastResourceUsageWithWeight`` assignment, applied to the replay's ownership and layout.

Chosen when ``loadManagerClassName`` is ``ExtensibleLoadManagerImpl`` or the shedding strategy is
``TransferShedder`` (Pulsar falls back to TransferShedder under the extensible manager anyway).

* Every tick each live broker's ``BrokerLoadData`` is updated once per ``loadBalancerReportUpdateMinIntervalMillis``
  elapsed (the EMA steps every 5 s with the same host usage); it is *published* (what the leader reads) when the
  10 % / 15 min rule holds, together with the broker's top-K bundle list; entries of brokers that left stay in
  the store (TransferShedder ages them out by ``loadBalancerBrokerLoadDataTTLInSeconds``).
* The service-unit state (``bundle_owners``) is the replay's true ownership.
* A transfer moves the bundle to its destination (``TRANSFER``); an unload without transfer leaves it unowned
  until the assignment step places it (``UNLOAD`` then ``ASSIGN``).
* Splits run every ``loadBalancerSplitIntervalMinutes`` on each broker's current bundle stats; children stay
  with the owner (extensible splits never unload).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lbreplay.kernel.broker_report import need_broker_data_update
from lbreplay.kernel.config import short_class
from lbreplay.kernel.extensible.broker_filters import filter_brokers
from lbreplay.kernel.extensible.broker_load_data import BrokerLoadData
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.extensible.default_namespace_bundle_split_strategy import DefaultNamespaceBundleSplitStrategy
from lbreplay.kernel.extensible.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from lbreplay.kernel.extensible.top_k_bundles import TopBundlesLoadData, top_k_bundles
from lbreplay.kernel.extensible.transfer_shedder import expire_recently_unloaded_bundles

if TYPE_CHECKING:
    from lbreplay.replay.engine import Decision, ObservedTick, OwnershipInterval, Replay

EXTENSIBLE_LM = "ExtensibleLoadManagerImpl"


def is_extensible(conf: Any) -> bool:
    return (short_class(conf["loadManagerClassName"]) == EXTENSIBLE_LM
            or short_class(conf["loadBalancerLoadSheddingStrategy"]) == "TransferShedder")


class ExtensibleLeader:
    """Cross-tick state of the extensible load manager for one replay."""

    def __init__(self, n_brokers: int):
        self.live = BrokerLoadData.empty(n_brokers)  # each broker's own, updated every 5 s
        self.published = BrokerLoadData.empty(n_brokers)  # the store the leader reads
        self.pub_last = np.full(n_brokers, -1, dtype=np.int64)
        self.pub_rate = np.zeros(n_brokers)
        self.pub_thr = np.zeros(n_brokers)
        self.pub_nb = np.zeros(n_brokers)
        self.pub_max = np.zeros(n_brokers)
        self.top_lists: list[list[tuple[str, list[float]]] | None] = [None] * n_brokers
        self.recently_unloaded_bundles: dict[str, int] = {}
        self.recently_unloaded_brokers: dict[str, int] = {}
        self.splitter = DefaultNamespaceBundleSplitStrategy()
        self.selector = LeastResourceUsageWithWeight()
        self.last_ms: int | None = None
        self.last_split_ms: int | None = None


def report(replay: "Replay", obs: "ObservedTick", usage: np.ndarray, limit: np.ndarray, tot: np.ndarray,
           num_bundles: np.ndarray, vals: np.ndarray) -> None:
    """BrokerLoadDataReporter + TopBundleLoadDataReporter for this tick."""
    conf = replay.conf
    st = replay.ext
    alive = obs.alive.astype(bool)
    rows = np.flatnonzero(alive)
    step_ms = int(conf["loadBalancerReportUpdateMinIntervalMillis"])
    steps = 1 if st.last_ms is None else max(1, int((obs.ts_ms - st.last_ms) // step_ms))
    st.last_ms = obs.ts_ms
    for k in range(steps):
        st.live.update(rows, usage[rows], limit[rows], tot[rows, 0], tot[rows, 1], tot[rows, 2], tot[rows, 3],
                       num_bundles[rows].astype(np.int64), tot[rows, 5].astype(np.int64),
                       obs.ts_ms - (steps - 1 - k) * step_ms, conf)
    rate = tot[:, 2] + tot[:, 3]
    thr = tot[:, 0] + tot[:, 1]
    write = alive & need_broker_data_update(st.pub_last, obs.ts_ms, st.pub_rate, rate, st.pub_thr, thr, st.pub_nb,
                                            num_bundles, st.pub_max, st.live.max_resource_usage, conf)
    w = np.flatnonzero(write)
    if w.size == 0:
        return
    st.published.copy_rows(w, st.live, w)
    st.published.reported_at[w] = obs.ts_ms
    st.pub_last[w], st.pub_rate[w], st.pub_thr[w] = obs.ts_ms, rate[w], thr[w]
    st.pub_nb[w], st.pub_max[w] = num_bundles[w], st.live.max_resource_usage[w]
    layout = replay.layout
    k = int(conf["loadBalancerMaxNumberOfBundlesInBundleLoadReport"])
    policies = replay.static.policies
    for b in w:
        own = np.flatnonzero(layout.owner == b)
        if own.size == 0:
            st.top_lists[b] = []
            continue
        names = [layout.names[i] for i in own]
        v = vals[own]
        idx = top_k_bundles(names, v[:, :4], v[:, 5].astype(np.int64), v[:, 4].astype(np.int64),
                            np.zeros(own.size, dtype=np.int64), np.zeros(own.size, dtype=np.int64), k, conf, policies)
        st.top_lists[b] = [(names[i], [*v[i, :4].tolist(), float(v[i, 5]), float(v[i, 4]), 0.0, 0.0]) for i in idx]


def context(replay: "Replay", obs: "ObservedTick") -> ExtensibleContext:
    st = replay.ext
    layout = replay.layout
    ids = replay.static.broker_ids
    owners = {n: ids[o] for n, o in zip(layout.names, layout.owner) if o >= 0}
    return ExtensibleContext(
        broker_ids=ids, load=st.published, has_load_data=st.published.updated_at > 0,
        top=TopBundlesLoadData.from_lists(st.top_lists), available=obs.alive.astype(bool).copy(), now_ms=obs.ts_ms,
        bundle_owners=owners, recently_unloaded_bundles=st.recently_unloaded_bundles,
        recently_unloaded_brokers=st.recently_unloaded_brokers, policies=replay.static.policies,
    )


def shed(replay: "Replay", obs: "ObservedTick", to_assign: list[str], closed: list["OwnershipInterval"]) -> list["Decision"]:
    """UnloadScheduler: expire the grace period, run TransferShedder, apply transfers/unloads."""
    conf = replay.conf
    st = replay.ext
    if not (conf["loadBalancerEnabled"] and conf["loadBalancerSheddingEnabled"]) or int(obs.alive.sum()) <= 1:
        return []
    expire_recently_unloaded_bundles(st.recently_unloaded_bundles, obs.ts_ms, conf)
    ctx = context(replay, obs)
    unloads = replay.shedder.find_bundles_for_unloading(ctx, conf)
    index = {b: i for i, b in enumerate(replay.static.broker_ids)}
    row_of = {n: i for i, n in enumerate(replay.layout.names)}
    out = []
    for u in unloads:
        row = row_of.get(u.bundle)
        if row is None:
            continue
        if u.destination is not None:
            replay._set_owner(row, index[u.destination], obs.tick, obs.ts_ms, closed)
            action = "TRANSFER"
        else:
            replay._set_owner(row, -1, obs.tick, obs.ts_ms, closed)
            to_assign.append(u.bundle)
            action = "UNLOAD"
        st.recently_unloaded_bundles[u.bundle] = obs.ts_ms
        st.recently_unloaded_brokers[u.broker] = obs.ts_ms
        out.append(replay._decision(obs, action, u.bundle, u.broker, u.destination, u.reason, dict(u.details)))
    return out


def split(replay: "Replay", obs: "ObservedTick", vals: np.ndarray, closed: list["OwnershipInterval"]) -> list["Decision"]:
    """DefaultNamespaceBundleSplitStrategyImpl on every broker, every loadBalancerSplitIntervalMinutes."""
    conf = replay.conf
    st = replay.ext
    interval = int(conf["loadBalancerSplitIntervalMinutes"]) * 60_000
    if st.last_split_ms is not None and obs.ts_ms - st.last_split_ms < interval:
        return []
    st.last_split_ms = obs.ts_ms
    layout = replay.layout
    ids = replay.static.broker_ids
    owned = np.flatnonzero(layout.owner >= 0)
    if owned.size == 0:
        return []
    found = st.splitter.find_bundles_to_split(
        conf, reporter=[ids[layout.owner[i]] for i in owned], bundles=[layout.names[i] for i in owned],
        namespaces=[layout.namespace[i] for i in owned], lower=layout.lower[owned], upper=layout.upper[owned],
        msg_rate=vals[owned, 2] + vals[owned, 3], msg_throughput=vals[owned, 0] + vals[owned, 1],
        topics=vals[owned, 5].astype(np.int64), sessions=vals[owned, 4].astype(np.int64),
        bundle_count_per_namespace=layout.counts_per_namespace(),
    )
    out = []
    for d in found:
        parent = replay.apply_split(d.bundle, list(d.children), False, obs, closed) if d.ok else None
        if parent is None:
            continue
        src = ids[parent] if parent >= 0 else d.broker
        out.append(replay._decision(obs, "SPLIT", d.bundle, src, src, d.reason, dict(d.details),
                                    children=list(d.children), strategy="DefaultNamespaceBundleSplitStrategyImpl"))
    return out


def assign(replay: "Replay", bundles: list[str], obs: "ObservedTick", closed: list["OwnershipInterval"]) -> list["Decision"]:
    """Extensible assignment: the broker filter pipeline, then LeastResourceUsageWithWeight (extensions)."""
    ctx = context(replay, obs)
    row_of = {n: i for i, n in enumerate(replay.layout.names)}
    out = []
    for bundle in bundles:
        row = row_of.get(bundle)
        if row is None or replay.layout.owner[row] >= 0:
            continue
        cand = filter_brokers(ctx, replay.conf, bundle)
        if cand is None or not cand.any():
            continue
        b = replay.ext.selector.select(cand, ctx, replay.conf, replay.rng)
        if b < 0:
            continue
        replay._set_owner(row, int(b), obs.tick, obs.ts_ms, closed)
        out.append(replay._decision(obs, "ASSIGN", bundle, None, replay.static.broker_ids[b], "Assignment", {},
                                    strategy="LeastResourceUsageWithWeight"))
    return out
