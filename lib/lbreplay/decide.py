"""``lbreplay decide``: one leader tick of Pulsar's load manager on one JSON snapshot (DESIGN.md §5).

No Spark, no pandas: this path imports only NumPy, PyYAML and the kernel, so it answers in well under
two seconds. The request uses Pulsar's own JSON objects; every bad request exits 2 (usage: malformed
JSON, wrong JSON type, unknown key or action) or 3 (invalid value) with a one-line message naming the
JSON path of the offending field. Unexpected failures exit 1 with a one-line reason, never a traceback.

Determinism: where Pulsar's result depends on Java hash-map iteration order, brokers and bundles are
visited in sorted order; random choices among equally good brokers use ``np.random.default_rng(seed)``.

Semantics chosen where the contract leaves room:

* Mode: the extensible load manager (``TransferShedder``, the ``extensible`` block) when
  ``loadManagerClassName`` is ``ExtensibleLoadManagerImpl`` or the shedding strategy is ``TransferShedder``;
  otherwise the modular one (the ``loadData`` block).
* ``nowMillis`` defaults to the newest report time in the snapshot (``lastUpdate`` / ``updatedAt``), never the
  wall clock, so a request always gives the same answer.
* One call is one leader refresh followed by the actions: preallocations carried in ``strategyState`` get
  ``updateBundleData``'s clean-up first (``preallocatedBundleToBroker`` emptied, bundles their broker now
  reports dropped). A map the request gives (``loadData.recentlyUnloadedBundles``,
  ``extensible.recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers``, even ``{}``) is the leader's map as
  Pulsar's scheduler passes it to the strategy (``UnloadScheduler.execute`` ->
  ``TransferShedder.findBundlesForUnloading``): it replaces the carried copy; only an absent map falls back to it.
* A broker's bundles are its own ``localData.bundles`` set and ``lastStats`` map (``LocalBrokerData``); a bundle
  listed by two brokers (while it moves, around a split) is legal and counts for both, as on Pulsar's leader.
* Every call is one refresh: ``cleanupDeadBrokersData`` tells both strategies the snapshot's brokers are the
  active ones (``onActiveBrokersChange``), so carried per-broker state of a broker absent from it is dropped.
* ``strategyState`` = ``{"version", "mode", "shedding": {"class", "state"}, "placement": {...}, "leader": {...}}``
  (modular; ``leader`` holds brokerToNamespaceToBundleRange, the round-robin selector, preallocations and
  recentlyUnloadedBundles) or ``{..., "split": {...}, "extensible": {recentlyUnloadedBundles,
  recentlyUnloadedBrokers, assigned}}`` (extensible). A component's state is restored only into the same class
  (a different configured class starts afresh, like a restarted broker).
* Bundle layouts: ``namespaces.<ns>.boundaries``; else derived from the request's bundle names (reported or
  owned bundles first, a stale overlapping bundle ignored, gaps filled as bundles); else
  ``defaultNumberOfNamespaceBundles`` bundles, as Pulsar creates a namespace. Splits in a request update the
  layout for the following actions; the split parent loses its BundleData (``checkNamespaceBundleSplit``).
* ``skip``: the shedding strategy's own reason (``HitCount``, ``CoolDown``, ``Balanced`` …); ``Disabled`` when
  shedding is off; ``NoBrokers`` with at most one broker ("Only 1 broker available"); ``NoDestination`` when the
  strategy planned unloads but the load manager issued none (policies, no other broker).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.decide_json import (
    drawn_entry,
    hex_boundary,
    parse_actions,
    parse_namespaces,
    parse_request_text,
    parse_topics,
    plain_json,
    with_request_root,
)
from lbreplay.errors import EXIT_FAILURE, InvalidInputError, LbReplayError, UsageError
from lbreplay.kernel.config import PulsarConfig, is_extensible, short_class
from lbreplay.kernel.extensible.broker_filters import POLICY_FILTERS
from lbreplay.kernel.extensible.context import ExtensibleContext
from lbreplay.kernel.json_readers import (
    as_array,
    as_int,
    as_object,
    as_string,
    check_keys,
    child,
    parse_boundary,
    parse_bundle_name,
)
from lbreplay.kernel.load_data_json import load_data_from_request
from lbreplay.kernel.load_manager import AnyLoadManager, create_load_manager
from lbreplay.kernel.naming import (
    FIRST_BOUNDARY,
    LAST_BOUNDARY,
    bundle_index_in_layout,
    bundle_names,
    can_split,
    find_bundle_index,
    initial_boundaries,
    namespace_of_topic,
    topic_hash,
)
from lbreplay.kernel.naming import parse_bundle_name as split_name
from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.kernel.pulsar_json import ExtensibleSnapshot, parse_extensible
from lbreplay.kernel.split_algorithms import TopicStats, apply_split, check_operator_split, split_boundaries

STATE_VERSION = 1
TOP_LEVEL_KEYS = (
    "config", "nowMillis", "loadData", "extensible", "namespaces", "isolationPolicies", "failureDomains",
    "topics", "strategyState", "actions",
)


class DecideFailure(LbReplayError):
    """An unexpected failure inside ``decide`` (exit 1), reported on one line."""

    exit_code = EXIT_FAILURE


# ----------------------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------------------
def decide_command(request: str, seed: int) -> None:
    """Read the request (a file path or ``-`` for stdin), decide, print one JSON document on stdout."""
    try:
        text = _read_request(request)
        req = parse_request_text(text)
        response = decide(req, seed)
        out = json.dumps(plain_json(response), separators=(",", ":"), allow_nan=False)
    except LbReplayError as exc:
        raise type(exc)(_one_line(str(exc))) from None
    except RecursionError:
        raise UsageError("$: request nested too deeply") from None
    except Exception as exc:  # never a traceback: one line, exit 1
        raise DecideFailure(_one_line(f"decide failed: {type(exc).__name__}: {exc}")) from None
    sys.stdout.write(out + "\n")
    sys.stdout.flush()


def _one_line(msg: str) -> str:
    return " ".join(msg.split())


def _read_request(request: str) -> str:
    try:
        if request == "-":
            return sys.stdin.read()
        with open(request, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"--request: cannot read {request!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--request: {request!r} is not UTF-8 text: {exc.reason}") from None


# ----------------------------------------------------------------------------------------------------------
# The response
# ----------------------------------------------------------------------------------------------------------
class TopicStatsByBundle(Mapping[str, TopicStats]):
    """The request's ``topics`` as ``TopicStats`` per bundle, each made on first use (only the bundles a split
    algorithm divides need them)."""

    def __init__(self, records: Mapping[str, list[dict[str, Any]]]) -> None:
        self._records = records
        self._made: dict[str, TopicStats] = {}

    def __getitem__(self, bundle: str) -> TopicStats:
        made = self._made.get(bundle)
        if made is None:
            made = self._made[bundle] = TopicStats.from_records(self._records[bundle])
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


@dataclass
class Response:
    unload: list[dict[str, Any]] = field(default_factory=list)
    split: list[dict[str, Any]] = field(default_factory=list)
    assign: list[dict[str, Any]] = field(default_factory=list)
    lookup: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    skip: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    strategyState: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "unload": self.unload, "split": self.split, "assign": self.assign, "lookup": self.lookup,
            "kept": self.kept, "skip": self.skip, "stats": self.stats, "strategyState": self.strategyState,
        }


def decide(req: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """Run the request's actions in order and return the response object (DESIGN.md §5)."""
    for key in req:
        if key not in TOP_LEVEL_KEYS:
            raise UsageError(f"{child('$', key)}: unknown request key; known: {', '.join(TOP_LEVEL_KEYS)}")
    if "config" not in req:
        raise UsageError("$.config: missing (use {} for Pulsar's defaults)")
    conf = PulsarConfig.resolve(as_object(req["config"], "$.config", allow_null=False), path="$.config")
    actions = parse_actions(["shed"] if req.get("actions") is None else req["actions"])
    if seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {seed}")
    leader = DecideRequest(req, conf, np.random.default_rng(seed))
    resp = Response()
    for path, kind, arg in actions:
        leader.run(path, kind, arg, resp)
    resp.strategyState = leader.strategy_state()
    return resp.to_json()


# ----------------------------------------------------------------------------------------------------------
# One call: the leader's state and the actions
# ----------------------------------------------------------------------------------------------------------
class DecideRequest:
    """The leader's state for one ``decide`` call: snapshot, strategies (restored from ``strategyState``), layouts.

    Each call stands for one leader refresh (``updateAll``) followed by the requested operations: carried-over
    preallocations get the refresh's clean-up (``updateBundleData``) before anything runs.
    """

    def __init__(self, req: Mapping[str, Any], conf: PulsarConfig, rng: np.random.Generator) -> None:
        self.conf = conf
        self.rng = rng
        self.ld = load_data_from_request(req)
        self.snap: ExtensibleSnapshot = parse_extensible(req.get("extensible"), "$.extensible")
        self.layouts, ns_block = parse_namespaces(req.get("namespaces"))
        self.topic_records = parse_topics(req.get("topics"))
        self.policies = self._policies(req, ns_block)
        self.now = self._now(req)
        self.ld.now_ms = self.now
        self.state_in = self._state(req.get("strategyState"))
        self._derived_layouts: dict[str, np.ndarray] = {}
        shed_name = short_class(conf["loadBalancerLoadSheddingStrategy"])
        avg_placement = short_class(conf["loadBalancerLoadPlacementStrategy"]) == "AvgShedder"
        if avg_placement and shed_name != "AvgShedder" and not is_extensible(conf):
            raise UsageError(
                f"$.config.loadBalancerLoadSheddingStrategy: the load shedding strategy {shed_name} can't work with "
                f"the placement strategy AvgShedder (ModularLoadManagerImpl requires the same class)")
        try:
            self.load_manager: AnyLoadManager = create_load_manager(conf, self.policies, rng)
        except LbReplayError as exc:
            raise with_request_root(exc) from None
        # the family's view: Pulsar's LoadData (modular) or the extensible leader's stores, and the maps the request
        # gives (they replace the carried copies in strategyState)
        self.view = self._family_view()
        given = self._given_maps(req.get("loadData" if self.load_manager.family == "modular" else "extensible"))
        self.load_manager.set_state(self.state_in, self.view, given)
        # the refresh this call stands for (updateAll -> cleanupDeadBrokersData; the extensible stores as they are)
        self.load_manager.refresh(self.view)

    def _family_view(self) -> Any:
        """The view the family's manager reads: the request's ``LoadData``, or the extensible stores with
        ``ExtensibleLoadManagerImpl.initialize``'s two policy filters appended."""
        if self.load_manager.family == "modular":
            return self.ld
        return ExtensibleContext.from_snapshot(self.snap, self.now, lookup=self.snap.brokerLookupData,
                                               policies=self.policies, extra_filters=POLICY_FILTERS)

    # --- the family's parts by name (the oracle's kernel answer runs them alone: lbreplay.verify) ------------
    @property
    def extensible(self) -> bool:
        return self.load_manager.family == "extensible"

    @property
    def manager(self) -> Any:
        return self.load_manager

    @property
    def ctx(self) -> Any:
        return self.view if self.extensible else None

    @property
    def shedder(self) -> Any:
        return self.load_manager.shedder

    @property
    def placement(self) -> Any:
        return getattr(self.load_manager, "placement", None)

    @property
    def splitter(self) -> Any:
        scheduler = getattr(self.load_manager, "split_scheduler", None)
        return None if scheduler is None else scheduler.splitter

    @property
    def shed_name(self) -> str:
        return self.load_manager.class_names()[0]

    @property
    def place_name(self) -> str:
        return self.load_manager.class_names()[1]

    @staticmethod
    def _given_maps(block: Any) -> set[str]:
        """The scheduler maps the request's family block gives (even ``{}``): ``UnloadScheduler.execute`` /
        ``doLoadShedding`` pass the leader's map as it is, so a given map replaces the carried copy."""
        keys = ("recentlyUnloadedBundles", "recentlyUnloadedBrokers")
        return {k for k in keys if isinstance(block, Mapping) and block.get(k) is not None}

    # --- request parts ----------------------------------------------------------------------------
    def _policies(self, req: Mapping[str, Any], ns_block: dict[str, Any]) -> Any:
        iso = as_object(req.get("isolationPolicies"), "$.isolationPolicies")
        for name, pol in iso.items():
            as_object(pol, child("$.isolationPolicies", name), allow_null=False)
        dom = as_object(req.get("failureDomains"), "$.failureDomains")
        for name, d in dom.items():
            as_object(d, child("$.failureDomains", name), allow_null=False)
        try:
            return NamespacePolicies.from_json(
                iso or None, dom or None, ns_block or None,
                failure_domains_enabled=bool(self.conf["failureDomainsEnabled"]),
                shedding_excluded_namespaces=self.conf["loadBalancerSheddingExcludedNamespaces"],
            )
        except LbReplayError as exc:
            raise with_request_root(exc) from None

    def _now(self, req: Mapping[str, Any]) -> int:
        """``nowMillis``, else the newest report time in the snapshot (deterministic, never the wall clock)."""
        if req.get("nowMillis") is not None:
            return as_int(req["nowMillis"], "$.nowMillis", minimum=0)
        stamps = [int(x) for x in self.ld.brokers.last_update.tolist()]
        stamps += [d.updatedAt for d in self.snap.brokerLoadData.values()]
        return max(stamps, default=0)

    @staticmethod
    def _state(doc: Any) -> dict[str, Any]:
        st = as_object(doc, "$.strategyState")
        if st and st.get("version") not in (None, STATE_VERSION):
            raise UsageError(f"$.strategyState.version: unsupported state version {st.get('version')!r}")
        for key in ("shedding", "placement", "leader", "split", "extensible"):
            as_object(st.get(key), child("$.strategyState", key))
        return st

    # --- actions ----------------------------------------------------------------------------------
    def run(self, path: str, kind: str, arg: Any, resp: Response) -> None:
        if kind == "shed":
            self.shed(resp)
        elif kind == "split":
            self.auto_split(resp)
        elif kind == "splitBundle":
            self.operator_split(path, arg, resp)
        elif kind == "assign":
            self.assign(path, arg, resp)
        elif kind == "lookup":
            self.lookup(path, arg, resp)

    def shed(self, resp: Response) -> None:
        """``doLoadShedding`` (modular) or ``UnloadScheduler.execute`` (extensible)."""
        shedding = self.load_manager.shed(self.view, self.now)
        for u in shedding.unloads:
            resp.unload.append(drawn_entry({"broker": u.broker, "bundle": u.bundle, "destination": u.destination,
                                            "reason": u.reason}, u.drawn_among))
        for k in shedding.kept:  # "The destination broker ... is the same as the current owner broker"
            resp.kept.append(drawn_entry({"broker": k.broker, "bundle": k.bundle}, k.drawn_among))
        resp.stats.update(shedding.stats)
        resp.skip = shedding.skip

    # --- split --------------------------------------------------------------------------------------
    def layout(self, ns: str) -> np.ndarray:
        """The namespace's bundle layout: ``namespaces.<ns>.boundaries``, else derived from the bundle names in
        the request (owned/reported bundles first; a stale bundle overlapping them is ignored; gaps become
        bundles), else ``defaultNumberOfNamespaceBundles`` bundles, as Pulsar creates a namespace."""
        if ns in self.layouts:
            return self.layouts[ns]
        if ns not in self._derived_layouts:
            self._derived_layouts[ns] = self._derive_layout(ns)
        return self._derived_layouts[ns]

    def _known_bundles(self, ns: str) -> list[tuple[int, int]]:
        b = self.ld.bundles
        listed = np.zeros(len(b), dtype=bool)
        for pairs in (self.ld.owned_pairs(), self.ld.reported_pairs()):
            listed[pairs[1]] = True
        current: list[str] = [b.names[i] for i in np.flatnonzero(listed) if b.namespaces[i] == ns]
        current += [n for n in (self.snap.bundleOwners or {}) if n.rpartition("/")[0] == ns]
        for t in self.snap.topBundlesLoadData.values():
            current += [n for n, _ in t.entries if n.rpartition("/")[0] == ns]
        other = [b.names[i] for i in range(len(b)) if b.namespaces[i] == ns]
        other += [n for n in self.topic_records if n.rpartition("/")[0] == ns]
        taken: list[tuple[int, int]] = []
        for name in current + other:
            _, lo, hi = split_name(name)
            if all(hi <= a or lo >= z for a, z in taken):
                taken.append((lo, hi))
        return taken

    def _derive_layout(self, ns: str) -> np.ndarray:
        known = self._known_bundles(ns)
        if not known:
            return initial_boundaries(int(self.conf["defaultNumberOfNamespaceBundles"]))
        points = {FIRST_BOUNDARY, LAST_BOUNDARY}
        for lo, hi in known:
            points.update((lo, hi))
        return np.asarray(sorted(points), dtype=np.int64)

    def _set_layout(self, ns: str, boundaries: np.ndarray) -> None:
        self.layouts[ns] = np.asarray(boundaries, dtype=np.int64)
        self._derived_layouts.pop(ns, None)

    def _topic_stats(self) -> "TopicStatsByBundle":
        return TopicStatsByBundle(self.topic_records)

    def _all_layouts(self, namespaces: Iterable[str]) -> dict[str, np.ndarray]:
        return {ns: self.layout(ns) for ns in sorted(set(namespaces))}

    def auto_split(self, resp: Response) -> None:
        """The family's split check (``checkNamespaceBundleSplit`` / ``SplitScheduler``) over the layouts this call
        knows; each split updates its namespace's layout for the following actions."""
        splitting = self.load_manager.split(self.view, self._all_layouts, self._topic_stats())
        for d in splitting.splits:
            try:
                self._set_layout(d.namespace, apply_split(self.layout(d.namespace), d.lower, d.upper, d.boundaries))
            except ValueError:
                pass  # not in the layout we know: report the decision anyway
            resp.split.append({"broker": d.broker, "bundle": d.bundle, "boundaries": [hex_boundary(x) for x in d.boundaries],
                               "algorithm": d.algorithm, "reason": d.reason})
        if splitting.stats is not None:
            resp.stats["split"] = splitting.stats

    def operator_split(self, path: str, arg: dict[str, Any], resp: Response) -> None:
        """``pulsar-admin namespaces split-bundle``: validated like ``NamespacesBase.internalSplitNamespaceBundle``."""

        check_keys(arg, ("bundle", "algorithm", "positions"), path)
        if arg.get("bundle") is None:
            raise UsageError(f"{child(path, 'bundle')}: missing")
        bundle = arg["bundle"]
        ns, lo, hi = parse_bundle_name(bundle, child(path, "bundle"))
        algorithm = arg.get("algorithm")
        if algorithm is not None:
            algorithm = as_string(algorithm, child(path, "algorithm")).strip() or None
        positions: list[int] | None = None
        if arg.get("positions") is not None:
            pp = child(path, "positions")
            positions = [parse_boundary(v, child(pp, i)) for i, v in enumerate(as_array(arg["positions"], pp))]
        layout = self.layout(ns)
        if bundle_index_in_layout(layout, lo, hi) < 0:
            raise InvalidInputError(f"{child(path, 'bundle')}: bundle {bundle!r} is not in the bundle layout of "
                                    f"namespace {ns!r} ({len(layout) - 1} bundles)")
        try:
            chosen = check_operator_split(algorithm, positions, self.conf)
        except InvalidInputError as exc:
            where = child(path, "positions" if "splitBoundaries" in str(exc) else "algorithm")
            raise InvalidInputError(f"{where}: {exc}") from None
        if not can_split(lo, hi):
            raise InvalidInputError(f"{child(path, 'bundle')}: bundle {bundle!r} can't be split further")
        records = self.topic_records.get(bundle)
        stats = self._topic_stats().get(bundle)
        row = self.ld.bundles.index(bundle)
        topic_count = len(records) if records is not None else (int(self.ld.bundles.topics[row]) if row >= 0 else 0)
        try:
            cuts = split_boundaries(chosen, lo, hi, topics=stats, topic_count=topic_count, positions=positions,
                                    conf=self.conf)
            new_layout = apply_split(layout, lo, hi, cuts) if cuts else None
        except ValueError:
            cuts, new_layout = [], None  # "No valid boundary found": nothing to split, not an error
        if new_layout is None:
            return
        self._set_layout(ns, new_layout)
        if row >= 0:
            self.ld.bundles.has_bundle_data[row] = False
        resp.split.append({"broker": self._owner(bundle), "bundle": bundle, "boundaries": [hex_boundary(x) for x in cuts],
                           "algorithm": chosen, "reason": "Admin"})

    def _owner(self, bundle: str) -> str | None:
        return self.load_manager.owner(self.view, bundle)

    # --- assign / lookup ----------------------------------------------------------------------------
    def assign(self, path: str, bundles: list[str], resp: Response) -> None:
        """``selectBrokerForAssignment`` (modular) or ``ExtensibleLoadManagerImpl.assign`` (extensible: the
        channel's owner, or this call's earlier choice, first)."""
        placed = self.load_manager.assign(bundles, self.view)
        draws = getattr(self.load_manager, "assign_draws", {})  # the modular placement's random draws
        for bundle, broker in placed:
            resp.assign.append(drawn_entry({"bundle": bundle, "broker": broker}, draws.get(bundle)))

    def lookup(self, path: str, topics: list[str], resp: Response) -> None:
        """Topic -> bundle: ``NamespaceBundles.findBundle(crc32(TopicName.toString()))`` over the namespace layout."""

        for i, topic in enumerate(topics):
            try:
                ns = namespace_of_topic(topic)
                h = topic_hash(topic)
            except ValueError as exc:
                raise InvalidInputError(f"{child(path, i)}: {exc}") from None
            layout = self.layout(ns)
            idx = int(find_bundle_index(layout, h)[0])
            resp.lookup.append({"topic": topic, "bundle": bundle_names(ns, layout[idx:idx + 2])[0]})

    # --- state out ----------------------------------------------------------------------------------
    def strategy_state(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "mode": self.load_manager.family,
                **self.load_manager.get_state(self.view)}
