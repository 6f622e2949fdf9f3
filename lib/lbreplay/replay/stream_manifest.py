"""The tick stream's contract between the driver that writes it and the tasks that read it: the columns of its
Parquet parts and the :class:`StreamManifest` (where the parts are, and the static inputs of the runs)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow.dataset as ds

from lbreplay.lake.tables import RESOURCES
from lbreplay.replay.load_model import CpuCalibration

STREAM_FORMAT = 17  # part of the cache key: bump when the stream's layout changes
BROKER_COLUMNS = ("broker_index", *(f"{r}_{k}" for r in RESOURCES for k in ("usage", "limit")), "last_update_ms")
LOAD_COLUMNS = ("msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out", "sessions")
# an extensible recording's broker part also carries each version's BrokerLoadData as published (what the leader's
# TransferShedder reads; times in epoch ms) and whether its TopBundlesLoadData entry is cleared (1: a tombstone or an
# empty list since its last list)
RECORDED_LOAD_DATA = ("weighted_max_ema", "msg_throughput_ema", "max_resource_usage", "msg_throughput_in",
                      "msg_throughput_out", "msg_rate_in", "msg_rate_out", "bundle_count", "topics", "updated_at_ms",
                      "reported_at_ms", "top_bundles_cleared")
BUNDLE_COLUMNS = (*LOAD_COLUMNS, "topics")  # the bundle part's loads (the engine's load vector order)
TOPIC_COLUMNS = LOAD_COLUMNS  # the topic part's loads (a topic counts as one topic)


@dataclass
class StreamManifest:
    """A prepared tick stream: where its parts are and the static inputs of its runs."""

    broker_ids: list[str]  # the broker universe, sorted: row i of every per-broker array
    namespaces: list[str]  # sorted: namespace index i of the ring positions
    cpu_base: list[float]  # the load model's calibration per broker
    cpu_per_msg: list[float]
    topics: bool  # the stream has topic loads (a topic part or topic_load's own files)
    stream: str  # the stream's directory (brokers/, bundles/, topics/)
    topic_files: list[str] | None = None  # topic_load's Parquet files the task reads itself
    topic_window_us: list[int | None] | None = None  # their [from, to) in epoch microseconds (null = open)
    # the broker part holds report versions (each tick: the reports written then), not the leader's snapshots
    versioned: bool = False
    bundle_data: bool = False  # a bundle_data part: the recorded BundleData versions (the metadata store's)
    lead_in_ticks: int = 0  # ticks before the window's start (numbered -n..-1): audit warm-up only
    # a recording's leader elections (epoch ms, kernel.leader_election): the task adds a tick at every timer
    # minute from the broker part's first tick to its last (timer_ticks of them, lead_in_ticks counts its own)
    leader_elections: list[int] | None = None
    leader_brokers: list[str] | None = None  # the broker each of leader_elections elected (LeaderBroker.brokerId)
    shedding_runs: list[int] | None = None  # the leader's logged shedding runs (epoch ms): its timer ticks' real times
    # per logged run, the time of the reports its strategy printed when before its lines (shedding_run.read_at)
    shedding_reads: list[int | None] | None = None
    timer_ticks: int = 0
    # a recording's broker departures ([epoch ms, broker row], time order; broker_departure): from each, the leader
    # holds none of that broker until it writes a report again (tick_stream.without_departed)
    departures: list[list[int]] | None = None
    # the lookups the recording's leader logged ([epoch ms, bundle, selected broker or None] in logged order;
    # leader_placement: its own, not its shedding runs' destination choices): an audit places each at the first tick
    # at or after it, preallocated where the leader logged selecting it. None: no placement lines
    lookups: list[list[Any]] | None = None
    # the versions are an extensible recording's (BrokerLoadData + TopBundlesLoadData): the broker part has the
    # RECORDED_LOAD_DATA columns, the bundle part each version's top bundles
    extensible: bool = False
    # the load model's bandwidth per byte of throughput per broker (Kbit/s per byte/s, as recorded), the fit's cpu
    # error (load_model.MAX_CALIBRATION_MAPE; None: no cpu reading to fit) and whether bundle_load carries traffic
    bandwidth_in_per_byte: list[float] | None = None
    bandwidth_out_per_byte: list[float] | None = None
    calibration_mape: float | None = None
    recorded_traffic: bool = False

    @property
    def ticks(self) -> int:
        """Ticks the task replays: the broker part's rows plus the timer ticks."""
        return int(ds.dataset(f"{self.stream}/brokers", format="parquet").count_rows()) + self.timer_ticks

    def calibration(self) -> CpuCalibration:
        def per_byte(values: list[float] | None) -> np.ndarray | None:
            return None if values is None else np.array(values)

        return CpuCalibration(np.array(self.cpu_base), np.array(self.cpu_per_msg),
                              per_byte(self.bandwidth_in_per_byte), per_byte(self.bandwidth_out_per_byte))

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None or k in ("topics", "stream")})

    @classmethod
    def from_json(cls, text: str) -> "StreamManifest":
        return cls(**json.loads(text))
