"""A generator scenario: the cluster, its traffic and its events as a validated, frozen model.

A scenario (``conf/scenarios/<name>.yaml``, any YAML file, or a mapping) describes brokers and their capacity,
namespaces with Pulsar's initial bundle boundaries, topics with heavy-tailed traffic, and events (brokers leaving,
joining, restarting; a hot bundle; jitter; a diurnal cycle). :func:`resolve_scenario` merges a size preset
(:data:`SIZES`) with the scenario's own keys and rejects every unknown key or bad value with a
:class:`~lbreplay.errors.UsageError` naming it. The names of tenants, namespaces and brokers live here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import yaml

from lbreplay.errors import UsageError
from lbreplay.kernel import naming
from lbreplay.kernel.config import PulsarConfig
from lbreplay.lake.host_usage import BrokerCapacity, LoadModel
from lbreplay.paths import CONF_DIR

SCENARIO_DIR: Path = CONF_DIR / "scenarios"

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

_TOP_KEYS = {"description", "size", "sizes", "brokers", "namespaces", "bundles_per_namespace", "topics", "ticks",
             "tick_seconds", "start", "broker", "traffic", "events", "rebalance", "load_model", "pulsar"}


@dataclass(frozen=True)
class BrokerSpec:
    """Scenario key ``broker``: the standard broker, capacity factors cycled over broker index, identity."""

    capacity: BrokerCapacity = BrokerCapacity()
    capacity_factors: tuple[float, ...] = (1.0,)
    # brokerVersionString: null unless the scenario sets broker.version (a generated lake names no Pulsar line)
    version: str | None = None
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
    version = d.get("version")
    return BrokerSpec(cap, facs, None if version is None else str(version),
                      _num(d.get("port", 8080), "broker.port", integer=True))


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
