"""The kernel's answer to an oracle request (through ``decide``'s own request parsing) and the comparison."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbreplay.decide import DecideRequest, Response
from lbreplay.kernel.bundle_split import find_bundles_to_split
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.extensible.split_scheduler import SPLIT_STRATEGY
from lbreplay.kernel.extensible.transfer_shedder import expire_recently_unloaded_bundles
from lbreplay.kernel.load_data_order import broker_candidate_order
from lbreplay.kernel.modular_load_manager import prune_recently_unloaded
from lbreplay.kernel.naming import parse_bundle_name
from lbreplay.kernel.split_algorithms import TopicStats, split_boundaries

REL_TOL = 1e-12


# ------------------------------------------------------------------------------------------------------------
# The kernel's answer, through decide's own request parsing
# ------------------------------------------------------------------------------------------------------------
def kernel_answer(req: dict[str, Any], state: dict[str, Any] | None, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """What lbreplay's kernel answers to ``req`` (same shape as the oracle's), and the strategy state to carry.

    ``decide.DecideRequest`` parses the request exactly as ``decide`` does; the strategies then run alone, as the oracle
    runs Pulsar's: ``shed`` = the grace-period prune + ``find_bundles_for_unloading`` (the plan, before the load
    manager's destination pick), ``assign`` = ``select_broker`` over every broker, ``split`` =
    ``find_bundles_to_split``.
    """
    full = dict(req)
    full.pop("sequence", None)
    full["strategyState"] = state
    conf = PulsarConfig.resolve(full["config"], path="$.config")
    tick = DecideRequest(full, conf, np.random.default_rng(seed))
    out: dict[str, Any] = {"unload": [], "split": [], "assign": [], "skip": None}
    if tick.extensible:
        if "split" in (full.get("actions") or []):
            return _kernel_extensible_split(tick, out)
        return _kernel_extensible(tick, conf, out)
    ld = tick.ld
    for action in full.get("actions") or ["shed"]:
        if action == "shed":
            if len(ld.brokers) <= 1:
                out["skip"] = "NoBrokers"
                continue
            prune_recently_unloaded(ld, conf, tick.now)
            shedder = tick.manager.shedder  # the modular strategy (tick.shedder's type also admits TransferShedder)
            plan = shedder.find_bundles_for_unloading(ld, conf)
            shedder.on_unload_attempt_completed({u.bundle for u in plan})
            if shedder.skip_reason() == "ComparisonContractViolation":
                out["skip"] = "ComparisonContractViolation"
            out["unload"] = [{"broker": u.broker, "bundle": u.bundle, "destination": None} for u in plan]
        elif action == "doLoadShedding":
            # ModularLoadManagerImpl.doLoadShedding: the unloads issued, with selectBroker's destination (3.0+)
            shedding = tick.manager.shed(ld, tick.now)
            if shedding.skip in ("NoBrokers", "ComparisonContractViolation"):
                out["skip"] = shedding.skip
            out["unload"] = [{"broker": u.broker, "bundle": u.bundle, "destination": u.destination}
                             for u in shedding.unloads]
        elif action == "split":
            layouts = {ns: v for ns, v in tick.layouts.items()}
            counts = {ns: int(v.size - 1) for ns, v in layouts.items()}
            for row, broker, _ in find_bundles_to_split(ld, conf, counts):
                out["split"].append({"broker": ld.brokers.ids[broker], "bundle": ld.bundles.names[row]})
        elif isinstance(action, dict) and "splitBoundary" in action:
            arg = action["splitBoundary"]
            _, lo, hi = parse_bundle_name(arg["bundle"])
            records = arg.get("topics") or []
            topics = TopicStats.from_records(records) if records else None
            positions = [int(p, 16) for p in arg.get("positions") or []]
            cuts = split_boundaries(arg["algorithm"], lo, hi, topics=topics, topic_count=len(records),
                                    positions=positions, conf=conf)
            out["splitBoundaries"] = [int(c) for c in cuts]
        elif isinstance(action, dict) and "selectBrokerForAssignment" in action:
            # decide's own assign: ModularLoadManagerImpl.selectBrokerForAssignment (the whole pipeline)
            for bundle, picked in tick.manager.assign(action["selectBrokerForAssignment"], ld):
                out["assign"].append({"bundle": bundle, "broker": picked})
        elif isinstance(action, dict) and "assign" in action:
            # the oracle's candidates: a HashSet of every broker, filled in brokerData's order
            rows = broker_candidate_order(ld, np.arange(len(ld.brokers), dtype=np.int64))
            for bundle in action["assign"]:
                row = tick.placement.select_broker(rows, bundle, ld, conf, tick.rng)
                out["assign"].append({"bundle": bundle, "broker": ld.brokers.ids[row] if row >= 0 else None})
    new_state = {"version": 1, "mode": "modular", "shedding": {"class": tick.shed_name,
                                                             "state": tick.shedder.get_state()}}
    if tick.placement is not tick.shedder:
        new_state["placement"] = {"class": tick.place_name, "state": tick.placement.get_state()}
    out["figures"] = _kernel_figures(new_state)
    return out, new_state


def _kernel_extensible(tick: Any, conf: Any, out: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``UnloadScheduler.execute`` + ``TransferShedder.findBundlesForUnloading`` as ``decide`` runs them, with the
    request's recently-unloaded maps as the inputs (no carried copy)."""
    ctx = tick.ctx
    expire_recently_unloaded_bundles(ctx.recently_unloaded_bundles, tick.now, conf)
    if int(ctx.available.sum()) <= 1:
        out["skip"] = "NoBrokers"
    else:
        decisions = tick.shedder.find_bundles_for_unloading(ctx, conf)
        out["unload"] = [{"broker": u.broker, "bundle": u.bundle, "destination": u.destination, "reason": u.reason}
                         for u in decisions]
        stats = tick.shedder.stats()
        out["stats"] = {k: stats[k] for k in ("loadAvg", "loadStd") if k in stats}
    state = {"version": 1, "mode": "extensible",
             "shedding": {"class": tick.shed_name, "state": tick.shedder.get_state()}}
    hits = tick.shedder.get_state().get("unloadConditionHitCount")
    out["figures"] = {} if hits is None else {"unloadConditionHitCount": {"value": float(hits)}}
    return out, state


def _kernel_extensible_split(tick: Any, out: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``SplitScheduler.execute``: decide's own extensible split cycle (``DefaultNamespaceBundleSplitStrategy`` of
    every broker with TopBundlesLoadData), its decisions with reason and boundary, and its failure count."""
    resp = Response()
    tick.auto_split(resp)
    out["split"] = [{"broker": d["broker"], "bundle": d["bundle"], "reason": d["reason"],
                     "boundaries": [int(b, 16) for b in d["boundaries"]]} for d in resp.split]
    out["stats"] = dict(resp.stats.get("split") or {"splitFailures": 0, "splitDecisions": 0})
    counts = tick.splitter.get_state()["splitConditionHitCounts"]
    out["figures"] = {"splitConditionHitCounts": {f"{b} {bundle}": float(n) for b, m in counts.items()
                                                  for bundle, n in m.items()}}
    state = {"version": 1, "mode": "extensible", "split": {"class": SPLIT_STRATEGY, "state": tick.splitter.get_state()}}
    return out, state


def _kernel_figures(state: dict[str, Any]) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for part in ("shedding", "placement"):
        st = (state.get(part) or {}).get("state") or {}
        for name in ("brokerAvgResourceUsage", "brokerAvgResourceUsageWithWeight", "brokerHitCountForHigh",
                     "brokerHitCountForLow"):
            if name in st:
                figures[name] = {str(k): float(v) for k, v in st[name].items()}
    return figures


# ------------------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------------------
def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)


def _split_diffs(java: list[dict[str, Any]], kernel: list[dict[str, Any]]) -> list[str]:
    """Split decisions: bundle and broker (up to 2.11 ``findBundlesToSplit`` answers bundle names only, broker
    null: the bundles), with reason and boundary where given (the extensible split strategy's decisions)."""
    names_only = any(s["broker"] is None for s in java)
    detailed = any("reason" in s for s in java + kernel)

    def split_key(s: dict[str, Any]) -> tuple[Any, ...]:
        key: tuple[Any, ...] = (s["bundle"], None if names_only else s["broker"])
        if detailed:
            key += (s.get("reason"), tuple(int(x) for x in s.get("boundaries") or ()))
        return key

    js, ks = sorted(map(split_key, java)), sorted(map(split_key, kernel))
    return [] if js == ks else [f"split: pulsar {js} lbreplay {ks}"]


def compare(strategy: str, java: dict[str, Any], kernel: dict[str, Any]) -> list[str]:
    """Differences between the oracle's and the kernel's answers (empty: they agree)."""
    diffs: list[str] = []
    if "error" in java:
        return [f"oracle error: {java['error']}"]
    # doLoadShedding's destination after a random draw (ThreadLocalRandom among equally good brokers, AvgShedder's
    # `new Random()`): the kernel's outcome for that bundle must be one of Pulsar's possible answers (the owner
    # among them: the bundle may be skipped); the other unloads compare exactly
    drawn = (java.get("oracle") or {}).get("destinationTies") or {}
    for bundle, possible in sorted(drawn.items()):
        mine = [u for u in kernel["unload"] if u["bundle"] == bundle]
        owners = {u["broker"] for u in java["unload"] if u["bundle"] == bundle} | {u["broker"] for u in mine}
        ok = all(u["destination"] in possible for u in mine) and (bool(mine) or bool(owners & set(possible))
                                                                  or not any(u["bundle"] == bundle
                                                                             for u in java["unload"]))
        if not ok:
            diffs.append(f"unload {bundle}: pulsar possible destinations {possible} lbreplay {mine}")
    ju = sorted((u["broker"], u["bundle"], u.get("destination"), u.get("reason")) for u in java["unload"]
                if u["bundle"] not in drawn)
    ku = sorted((u["broker"], u["bundle"], u.get("destination"), u.get("reason")) for u in kernel["unload"]
                if u["bundle"] not in drawn)
    if ju != ku:
        diffs.append(f"unload: pulsar {ju} lbreplay {ku}")
    diffs += _split_diffs(java["split"], kernel["split"])
    ties = (java.get("oracle") or {}).get("tieSets") or []
    tie_broken = False
    # placement-pipeline answers: after a random draw (Pulsar's ThreadLocalRandom / new Random()) only that bundle
    # is compared (against its set of possible answers); the figures are not
    random_draw = bool((java.get("oracle") or {}).get("randomDraw"))
    for i, (ja, ka) in enumerate(zip(java["assign"], kernel["assign"])):
        tie = ties[i] if i < len(ties) else []
        if random_draw and len(tie) > 1:
            tie_broken = True
            if ka["broker"] not in tie and ka["broker"] != ja["broker"]:
                diffs.append(f"assign {ja['bundle']}: pulsar {ja['broker']} (possible {tie}) lbreplay {ka['broker']}")
            break
        if ja["broker"] == ka["broker"]:
            continue
        if len(tie) > 1 and ka["broker"] in tie:
            # an equally good broker: Pulsar picks one of them with ThreadLocalRandom; the later assignments of
            # the same request depend on that pick (preallocation), so they are not compared, nor the figures
            tie_broken = True
            break
        diffs.append(f"assign {ja['bundle']}: pulsar {ja['broker']} (ties {tie}) lbreplay {ka['broker']}")
    if len(java["assign"]) != len(kernel["assign"]) and not tie_broken:
        diffs.append("assign: different lengths")
    js_, ks_ = java.get("stats") or {}, kernel.get("stats") or {}
    for key in sorted(set(js_) & set(ks_)):
        a, b = js_[key], ks_[key]
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not _close(float(a), float(b)):
            diffs.append(f"stats.{key}: pulsar {a!r} lbreplay {b!r}")
    if "splitBoundaries" in kernel:  # NamespaceBundleSplitAlgorithm.getSplitBoundary: null = no boundary
        jb = [int(x) for x in (java.get("oracle") or {}).get("splitBoundaries") or []]
        if jb != kernel["splitBoundaries"]:
            diffs.append(f"splitBoundaries: pulsar {jb} lbreplay {kernel['splitBoundaries']}")
    if java.get("skip") != kernel.get("skip"):
        diffs.append(f"skip: pulsar {java.get('skip')} lbreplay {kernel.get('skip')}")
    # after a random draw the overload re-check may or may not have run: the placement figures are not compared
    tie_broken = tie_broken or bool(drawn)
    jf = {} if tie_broken else (java.get("oracle") or {}).get("figures") or {}
    kf = kernel.get("figures") or {}
    for name in sorted(set(jf) & set(kf)):
        a, b = jf[name], kf[name]
        if set(a) != set(b):
            diffs.append(f"{name}: brokers pulsar {sorted(a)} lbreplay {sorted(b)}")
            continue
        for broker in sorted(a):
            if not _close(float(a[broker]), float(b[broker])):
                diffs.append(f"{name}[{broker}]: pulsar {a[broker]!r} lbreplay {b[broker]!r}")
    return diffs

