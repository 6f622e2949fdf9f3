"""The replay's records: a run's spec and static inputs, one observed tick, and what a tick produces.

Plain dataclasses shared by the tick loop (``engine``), the leaders and the Spark driver; nothing here
imports the rest of the replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.replay.load_model import CpuCalibration
from lbreplay.replay.stored_bundle_data import StoredBundleData

# Columns of the per-bundle load vectors: TimeAverageMessageData order, then sessions and topics.
THR_IN, THR_OUT, RATE_IN, RATE_OUT, SESSIONS, TOPICS = range(6)


@dataclass
class RunSpec:
    run_id: str
    cluster: str
    mode: str  # "closed-loop" | "observed"
    config: dict[str, Any]  # Pulsar keys as given by the user (resolved inside)
    seed: int = 0
    replay: dict[str, Any] = field(default_factory=dict)
    # A slice of the ticks (audit mode runs slices in parallel): outputs for [tick_start, tick_end), after
    # replaying ``warmup`` earlier ticks to rebuild the strategies' state (EWMA, hit counts, bundle averages).
    tick_start: int = 0
    tick_end: int | None = None
    warmup: int = 0


@dataclass
class StaticInputs:
    """What a run needs besides the tick stream; small (brokers, namespaces, calibration, policies)."""

    broker_ids: list[str]  # sorted universe of brokers seen in the history
    namespaces: list[str]  # sorted
    calibration: CpuCalibration
    policies: NamespacePolicies | None = None
    stored_bundle_data: StoredBundleData | None = None  # the recorded /loadbalance/bundle-data versions


@dataclass
class ObservedTick:
    tick: int
    ts_ms: int
    alive: np.ndarray  # (B,) bool
    usage: np.ndarray  # (B, 5) observed (for memory and calibration error)
    limit: np.ndarray  # (B, 5)
    # an extensible recording's BrokerLoadData per broker as published (stream_manifest.RECORDED_LOAD_DATA; NaN:
    # none), empty otherwise
    broker_meta: dict[str, np.ndarray] = field(default_factory=dict)
    # observed layout and ownership (bundle_load): names, owner (universe row), values (n, 6)
    bundle_names: list[str] = field(default_factory=list)
    bundle_owner: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    bundle_values: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    topic_values: np.ndarray | None = None  # (T, 6) aligned with topic_positions
    topic_positions: np.ndarray | None = None  # (T,) global ring positions of this tick's topics
    last_update: np.ndarray | None = None  # (B,) ms of each broker's report (LocalBrokerData.lastUpdate)
    # per-broker listings (a stream of report versions): every held report's lastStats entries as (broker
    # universe row, index into bundle_names, values (K, 6)); a bundle may be listed by two brokers. None: the
    # one-owner view (bundle_owner) says it all.
    listings: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # a recording whose leader's election is known (kernel.leader_election): at a tick of its timer, the whole
    # minutes since the election; 0 at a report tick. None: the election is not known.
    timer_minute: int | None = None
    leader_broker: str | None = None  # the broker the latest election before this tick elected (if known)
    timer_lag_ms: int | None = None  # a timer tick at the leader's logged run: the run's lag behind its minute
    lookups: tuple[tuple[int, str, str | None], ...] | None = None  # the leader's logged lookups since the last tick


@dataclass
class Decision:
    tick: int
    ts_ms: int
    seq: int
    action: str  # UNLOAD | TRANSFER | ASSIGN | SPLIT | KEEP (a planned bundle the placement kept on its owner)
    bundle: str
    source_broker: str | None
    target_broker: str | None
    child_bundles: list[str] | None
    strategy: str
    reason: str
    details: dict[str, float]
    drawn_among: list[str] | None = None  # the brokers the placement drew target_broker from at random; None: no draw


#: The reason of a KEEP decision: ``ModularLoadManagerImpl.doLoadShedding``'s WARN when ``selectBroker`` chose the owner.
KEPT_REASON = "The destination broker is the same as the current owner broker: kept, no unload"


def with_draw(d: Decision, drawn_among: tuple[str, ...] | list[str] | None) -> Decision:
    """``d`` with the brokers its target was drawn from at random (None: no draw)."""
    d.drawn_among = None if drawn_among is None else list(drawn_among)
    return d


@dataclass
class BrokerTick:
    tick: int
    ts_ms: int
    pct: np.ndarray  # (B, 5)
    max_usage: np.ndarray
    weighted_max_usage: np.ndarray
    score: np.ndarray
    msg_rate: np.ndarray
    msg_throughput: np.ndarray
    num_bundles: np.ndarray
    num_topics: np.ndarray
    alive: np.ndarray


@dataclass
class OwnershipInterval:
    bundle: str
    namespace: str
    range_lower: int
    range_upper: int
    broker: str
    from_tick: int
    to_tick: int | None
    from_ts_ms: int
    to_ts_ms: int | None


@dataclass
class TickResult:
    broker_tick: BrokerTick
    decisions: list[Decision]
    closed: list[OwnershipInterval]
    calibration_error: float | None  # MAPE of modelled vs observed cpu when ownership equals the observed one


@dataclass
class LoadView:
    """One tick's loads as the engine computed them: what the leader's brokers would report now.

    ``bundle_values`` (n, 6) are aligned with the ownership's layout; the broker arrays are per universe row.
    """

    tick: int
    ts_ms: int
    alive: np.ndarray  # (B,) bool
    bundle_values: np.ndarray  # (n, 6)
    usage: np.ndarray  # (B, 5)
    limit: np.ndarray  # (B, 5)
    totals: np.ndarray  # (B, 6) per-broker sums of bundle_values
    num_bundles: np.ndarray  # (B,)
    compared_usage: np.ndarray  # (B,) the max usage the report write rule compares
    observed_writes: np.ndarray | None = None  # (B,) bool: audit mode, the reports the history shows written
    apply: bool = True  # closed loop: decisions change the ownership; audit: they are only recorded
    # audit of report versions: each held report's lastStats entries (broker universe row, layout row, values)
    listings: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    timer_minute: int | None = None  # ObservedTick.timer_minute: when the leader's timed tasks run
    leader_broker: str | None = None  # audit: ObservedTick.leader_broker, the leader whose decisions are replayed
    timer_lag_ms: int | None = None  # ObservedTick.timer_lag_ms: the tick is the leader's logged run, this late
    # audit of an extensible recording: each held broker's BrokerLoadData as published (ObservedTick.broker_meta)
    recorded: dict[str, np.ndarray] | None = None
    # audit of a recording with placement lines: the lookups its leader logged since the previous tick (epoch ms,
    # bundle, the broker it logged selecting), in logged order (ObservedTick.lookups); None: no placement lines
    lookups: tuple[tuple[int, str, str | None], ...] | None = None

    @property
    def msg_rate(self) -> np.ndarray:
        return self.totals[:, RATE_IN] + self.totals[:, RATE_OUT]

    @property
    def msg_throughput(self) -> np.ndarray:
        return self.totals[:, THR_IN] + self.totals[:, THR_OUT]

    def decision(self, action: str, bundle: str, src: str | None, dst: str | None, reason: str, strategy: str,
                 details: dict[str, float] | None = None, children: list[str] | None = None) -> Decision:
        """A decision taken at this tick (``seq`` is numbered by the engine in the order of the tick's decisions)."""
        return Decision(self.tick, self.ts_ms, 0, action, bundle, src, dst, children, strategy, reason,
                        dict(details or {}))
