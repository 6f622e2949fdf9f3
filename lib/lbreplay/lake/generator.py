"""``lbreplay generate``: a deterministic synthetic cluster history, written as Spark transformations.

A scenario (``conf/scenarios/<name>.yaml`` or any YAML file) describes a cluster: brokers and their capacity,
namespaces with Pulsar's initial bundle boundaries, topics with heavy-tailed traffic, and events (brokers
leaving, joining, restarting; a hot bundle; jitter; a diurnal cycle). The generator writes the input tables
``topic_load``, ``bundle_load``, ``broker_load`` and ``namespace_policy`` for one cluster, replacing what that
cluster had before (one atomic Delta commit per table).

How it is built (no per-row driver loops):

* topics -- ``spark.range(topics)``; fully qualified names ``persistent://tenant/ns/...`` (some partitioned);
  a topic's bundle is found by CRC32 of its name (``F.crc32`` = ``zlib.crc32`` = Guava ``crc32``,
  ``NamespaceBundleFactory#getBundle``) against the namespace's initial boundaries (``PoliciesUtil.getBundles``).
  Per-topic constants (rate weight, message size, subscriptions, producers, consumers) are hash-based
  uniforms of (seed, salt, keys) via ``xxhash64``, so they do not depend on partitioning.
* ownership -- a small driver-side model over (bundle x event) metadata only (:func:`plan_ownership`): initial
  placement balances bundle message rates (capacity-blind, like ``LeastLongTermMessageRate``); a departing
  broker's bundles go to the least-loaded survivors; a joining (or restarted) broker starts empty and receives
  bundles gradually, a few moves per tick from the most- to the least-loaded broker (shedding-like). The result
  is a list of ownership intervals, joined to the per-tick data.
* ticks x topics -- ``crossJoin`` of ``spark.range(ticks)`` with the topics: rates = scale x weight x diurnal
  x noise x jitter x hot-bundle ramp, kept as integer milli-msg/s and bytes/s so every sum is exact and the
  tables are identical for the same seed whatever the partitioning.
* bundles and brokers -- sums per (tick, bundle) and (tick, broker); broker resource usage from
  :mod:`lbreplay.lake.host_usage`; the report write rule (``needBrokerDataUpdate``) is a sequential fold per
  broker; the leader's view at each tick is each broker's last written report (``broker_load``, with its
  ``lastStats`` in ``bundle_load``). ``topic_load`` holds the current per-topic rates at every tick.

The generated history keeps the initial bundle layout (it never splits); splitting is the replay's decision.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import yaml

from lbreplay.errors import UsageError
from lbreplay.kernel import naming
from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.naming import format_range
from lbreplay.kernel.version_profile import profile_for
from lbreplay.lake.host_usage import BrokerCapacity, LoadModel, report_usage_column, report_write_ticks
from lbreplay.paths import CONF_DIR

if TYPE_CHECKING:
    from lbreplay.progress import StepProgress

SCENARIO_DIR: Path = CONF_DIR / "scenarios"
MODULAR_LOAD_MANAGER = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"

#: Sizes every scenario inherits; a scenario's ``sizes:`` block overrides them (and may override any key).
SIZES: dict[str, dict[str, Any]] = {
    "S": {"brokers": 8, "namespaces": 4, "bundles_per_namespace": 32, "topics": 2000, "ticks": 180},
    "M": {"brokers": 50, "namespaces": 20, "bundles_per_namespace": 100, "topics": 20000, "ticks": 1440},
    # 100 bundles per namespace keeps every namespace under loadBalancerNamespaceMaximumBundles (128), so hot
    # bundles can still split
    "L": {"brokers": 200, "namespaces": 200, "bundles_per_namespace": 100, "topics": 100000, "ticks": 1440},
}

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka")
NAMESPACE_NAMES = ("orders", "payments", "telemetry", "clickstream", "inventory", "audit", "notifications",
                   "search", "billing", "shipping")
NAMESPACES_PER_TENANT = 4
PARTITIONS_PER_TOPIC = 8

_TOP_KEYS = {"description", "size", "sizes", "brokers", "namespaces", "bundles_per_namespace", "topics", "ticks",
             "tick_seconds", "start", "broker", "traffic", "events", "rebalance", "load_model", "pulsar"}


# ---------------------------------------------------------------------------------------------------------
# Scenario
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerSpec:
    """Scenario key ``broker``: the standard broker, capacity factors cycled over broker index, identity."""

    capacity: BrokerCapacity = BrokerCapacity()
    capacity_factors: tuple[float, ...] = (1.0,)
    version: str = "4.0.4"
    port: int = 8080

    def factor(self, index: int) -> float:
        return self.capacity_factors[index % len(self.capacity_factors)]


@dataclass(frozen=True)
class HotBundle:
    """``traffic.hot_bundle``: one bundle's traffic ramps to ``threshold_factor`` x the split msg-rate limit."""

    namespace: int = 0
    bundle: int = 0
    threshold_factor: float = 2.0  # x loadBalancerNamespaceBundleMaxMsgRate (msg/s in+out)
    ramp: tuple[float, float] = (0.1, 0.5)  # fractions of the run: start and end of the ramp


@dataclass(frozen=True)
class TrafficSpec:
    target_utilization: float = 0.5  # cluster mean of cpu and bandwidth usage at t=0 (the binding one)
    weight_sigma: float = 1.0  # lognormal sigma of per-topic rate weights
    msg_size_bytes: tuple[float, float] = (256.0, 4096.0)  # log-uniform
    subscriptions: tuple[int, int] = (1, 3)  # fan-out: msgRateOut = msgRateIn x subscriptions
    producers: tuple[int, int] = (1, 4)
    consumers_per_subscription: tuple[int, int] = (1, 3)
    noise: float = 0.05  # +- per (tick, topic)
    diurnal_amplitude: float = 0.0
    diurnal_period_ticks: int | None = None  # default: one day of ticks
    diurnal_phase: float = -math.pi / 2  # start at the trough
    jitter_probability: float = 0.0  # per (bundle, window)
    jitter_multiplier: tuple[float, float] = (2.0, 4.0)
    jitter_length_ticks: int = 2
    hot_bundle: HotBundle | None = None


@dataclass(frozen=True)
class Event:
    """``events[]``: ``leave``/``join`` N brokers, or a ``rolling_restart`` of every alive broker."""

    tick: int
    kind: str  # leave | join | rolling_restart
    count: int = 0
    down_ticks: int = 3
    interval_ticks: int = 10


@dataclass(frozen=True)
class RebalanceSpec:
    """``rebalance``: how the observed cluster moves bundles (the history's own load balancer)."""

    every_ticks: int = 1
    max_moves: int = 2
    tolerance: float = 0.15  # stop when (max - min) <= tolerance x mean load
    by: str = "rate"  # rate (capacity-blind, like LeastLongTermMessageRate) | capacity (load / capacity)
    orphans: str = "least-loaded"  # least-loaded | stale (all to the broker least loaded before the event)
    enabled: bool = True


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    size: str
    brokers: int
    namespaces: int
    bundles_per_namespace: int
    topics: int
    ticks: int
    tick_seconds: int
    start_epoch: int
    broker: BrokerSpec
    traffic: TrafficSpec
    events: tuple[Event, ...]
    rebalance: RebalanceSpec
    load_model: LoadModel
    pulsar: PulsarConfig = field(repr=False)

    @property
    def num_bundles(self) -> int:
        return self.namespaces * self.bundles_per_namespace


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _num(value: Any, path: str, *, integer: bool = False, minimum: float | None = None) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{path}: expected a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise UsageError(f"{path}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{path}: must be >= {minimum}, got {value!r}")
    return int(value) if integer else float(value)


def _pair(value: Any, path: str, *, integer: bool = False) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise UsageError(f"{path}: expected a [low, high] pair, got {value!r}")
    lo, hi = _num(value[0], f"{path}[0]", integer=integer), _num(value[1], f"{path}[1]", integer=integer)
    if hi < lo:
        raise UsageError(f"{path}: high < low in {value!r}")
    return lo, hi


def _map(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{path}: expected a mapping, got {type(value).__name__}")
    for key in value:
        if key not in allowed:
            raise UsageError(f"{path}.{key}: unknown key")
    return dict(value)


def _parse_broker(raw: Any) -> BrokerSpec:
    d = _map(raw, "broker", {"cores", "nic_gbps", "heap_mib", "direct_mib", "capacity_factors", "version", "port"})
    base = BrokerCapacity()
    cap = BrokerCapacity(
        cores=_num(d.get("cores", base.cores), "broker.cores", minimum=0.001),
        nic_gbps=_num(d.get("nic_gbps", base.nic_gbps), "broker.nic_gbps", minimum=0.0),
        heap_mib=_num(d.get("heap_mib", base.heap_mib), "broker.heap_mib", minimum=1),
        direct_mib=_num(d.get("direct_mib", base.direct_mib), "broker.direct_mib", minimum=1),
    )
    factors = d.get("capacity_factors", [1.0])
    if not isinstance(factors, list) or not factors:
        raise UsageError("broker.capacity_factors: expected a non-empty list")
    facs = tuple(_num(f, f"broker.capacity_factors[{i}]", minimum=0.001) for i, f in enumerate(factors))
    return BrokerSpec(cap, facs, str(d.get("version", "4.0.4")), _num(d.get("port", 8080), "broker.port", integer=True))


def _parse_traffic(raw: Any) -> TrafficSpec:
    d = _map(raw, "traffic", {"target_utilization", "weight_sigma", "msg_size_bytes", "subscriptions", "producers",
                              "consumers_per_subscription", "noise", "diurnal", "jitter", "hot_bundle"})
    t = TrafficSpec()
    diurnal = _map(d.get("diurnal"), "traffic.diurnal", {"amplitude", "period_ticks", "phase"})
    jitter = _map(d.get("jitter"), "traffic.jitter", {"probability", "multiplier", "length_ticks"})
    hot = None
    if d.get("hot_bundle") is not None:
        h = _map(d["hot_bundle"], "traffic.hot_bundle", {"namespace", "bundle", "threshold_factor", "ramp"})
        hot = HotBundle(
            namespace=_num(h.get("namespace", 0), "traffic.hot_bundle.namespace", integer=True, minimum=0),
            bundle=_num(h.get("bundle", 0), "traffic.hot_bundle.bundle", integer=True, minimum=0),
            threshold_factor=_num(h.get("threshold_factor", 2.0), "traffic.hot_bundle.threshold_factor", minimum=0),
            ramp=_pair(h.get("ramp", [0.1, 0.5]), "traffic.hot_bundle.ramp"),
        )
    amplitude = _num(diurnal.get("amplitude", 0.0), "traffic.diurnal.amplitude", minimum=0)
    if amplitude >= 1:
        raise UsageError("traffic.diurnal.amplitude: must be < 1")
    noise = _num(d.get("noise", t.noise), "traffic.noise", minimum=0)
    if noise >= 1:
        raise UsageError("traffic.noise: must be < 1")
    period = diurnal.get("period_ticks")
    return TrafficSpec(
        target_utilization=_num(d.get("target_utilization", t.target_utilization), "traffic.target_utilization",
                                minimum=0.001),
        weight_sigma=_num(d.get("weight_sigma", t.weight_sigma), "traffic.weight_sigma", minimum=0),
        msg_size_bytes=_pair(d.get("msg_size_bytes", list(t.msg_size_bytes)), "traffic.msg_size_bytes"),
        subscriptions=_pair(d.get("subscriptions", list(t.subscriptions)), "traffic.subscriptions", integer=True),
        producers=_pair(d.get("producers", list(t.producers)), "traffic.producers", integer=True),
        consumers_per_subscription=_pair(d.get("consumers_per_subscription", list(t.consumers_per_subscription)),
                                         "traffic.consumers_per_subscription", integer=True),
        noise=noise,
        diurnal_amplitude=amplitude,
        diurnal_period_ticks=None if period is None else _num(period, "traffic.diurnal.period_ticks", integer=True,
                                                               minimum=1),
        diurnal_phase=_num(diurnal.get("phase", t.diurnal_phase), "traffic.diurnal.phase"),
        jitter_probability=_num(jitter.get("probability", 0.0), "traffic.jitter.probability", minimum=0),
        jitter_multiplier=_pair(jitter.get("multiplier", list(t.jitter_multiplier)), "traffic.jitter.multiplier"),
        jitter_length_ticks=_num(jitter.get("length_ticks", t.jitter_length_ticks), "traffic.jitter.length_ticks",
                                 integer=True, minimum=1),
        hot_bundle=hot,
    )


def _event_tick(d: Mapping[str, Any], path: str, ticks: int) -> int:
    if "at_tick" in d:
        tick = _num(d["at_tick"], f"{path}.at_tick", integer=True, minimum=0)
    else:
        at = _num(d.get("at", 0.5), f"{path}.at", minimum=0)
        if at > 1:
            raise UsageError(f"{path}.at: a fraction of the run in [0, 1], got {at}")
        tick = int(round(at * ticks))
    if tick >= ticks:
        raise UsageError(f"{path}: tick {tick} is past the end of the run ({ticks} ticks)")
    return tick


def _parse_events(raw: Any, ticks: int) -> tuple[Event, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UsageError("events: expected a list")
    out = []
    for i, item in enumerate(raw):
        path = f"events[{i}]"
        d = _map(item, path, {"at", "at_tick", "leave", "join", "rolling_restart"})
        kinds = [k for k in ("leave", "join", "rolling_restart") if k in d]
        if len(kinds) != 1:
            raise UsageError(f"{path}: exactly one of leave, join, rolling_restart")
        kind = kinds[0]
        tick = _event_tick(d, path, ticks)
        if kind == "rolling_restart":
            r = _map(d[kind] or {}, f"{path}.rolling_restart", {"down_ticks", "interval_ticks"})
            out.append(Event(tick, kind, 0,
                             _num(r.get("down_ticks", 3), f"{path}.rolling_restart.down_ticks", integer=True, minimum=1),
                             _num(r.get("interval_ticks", 10), f"{path}.rolling_restart.interval_ticks", integer=True,
                                  minimum=1)))
        else:
            out.append(Event(tick, kind, _num(d[kind], f"{path}.{kind}", integer=True, minimum=1)))
    return tuple(sorted(out, key=lambda e: e.tick))


def _parse_rebalance(raw: Any) -> RebalanceSpec:
    d = _map(raw, "rebalance", {"every_ticks", "max_moves", "tolerance", "by", "orphans", "enabled"})
    r = RebalanceSpec()
    by = str(d.get("by", r.by))
    orphans = str(d.get("orphans", r.orphans))
    if by not in ("rate", "capacity"):
        raise UsageError(f"rebalance.by: rate or capacity, got {by!r}")
    if orphans not in ("least-loaded", "stale"):
        raise UsageError(f"rebalance.orphans: least-loaded or stale, got {orphans!r}")
    enabled = d.get("enabled", True)
    if not isinstance(enabled, bool):
        raise UsageError("rebalance.enabled: expected a boolean")
    return RebalanceSpec(
        every_ticks=_num(d.get("every_ticks", r.every_ticks), "rebalance.every_ticks", integer=True, minimum=1),
        max_moves=_num(d.get("max_moves", r.max_moves), "rebalance.max_moves", integer=True, minimum=0),
        tolerance=_num(d.get("tolerance", r.tolerance), "rebalance.tolerance", minimum=0),
        by=by, orphans=orphans, enabled=enabled,
    )


def _parse_start(value: Any) -> int:
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"start: not an ISO-8601 time: {value!r}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp())


def load_scenario_doc(scenario: str | Path | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The raw scenario document: a mapping, a YAML file, or a name under ``conf/scenarios/``."""
    if isinstance(scenario, Mapping):
        doc = dict(scenario)
        return str(doc.pop("name", "custom")), doc
    text = str(scenario)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or path.is_file()):
        path = SCENARIO_DIR / f"{text}.yaml"
        if not path.is_file():
            raise UsageError(f"unknown scenario {text!r}; known: {', '.join(list_scenarios())}")
    elif not path.is_file():
        raise UsageError(f"scenario file not found: {text}")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return path.stem, doc


def resolve_scenario(scenario: str | Path | Mapping[str, Any], size: str | None = None) -> Scenario:
    """Parse and validate a scenario for ``size`` (default: the scenario's ``size``, else ``S``)."""
    name, doc = load_scenario_doc(scenario)
    for key in doc:
        if key not in _TOP_KEYS:
            raise UsageError(f"scenario {name}: {key}: unknown key")
    sizes_raw = doc.get("sizes") or {}
    if not isinstance(sizes_raw, Mapping):
        raise UsageError(f"scenario {name}: sizes: expected a mapping")
    chosen = str(size or doc.get("size") or "S").upper()
    known_sizes = sorted(set(SIZES) | {str(k).upper() for k in sizes_raw})
    if chosen not in known_sizes:
        raise UsageError(f"size {chosen!r} unknown; known: {', '.join(known_sizes)}")
    merged = _deep_merge(SIZES.get(chosen, {}), {k: v for k, v in doc.items() if k not in ("sizes", "size")})
    over = {str(k).upper(): v for k, v in sizes_raw.items()}.get(chosen) or {}
    if not isinstance(over, Mapping):
        raise UsageError(f"scenario {name}: sizes.{chosen}: expected a mapping")
    for key in over:
        if key not in _TOP_KEYS - {"sizes", "size"}:
            raise UsageError(f"scenario {name}: sizes.{chosen}.{key}: unknown key")
    merged = _deep_merge(merged, over)
    ticks = _num(merged.get("ticks"), "ticks", integer=True, minimum=2)
    pulsar = merged.get("pulsar") or {}
    if not isinstance(pulsar, Mapping):
        raise UsageError("pulsar: expected a mapping of broker.conf keys")
    sc = Scenario(
        name=name,
        description=str(merged.get("description", "")),
        size=chosen,
        brokers=_num(merged.get("brokers"), "brokers", integer=True, minimum=1),
        namespaces=_num(merged.get("namespaces"), "namespaces", integer=True, minimum=1),
        bundles_per_namespace=_num(merged.get("bundles_per_namespace"), "bundles_per_namespace", integer=True,
                                   minimum=1),
        topics=_num(merged.get("topics"), "topics", integer=True, minimum=1),
        ticks=ticks,
        tick_seconds=_num(merged.get("tick_seconds", 60), "tick_seconds", integer=True, minimum=1),
        start_epoch=_parse_start(merged.get("start", "2024-01-01T00:00:00Z")),
        broker=_parse_broker(merged.get("broker")),
        traffic=_parse_traffic(merged.get("traffic")),
        events=_parse_events(merged.get("events"), ticks),
        rebalance=_parse_rebalance(merged.get("rebalance")),
        load_model=LoadModel.from_mapping(merged.get("load_model")),
        pulsar=PulsarConfig.resolve(pulsar, path="pulsar"),
    )
    if sc.topics < sc.namespaces:
        raise UsageError("topics: need at least one topic per namespace")
    if sc.traffic.hot_bundle is not None:
        hb = sc.traffic.hot_bundle
        if hb.namespace >= sc.namespaces or hb.bundle >= sc.bundles_per_namespace:
            raise UsageError("traffic.hot_bundle: namespace/bundle index out of range")
    return sc


# ---------------------------------------------------------------------------------------------------------
# Bundles and names
# ---------------------------------------------------------------------------------------------------------
def initial_boundaries(num_bundles: int) -> list[int]:
    """``PoliciesUtil.getBundles(numBundles)``: ``seg = 2^32 // N``; ``[0, seg, ..., (N-1)*seg, 0xffffffff]``."""
    if num_bundles <= 0:
        raise UsageError("number of bundles must be > 0")
    return [int(b) for b in naming.initial_boundaries(num_bundles)]


def namespace_names(count: int) -> list[str]:
    """``tenant/ns`` names: four namespaces per tenant, in index order."""
    out = []
    for k in range(count):
        t = k // NAMESPACES_PER_TENANT
        tenant = TENANTS[t % len(TENANTS)] + ("" if t < len(TENANTS) else str(t // len(TENANTS)))
        out.append(f"{tenant}/{NAMESPACE_NAMES[k % len(NAMESPACE_NAMES)]}")
    return out


def broker_names(count: int, port: int = 8080) -> list[str]:
    """``broker-NN:port``, zero-padded so that name order is index order."""
    width = max(2, len(str(max(count - 1, 0))))
    return [f"broker-{i:0{width}d}:{port}" for i in range(count)]


# ---------------------------------------------------------------------------------------------------------
# Ownership model (driver side, bundle x event metadata only)
# ---------------------------------------------------------------------------------------------------------
@dataclass
class OwnershipPlan:
    """Ownership intervals (inclusive ticks) and broker lifetimes produced by :func:`plan_ownership`."""

    bundle: np.ndarray  # int, per interval
    broker: np.ndarray
    from_tick: np.ndarray
    to_tick: np.ndarray
    alive: list[tuple[int, int, int]]  # (broker, from_tick, to_tick)
    changes: list[tuple[int, int]]  # (broker, tick): the broker's bundle set changed at tick
    num_brokers: int
    moves: int = 0

    def owner_at(self, tick: int) -> np.ndarray:
        """Owner broker per bundle at ``tick`` (-1 if none)."""
        nb = int(self.bundle.max()) + 1 if len(self.bundle) else 0
        out = np.full(nb, -1, dtype=np.int64)
        m = (self.from_tick <= tick) & (self.to_tick >= tick)
        out[self.bundle[m]] = self.broker[m]
        return out

    def alive_at(self, tick: int) -> list[int]:
        return sorted(b for b, lo, hi in self.alive if lo <= tick <= hi)


def plan_ownership(weights: np.ndarray, capacity: np.ndarray, initial: int, events: tuple[Event, ...], ticks: int,
                   rebalance: RebalanceSpec = RebalanceSpec()) -> OwnershipPlan:
    """Who owns which bundle when, for the observed history.

    ``weights``: per-bundle load (msg/s in+out); ``capacity``: capacity factor per broker index (all brokers
    that ever exist: the initial ones, then joiners in order). Brokers and bundles are visited in index order;
    ties go to the lowest index. A leave removes the highest-numbered alive brokers (a StatefulSet scale-down);
    a rolling restart takes every alive broker down in turn, highest first, for ``down_ticks``.
    """
    weights = np.asarray(weights, dtype=np.float64)
    nb = len(weights)
    n_total = initial + sum(e.count for e in events if e.kind == "join")
    if len(capacity) < n_total:
        raise ValueError("capacity must cover every broker that ever exists")
    cap = np.asarray(capacity[:n_total], dtype=np.float64)
    norm = cap if rebalance.by == "capacity" else np.ones(n_total)
    owner = np.full(nb, -1, dtype=np.int64)
    alive = np.zeros(n_total, dtype=bool)
    alive_since = np.full(n_total, -1, dtype=np.int64)
    since = np.zeros(nb, dtype=np.int64)
    iv_bundle: list[int] = []
    iv_broker: list[int] = []
    iv_from: list[int] = []
    iv_to: list[int] = []
    alive_iv: list[tuple[int, int, int]] = []
    changes: set[tuple[int, int]] = set()
    next_id = initial
    moves = 0
    schedule: dict[int, list[tuple[str, int]]] = {}
    for e in events:
        schedule.setdefault(e.tick, []).append((e.kind, e.count))

    def loads() -> np.ndarray:
        return np.bincount(owner[owner >= 0], weights=weights[owner >= 0], minlength=n_total) / norm

    def place(bundles: np.ndarray, stale: bool) -> None:
        order = bundles[np.lexsort((bundles, -weights[bundles]))]
        cur = loads()
        cand = np.flatnonzero(alive)
        if len(cand) == 0:
            raise UsageError("the scenario leaves no broker alive")
        if stale:
            owner[order] = cand[np.argmin(cur[cand])]
            return
        for b in order:
            target = cand[np.argmin(cur[cand])]
            owner[b] = target
            cur[target] += weights[b] / norm[target]

    def kill(brokers: list[int], t: int) -> None:
        for br in brokers:
            alive[br] = False
            if alive_since[br] <= t - 1:
                alive_iv.append((br, int(alive_since[br]), t - 1))
        orphans = np.flatnonzero(np.isin(owner, brokers))
        owner[orphans] = -1
        place(orphans, rebalance.orphans == "stale")

    def start(brokers: list[int], t: int) -> None:
        for br in brokers:
            alive[br] = True
            alive_since[br] = t

    prev = owner.copy()
    for t in range(ticks):
        if t == 0:
            start(list(range(initial)), 0)
            place(np.arange(nb), False)
        for kind, count in schedule.get(t, []):
            if kind == "leave":
                up = np.flatnonzero(alive)
                if count >= len(up):
                    raise UsageError(f"event at tick {t}: cannot remove {count} of {len(up)} brokers")
                kill([int(b) for b in up[::-1][:count]], t)
            elif kind == "join":
                start(list(range(next_id, next_id + count)), t)
                next_id += count
            elif kind == "rolling_restart":
                ev = next(e for e in events if e.tick == t and e.kind == kind)
                for i, br in enumerate(np.flatnonzero(alive)[::-1]):
                    down = t + i * ev.interval_ticks
                    schedule.setdefault(down, []).append(("down", int(br)))
                    schedule.setdefault(down + ev.down_ticks, []).append(("up", int(br)))
            elif kind == "down":
                if alive[count]:
                    if alive.sum() <= 1:
                        raise UsageError(f"rolling restart at tick {t} would leave no broker alive")
                    kill([count], t)
            elif kind == "up":
                if not alive[count]:
                    start([count], t)
        if rebalance.enabled and t > 0 and t % rebalance.every_ticks == 0:
            cur = loads()
            cand = np.flatnonzero(alive & (alive_since < t))  # a broker (re)started now has not reported yet
            for _ in range(rebalance.max_moves):
                if len(cand) < 2:
                    break
                hi = cand[np.argmax(cur[cand])]
                lo = cand[np.argmin(cur[cand])]
                gap = cur[hi] - cur[lo]
                if gap <= rebalance.tolerance * float(cur[cand].mean()) or gap <= 0:
                    break
                mine = np.flatnonzero(owner == hi)
                limit = gap * norm[lo]  # moving w helps only if cur[lo] + w/norm[lo] < cur[hi]
                ok = mine[weights[mine] < limit]
                if len(ok) == 0:
                    break
                ideal = gap / (1.0 / norm[hi] + 1.0 / norm[lo])
                pick = ok[np.lexsort((ok, np.abs(weights[ok] - ideal)))][0]
                owner[pick] = lo
                cur[hi] -= weights[pick] / norm[hi]
                cur[lo] += weights[pick] / norm[lo]
                moves += 1
        changed = np.flatnonzero(owner != prev)
        for b in changed:
            if prev[b] >= 0:
                iv_bundle.append(int(b))
                iv_broker.append(int(prev[b]))
                iv_from.append(int(since[b]))
                iv_to.append(t - 1)
                if alive[prev[b]]:
                    changes.add((int(prev[b]), t))
            since[b] = t
            changes.add((int(owner[b]), t))
        prev = owner.copy()
    for b in range(nb):
        iv_bundle.append(b)
        iv_broker.append(int(owner[b]))
        iv_from.append(int(since[b]))
        iv_to.append(ticks - 1)
    for br in np.flatnonzero(alive):
        alive_iv.append((int(br), int(alive_since[br]), ticks - 1))
    return OwnershipPlan(
        np.asarray(iv_bundle, dtype=np.int64), np.asarray(iv_broker, dtype=np.int64),
        np.asarray(iv_from, dtype=np.int64), np.asarray(iv_to, dtype=np.int64),
        sorted(alive_iv), sorted(changes), n_total, moves,
    )


# ---------------------------------------------------------------------------------------------------------
# Spark building blocks
# ---------------------------------------------------------------------------------------------------------
def uniform(seed: int, salt: str, *cols: Any) -> Any:
    """A deterministic uniform in (0, 1) from ``xxhash64(seed, salt, cols...)`` (53 high bits)."""
    from pyspark.sql import functions as F

    h = F.xxhash64(F.lit(int(seed)).cast("long"), F.lit(salt), *cols)
    return (F.shiftrightunsigned(h, 11).cast("double") + F.lit(0.5)) / F.lit(float(1 << 53))


def topics_frame(spark: Any, sc: Scenario, seed: int) -> Any:
    """One row per topic: name, namespace, bundle (CRC32 rule) and its constant traffic attributes."""
    from pyspark.sql import functions as F

    tr = sc.traffic
    ns_names = namespace_names(sc.namespaces)
    short = [n.split("/", 1)[1] for n in ns_names]
    n_b = sc.bundles_per_namespace
    seg = (1 << 32) // n_b
    idx = F.col("topic_idx")
    local = F.expr(f"topic_idx div {sc.namespaces}")
    block = F.expr(f"(topic_idx div {sc.namespaces}) div {PARTITIONS_PER_TOPIC}")
    ns_col = F.element_at(F.array(*[F.lit(n) for n in ns_names]), F.col("ns_idx") + 1)
    short_col = F.element_at(F.array(*[F.lit(n) for n in short]), F.col("ns_idx") + 1)
    name = F.when(
        block % 2 == 0,
        F.format_string("persistent://%s/%s-events-%03d-partition-%d", ns_col, short_col, block,
                        local % PARTITIONS_PER_TOPIC),
    ).otherwise(F.format_string("persistent://%s/%s-%05d", ns_col, short_col, local))
    u1, u2 = uniform(seed, "weight-1", idx), uniform(seed, "weight-2", idx)
    z = F.sqrt(F.log(u1) * -2.0) * F.cos(u2 * (2 * math.pi))
    s_lo, s_hi = tr.msg_size_bytes
    sub_lo, sub_hi = tr.subscriptions
    p_lo, p_hi = tr.producers
    c_lo, c_hi = tr.consumers_per_subscription

    def int_between(lo: int, hi: int, salt: str) -> Any:
        return (F.floor(uniform(seed, salt, idx) * (hi - lo + 1)) + lo).cast("int")

    df = (
        spark.range(0, sc.topics, 1, numPartitions=max(1, min(8, sc.topics // 5000)))
        .withColumnRenamed("id", "topic_idx")
        .withColumn("ns_idx", (idx % sc.namespaces).cast("int"))
        .withColumn("namespace", ns_col)
        .withColumn("topic", name)
        .withColumn("topic_hash", F.crc32(F.col("topic")))
        .withColumn("bundle_local", F.least(F.expr(f"topic_hash div {seg}"), F.lit(n_b - 1)).cast("int"))
        .withColumn("bundle_idx", (F.col("ns_idx") * n_b + F.col("bundle_local")).cast("int"))
        .withColumn("weight", F.exp(z * tr.weight_sigma - tr.weight_sigma ** 2 / 2.0))
        .withColumn("msg_size", F.round(F.pow(F.lit(s_hi / s_lo), uniform(seed, "size", idx)) * s_lo).cast("long"))
        .withColumn("fanout", int_between(sub_lo, sub_hi, "subscriptions"))
        .withColumn("producers", int_between(p_lo, p_hi, "producers"))
        .withColumn("consumers", (F.col("fanout") * int_between(c_lo, c_hi, "consumers")).cast("int"))
    )
    return df.drop("bundle_local")


@dataclass
class TrafficCalibration:
    """Driver-side numbers derived from the topics: the traffic scale and per-bundle loads."""

    scale: float  # msg/s in per unit of topic weight
    bundle_rate: np.ndarray  # msg/s in+out per bundle at scale (no modulation)
    bundle_topics: np.ndarray
    hot_bundle: int  # -1 when none
    hot_multiplier: float


def calibrate(topics: Any, sc: Scenario) -> TrafficCalibration:
    """Scale traffic so the initial brokers' mean cpu and bandwidth usage are at most ``target_utilization``."""
    t = topics.sort_values("topic_idx")
    w = t["weight"].to_numpy(dtype=np.float64)
    size = t["msg_size"].to_numpy(dtype=np.float64)
    fan = t["fanout"].to_numpy(dtype=np.float64)
    bidx = t["bundle_idx"].to_numpy(dtype=np.int64)
    model = sc.load_model
    caps = [sc.broker.capacity.scaled(sc.broker.factor(i)) for i in range(sc.brokers)]
    cpu_lim = float(sum(c.cpu_limit for c in caps))
    nic_lim = float(sum(c.nic_limit for c in caps))
    target = sc.traffic.target_utilization
    rate_tot = float((w * (1 + fan)).sum())
    thr_in = float((w * size).sum())
    thr_out = float((w * size * fan).sum())
    scales = [(target * cpu_lim - model.cpu_base_pct * sc.brokers) / float(model.cpu_traffic_pct(rate_tot, thr_in + thr_out))]
    if nic_lim > 0:
        scales.append(target * nic_lim / float(model.bandwidth_out_usage(thr_in, thr_out)))
        scales.append(target * nic_lim / float(model.bandwidth_in_usage(thr_in)))
    scale = min(scales)
    if scale <= 0:
        raise UsageError("traffic.target_utilization is below the idle cpu (load_model.cpu_base_pct)")
    nb = sc.num_bundles
    bundle_rate = np.bincount(bidx, weights=scale * w * (1 + fan), minlength=nb)
    bundle_topics = np.bincount(bidx, minlength=nb)
    hot, mult = -1, 1.0
    hb = sc.traffic.hot_bundle
    if hb is not None:
        first = hb.namespace * sc.bundles_per_namespace
        candidates = [first + (hb.bundle + k) % sc.bundles_per_namespace for k in range(sc.bundles_per_namespace)]
        hot = next((b for b in candidates if bundle_topics[b] >= 2), -1)  # BundleSplitterTask skips < 2 topics
        if hot < 0:
            raise UsageError("traffic.hot_bundle: no bundle with at least 2 topics in that namespace")
        goal = hb.threshold_factor * float(sc.pulsar["loadBalancerNamespaceBundleMaxMsgRate"])
        mult = max(1.0, goal / float(bundle_rate[hot])) if bundle_rate[hot] > 0 else 1.0
    return TrafficCalibration(scale, bundle_rate, bundle_topics, hot, mult)


def _ticks_frame(spark: Any, sc: Scenario, cal: TrafficCalibration, partitions: int) -> Any:
    from pyspark.sql import functions as F

    tr = sc.traffic
    period = tr.diurnal_period_ticks or max(1, int(round(86400 / sc.tick_seconds)))
    tick = F.col("tick")
    diurnal = F.sin(tick.cast("double") * (2 * math.pi / period) + F.lit(tr.diurnal_phase)) * tr.diurnal_amplitude + 1.0
    hot = F.lit(1.0)
    if tr.hot_bundle is not None and cal.hot_multiplier > 1.0:
        r0, r1 = tr.hot_bundle.ramp
        frac = tick.cast("double") / float(sc.ticks)
        ramp = F.least(F.greatest((frac - r0) / max(r1 - r0, 1e-9), F.lit(0.0)), F.lit(1.0))
        hot = ramp * (cal.hot_multiplier - 1.0) + 1.0
    return (
        spark.range(0, sc.ticks, 1, numPartitions=partitions)
        .select(F.col("id").cast("int").alias("tick"))
        .withColumn("ts", F.timestamp_seconds(F.lit(sc.start_epoch) + tick.cast("long") * sc.tick_seconds))
        .withColumn("diurnal", diurnal)
        .withColumn("hot_mult", hot)
    )


def topic_ticks_frame(spark: Any, sc: Scenario, seed: int, topics: Any, cal: TrafficCalibration) -> Any:
    """ticks x topics with integer ``rate_in_milli`` (msg/s x 1000), ``thr_in`` bytes/s and the out sides."""
    from pyspark.sql import functions as F

    tr = sc.traffic
    rows = sc.ticks * sc.topics
    partitions = int(max(2, min(64, rows // 1_000_000)))
    ticks = _ticks_frame(spark, sc, cal, min(partitions, sc.ticks))
    df = ticks.crossJoin(F.broadcast(topics.select("topic_idx", "topic", "namespace", "bundle_idx", "weight",
                                                    "msg_size", "fanout", "producers", "consumers")))
    noise = (uniform(seed, "noise", F.col("tick"), F.col("topic_idx")) * 2.0 - 1.0) * tr.noise + 1.0
    factor = F.col("diurnal") * noise
    if tr.jitter_probability > 0:
        window = F.expr(f"tick div {tr.jitter_length_ticks}")
        lo, hi = tr.jitter_multiplier
        spike = F.when(uniform(seed, "jitter", F.col("bundle_idx"), window) < tr.jitter_probability,
                       uniform(seed, "jitter-size", F.col("bundle_idx"), window) * (hi - lo) + lo).otherwise(1.0)
        factor = factor * spike
    if cal.hot_bundle >= 0:
        factor = factor * F.when(F.col("bundle_idx") == cal.hot_bundle, F.col("hot_mult")).otherwise(1.0)
    rate_in = F.round(F.col("weight") * factor * (cal.scale * 1000.0)).cast("long")
    return (
        df.withColumn("rate_in_milli", rate_in)
        .withColumn("thr_in", F.round(F.col("rate_in_milli") * F.col("msg_size") / 1000.0).cast("long"))
        .withColumn("rate_out_milli", F.col("rate_in_milli") * F.col("fanout"))
        .withColumn("thr_out", F.col("thr_in") * F.col("fanout"))
    )


def _frame(spark: Any, rows: list[tuple], schema: str) -> Any:
    return spark.createDataFrame(rows, schema)


@dataclass
class GenerateResult:
    scenario: Scenario
    cluster: str
    seed: int
    rows: dict[str, int]
    seconds: float
    plan: OwnershipPlan
    calibration: TrafficCalibration
    brokers: list[str]


def generate_steps(sc: Scenario) -> list[tuple[str, int]]:
    """The Spark steps of :func:`generate` with the rows each one covers, known up front (progress weights): the
    topics; ticks x topics written, then read again and summed per bundle; ticks x brokers (the initial ones);
    ticks x bundles; the namespaces."""
    return [("topics", sc.topics), ("topic_load", sc.ticks * sc.topics), ("bundle_stats", sc.ticks * sc.topics),
            ("broker_load", sc.ticks * sc.brokers), ("bundle_load", sc.ticks * sc.num_bundles),
            ("namespace_policy", sc.namespaces)]


def generate(spark: Any, lake: str, scenario: str | Path | Mapping[str, Any], cluster: str, seed: int = 42,
             size: str | None = None, log: Callable[[str], None] | None = None,
             progress: "StepProgress | None" = None) -> GenerateResult:
    """Generate ``scenario`` for ``cluster`` into the lake's input tables (replacing that cluster's rows).

    ``progress`` (built from :func:`generate_steps`) reports each step; without it ``log`` gets a line per table.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import BROKER_LOAD, BUNDLE_LOAD, NAMESPACE_POLICY, TOPIC_LOAD, replace_partitions
    from lbreplay.progress import StepProgress
    from lbreplay.spark import lake_path

    say = log or (lambda _msg: None)
    if not cluster or any(ch in cluster for ch in "'\\\n"):
        raise UsageError(f"invalid cluster name {cluster!r}")
    lake = lake_path(lake)
    started = time.time()
    sc = resolve_scenario(scenario, size)
    say(f"scenario {sc.name} size {sc.size}: {sc.brokers} brokers, {sc.num_bundles} bundles, {sc.topics} topics, "
        f"{sc.ticks} ticks of {sc.tick_seconds}s, seed {seed}")
    steps = progress or StepProgress("generate", generate_steps(sc), quiet=True)
    jobs = spark.sparkContext

    def wrote(note: Any, table: str, t0: float) -> None:
        note.text = f"{rows[table]} rows"
        if progress is None:
            say(f"{table}: {rows[table]} rows ({time.time() - t0:.1f}s)")

    # 1. topics (Spark), collected as small metadata for calibration and ownership
    topics = topics_frame(spark, sc, seed)
    with steps.step("topics", jobs):
        meta = topics.select("topic_idx", "bundle_idx", "weight", "msg_size", "fanout").toPandas()
    cal = calibrate(meta, sc)

    # 2. ownership (driver, bundle x event)
    n_total = sc.brokers + sum(e.count for e in sc.events if e.kind == "join")
    factors = np.array([sc.broker.factor(i) for i in range(n_total)])
    plan = plan_ownership(cal.bundle_rate, factors, sc.brokers, sc.events, sc.ticks, sc.rebalance)
    names = broker_names(n_total, sc.broker.port)
    say(f"ownership: {len(plan.bundle)} intervals, {plan.moves} rebalance moves, {n_total} brokers over the run")

    ns_names = namespace_names(sc.namespaces)
    bounds = initial_boundaries(sc.bundles_per_namespace)
    bundle_rows = []
    for k, ns in enumerate(ns_names):
        for i in range(sc.bundles_per_namespace):
            lo, hi = bounds[i], bounds[i + 1]
            bundle_rows.append((k * sc.bundles_per_namespace + i, f"{ns}/{format_range(lo, hi)}", ns, lo, hi))
    bundle_meta = _frame(spark, bundle_rows, "bundle_idx int, bundle string, namespace string, range_lower long, "
                                             "range_upper long")
    intervals = _frame(spark, list(zip(plan.bundle.tolist(), plan.broker.tolist(), plan.from_tick.tolist(),
                                       plan.to_tick.tolist())),
                       "bundle_idx int, broker_idx int, from_tick int, to_tick int")
    alive = _frame(spark, plan.alive, "broker_idx int, from_tick int, to_tick int").select(
        "broker_idx", F.explode(F.sequence("from_tick", "to_tick")).alias("tick"))
    forced = _frame(spark, plan.changes, "broker_idx int, tick int").withColumn("forced", F.lit(True))
    cap = sc.broker.capacity
    broker_rows = []
    for i, nm in enumerate(names):
        c = cap.scaled(sc.broker.factor(i))
        broker_rows.append((i, nm, c.cpu_limit, c.heap_mib, c.direct_mib, c.nic_limit))
    brokers = _frame(spark, broker_rows, "broker_idx int, broker string, cpu_limit double, memory_limit double, "
                                         "direct_memory_limit double, nic_limit double")
    ts_of = lambda c: F.timestamp_seconds(F.lit(sc.start_epoch) + F.col(c).cast("long") * sc.tick_seconds)  # noqa: E731
    where = f"cluster = '{cluster}'"

    # 3. topic_load: ticks x topics
    t0 = time.time()
    tt = topic_ticks_frame(spark, sc, seed, topics, cal)
    topic_load = tt.select(
        F.lit(cluster).alias("cluster"), "ts", "topic", "namespace",
        (F.col("rate_in_milli") / 1000.0).alias("msg_rate_in"), (F.col("rate_out_milli") / 1000.0).alias("msg_rate_out"),
        F.col("thr_in").cast("double").alias("msg_throughput_in"), F.col("thr_out").cast("double").alias("msg_throughput_out"),
        F.col("producers").alias("producer_count"), F.col("consumers").alias("consumer_count"),
    )
    # row counts hold by construction: every topic and every bundle with topics at every tick, and every alive
    # (broker, tick)
    rows = {"topic_load": sc.ticks * sc.topics}
    with steps.step("topic_load", jobs) as note:
        replace_partitions(spark, lake, TOPIC_LOAD, topic_load, where)
        wrote(note, "topic_load", t0)

    # 4. fresh bundle stats per (tick, bundle) with their owner; materialized once (used twice)
    t0 = time.time()
    agg = tt.groupBy("tick", "bundle_idx").agg(
        F.sum("rate_in_milli").alias("rate_in_milli"), F.sum("rate_out_milli").alias("rate_out_milli"),
        F.sum("thr_in").alias("thr_in"), F.sum("thr_out").alias("thr_out"), F.count(F.lit(1)).alias("topics"),
        F.sum("producers").alias("producers"), F.sum("consumers").alias("consumers"),
    )
    iv = F.broadcast(intervals).alias("iv")
    owned = agg.alias("a").join(
        iv, (F.col("a.bundle_idx") == F.col("iv.bundle_idx")) & F.col("a.tick").between(F.col("iv.from_tick"),
                                                                                           F.col("iv.to_tick"))
    ).select("a.*", "iv.broker_idx").persist(StorageLevel.DISK_ONLY)
    fresh = view = None
    try:
        with steps.step("bundle_stats", jobs):
            owned.count()
        # 5. fresh broker reports per alive (tick, broker) and the load model
        model = sc.load_model
        sums = owned.groupBy("tick", "broker_idx").agg(
            F.sum("rate_in_milli").alias("rate_in_milli"), F.sum("rate_out_milli").alias("rate_out_milli"),
            F.sum("thr_in").alias("thr_in"), F.sum("thr_out").alias("thr_out"), F.sum("topics").alias("num_topics"),
            F.count(F.lit(1)).alias("num_bundles"), F.sum("producers").alias("num_producers"),
            F.sum("consumers").alias("num_consumers"),
        )
        zero = {c: 0 for c in ("rate_in_milli", "rate_out_milli", "thr_in", "thr_out", "num_topics", "num_bundles",
                               "num_producers", "num_consumers")}
        fresh = alive.join(sums, ["tick", "broker_idx"], "left").fillna(zero).join(F.broadcast(brokers), "broker_idx")
        rate_in, rate_out = F.col("rate_in_milli") / 1000.0, F.col("rate_out_milli") / 1000.0
        thr_in, thr_out = F.col("thr_in").cast("double"), F.col("thr_out").cast("double")
        cpu_noise = (uniform(seed, "cpu", F.col("tick"), F.col("broker_idx")) * 2.0 - 1.0) * model.cpu_noise + 1.0
        gc_phase = ((F.col("tick") + F.col("broker_idx") * 3) % model.gc_period_ticks) / float(model.gc_period_ticks)
        fresh = fresh.select(
            "tick", "broker_idx", "broker",
            (model.cpu_usage(rate_in + rate_out, thr_in + thr_out) * cpu_noise).alias("cpu_usage"), "cpu_limit",
            F.least(model.heap_usage(F.col("memory_limit"), gc_phase, F.col("num_topics")),
                    F.col("memory_limit") * 0.95).alias("memory_usage"), "memory_limit",
            F.least(model.direct_usage(thr_in), F.col("direct_memory_limit") * 0.95).alias("direct_memory_usage"),
            "direct_memory_limit",
            model.bandwidth_in_usage(thr_in).alias("bandwidth_in_usage"), F.col("nic_limit").alias("bandwidth_in_limit"),
            model.bandwidth_out_usage(thr_in, thr_out).alias("bandwidth_out_usage"),
            F.col("nic_limit").alias("bandwidth_out_limit"),
            rate_in.alias("msg_rate_in"), rate_out.alias("msg_rate_out"),
            thr_in.alias("msg_throughput_in"), thr_out.alias("msg_throughput_out"),
            F.col("num_topics").cast("long").alias("num_topics"), F.col("num_bundles").cast("int").alias("num_bundles"),
            F.col("num_consumers").cast("int").alias("num_consumers"),
            F.col("num_producers").cast("int").alias("num_producers"),
        ).persist(StorageLevel.MEMORY_AND_DISK)

        # 6. the report write rule and the leader's view: each broker's last written report
        max_minutes = float(sc.pulsar["loadBalancerReportUpdateMaxIntervalMinutes"])
        max_ticks = max(1, int(max_minutes * 60 // sc.tick_seconds))
        prof = profile_for(sc.pulsar["pulsarVersion"])
        weighted = prof.overload_checks_weighted
        usage = report_usage_column(
            weights=sc.pulsar.resource_weights(), weighted=weighted,
            include_memory=prof.weighted_max_includes_memory if weighted else prof.max_usage_includes_memory)
        rule_in = fresh.join(forced, ["broker_idx", "tick"], "left").select(
            F.col("broker_idx").alias("broker"), "tick", (F.col("msg_rate_in") + F.col("msg_rate_out")).alias("rate_total"),
            (F.col("msg_throughput_in") + F.col("msg_throughput_out")).alias("thr_total"), "num_bundles",
            usage.alias("usage"), F.coalesce(F.col("forced"), F.lit(False)).alias("forced"),
            # brokers running before the history starts wrote their t=0 report up to maxInterval earlier
            F.when(F.col("tick") == 0, -F.floor(uniform(seed, "report-offset", F.col("broker_idx")) * max_ticks))
            .otherwise(F.col("tick")).cast("int").alias("origin"))
        writes = report_write_ticks(
            rule_in, tick_seconds=sc.tick_seconds,
            threshold_pct=float(sc.pulsar["loadBalancerReportUpdateThresholdPercentage"]),
            max_interval_minutes=max_minutes,
        ).select(F.col("broker").alias("broker_idx"), F.greatest("tick", F.lit(0)).alias("tick"),
                 F.col("tick").alias("written"))
        last_write = F.last("written", ignorenulls=True).over(
            Window.partitionBy("broker_idx").orderBy("tick").rowsBetween(Window.unboundedPreceding, 0))
        view = (alive.join(writes, ["broker_idx", "tick"], "left")
                .select("broker_idx", "tick", last_write.alias("write_tick"))
                .withColumn("content_tick", F.greatest("write_tick", F.lit(0)))
                .persist(StorageLevel.MEMORY_AND_DISK))

        broker_load = view.alias("v").join(
            fresh.alias("f"), (F.col("f.broker_idx") == F.col("v.broker_idx")) & (F.col("f.tick") == F.col("v.content_tick"))
        ).select(
            F.lit(cluster).alias("cluster"), ts_of("v.tick").alias("ts"), "f.*",
            F.lit(sc.broker.version).alias("broker_version"), F.lit(MODULAR_LOAD_MANAGER).alias("load_manager_class_name"),
            F.lit(True).alias("persistent_topics_enabled"), F.lit(True).alias("non_persistent_topics_enabled"),
            ts_of("v.write_tick").alias("last_update"),
        )
        rows["broker_load"] = sum(hi - lo + 1 for _, lo, hi in plan.alive)
        with steps.step("broker_load", jobs) as note:
            replace_partitions(spark, lake, BROKER_LOAD, broker_load, where)
            wrote(note, "broker_load", t0)

        t0 = time.time()
        bundle_load = owned.alias("o").join(
            F.broadcast(view).alias("v"),
            (F.col("o.broker_idx") == F.col("v.broker_idx")) & (F.col("o.tick") == F.col("v.content_tick")),
        ).join(F.broadcast(bundle_meta).alias("m"), F.col("o.bundle_idx") == F.col("m.bundle_idx")).join(
            F.broadcast(brokers.select("broker_idx", "broker")).alias("b"), F.col("o.broker_idx") == F.col("b.broker_idx")
        ).select(
            F.lit(cluster).alias("cluster"), ts_of("v.tick").alias("ts"), "b.broker", "m.bundle", "m.namespace",
            "m.range_lower", "m.range_upper",
            (F.col("o.rate_in_milli") / 1000.0).alias("msg_rate_in"), (F.col("o.rate_out_milli") / 1000.0).alias("msg_rate_out"),
            F.col("o.thr_in").cast("double").alias("msg_throughput_in"),
            F.col("o.thr_out").cast("double").alias("msg_throughput_out"),
            F.col("o.topics").alias("topics"), F.col("o.consumers").alias("consumer_count"),
            F.col("o.producers").alias("producer_count"),
            F.round(model.cache_size(F.col("o.thr_in").cast("double"))).cast("long").alias("cache_size"),
        )
        rows["bundle_load"] = sc.ticks * int((cal.bundle_topics > 0).sum())  # a bundle without topics has no stats
        with steps.step("bundle_load", jobs) as note:
            replace_partitions(spark, lake, BUNDLE_LOAD, bundle_load, where)
            wrote(note, "bundle_load", t0)
    finally:
        for cached in (owned, fresh, view):
            if cached is not None:
                cached.unpersist()

    # 7. namespace policies: initial boundaries, nothing else set
    policy_rows = [(cluster, ns, [f"0x{b:08x}" for b in bounds], sc.bundles_per_namespace, None, None, None, None, False)
                   for ns in ns_names]
    policies = _frame(spark, policy_rows, "cluster string, namespace string, initial_boundaries array<string>, "
                                          "num_bundles int, anti_affinity_group string, isolation_primary array<string>, "
                                          "isolation_secondary array<string>, isolation_min_available int, "
                                          "shedding_excluded boolean")
    rows["namespace_policy"] = sc.namespaces
    with steps.step("namespace_policy", jobs) as note:
        replace_partitions(spark, lake, NAMESPACE_POLICY, policies, where)
        note.text = f"{rows['namespace_policy']} rows"
    seconds = time.time() - started
    return GenerateResult(sc, cluster, seed, rows, seconds, plan, cal, names)


def generate_command(scenario: str, cluster: str, seed: int = 42, size: str | None = None, lake: str | None = None,
                     master: str | None = None, quiet: bool = False) -> GenerateResult:
    """CLI entry point of ``lbreplay generate``: progress on standard error (step k/n, Spark tasks, rows, ETA; a
    live line on a terminal, plain lines otherwise, nothing when quiet), then the row counts and the time."""
    from lbreplay.paths import DEFAULT_LAKE
    from lbreplay.progress import StepProgress
    from lbreplay.spark import get_spark, lake_path

    sc = resolve_scenario(scenario, size)  # fail fast on usage errors, before starting Spark
    progress = StepProgress("generate", generate_steps(sc), quiet=quiet)
    t0 = time.time()
    lake = lake_path(lake or DEFAULT_LAKE)
    try:
        spark = get_spark(lake, master=master)
        progress.log(f"spark ready ({time.time() - t0:.1f}s)")
        result = generate(spark, lake, scenario, cluster, seed=seed, size=size, log=progress.log, progress=progress)
    finally:
        progress.close()
    counts = ", ".join(f"{k}={v}" for k, v in result.rows.items())
    print(f"generated cluster {cluster} (scenario {result.scenario.name}, size {result.scenario.size}, seed {seed}) "
          f"into {lake}: {counts} in {result.seconds:.1f}s")
    return result
