"""A committed recording's tick stream without Spark: ``ingest``'s rows (``read_dumps``) as the tick stream holds
them (one tick per report-version time, each holding the versions written then), the leader's held view
(``tick_stream.leader_held_view``: held reports, its recorded election's timer, the brokers that left dropped),
replayed by the engine in either mode."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
LOADS = ("msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out")


def _ms(ts: datetime) -> int:
    return (ts - EPOCH) // timedelta(milliseconds=1)


def _topics(rows: dict[str, list[dict[str, Any]]], namespaces: list[str]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """ts -> (ring positions, (T, 6) loads) of the tick's topic_load rows, in ring order (as the tick stream's)."""
    import zlib

    by: dict[int, list[tuple[int, list[float]]]] = defaultdict(list)
    for r in rows.get("topic_load", ()):
        if r["namespace"] in namespaces:
            pos = namespaces.index(r["namespace"]) * (1 << 32) + zlib.crc32(r["topic"].encode())
            by[_ms(r["ts"])].append((pos, [r[c] or 0.0 for c in LOADS] + [
                (r["consumer_count"] or 0) + (r["producer_count"] or 0), 1.0]))
    out = {}
    for ts, items in by.items():
        items.sort()
        out[ts] = (np.array([p for p, _ in items], dtype=np.int64), np.array([v for _, v in items]).reshape(-1, 6))
    return out


def version_ticks(rows: dict[str, list[dict[str, Any]]], ids: list[str], namespaces: list[str] | None = None) -> list[Any]:
    """One ObservedTick per report-version time: the brokers that wrote then, with the bundles their versions list
    (and, given ``namespaces``, the topics topic_load stamps then)."""
    topics = _topics(rows, namespaces) if namespaces else {}
    from lbreplay.replay.records import ObservedTick

    n = len(ids)
    bundles: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows["bundle_load"]:
        bundles[_ms(r["ts"])].append(r)
    reports: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows["broker_load"]:
        reports[_ms(r["ts"])].append(r)
    out = []
    for k, ts in enumerate(sorted(reports)):
        alive, usage, limit = np.zeros(n, dtype=bool), np.zeros((n, 5)), np.zeros((n, 5))
        last_update = np.full(n, -1, dtype=np.int64)
        for r in reports[ts]:
            i = ids.index(r["broker"])
            alive[i] = True
            usage[i] = [r[f"{res}_usage"] or 0.0 for res in RESOURCES]
            limit[i] = [r[f"{res}_limit"] or 0.0 for res in RESOURCES]
            last_update[i] = _ms(r["last_update"] or r["ts"])
        listed = sorted(bundles.get(ts, []), key=lambda r: r["bundle"])
        values = np.array([[r[c] or 0.0 for c in LOADS] + [(r["consumer_count"] or 0) + (r["producer_count"] or 0),
                                                          r["topics"] or 0] for r in listed]).reshape(-1, 6)
        out.append(ObservedTick(k, ts, alive, usage, limit, bundle_names=[r["bundle"] for r in listed],
                                bundle_owner=np.array([ids.index(r["broker"]) for r in listed], dtype=np.int32),
                                bundle_values=values, last_update=last_update,
                                topic_positions=topics[ts][0] if ts in topics else None,
                                topic_values=topics[ts][1] if ts in topics else None))
    return out


def replay_recording(sample: Path, mode: str) -> list[Any]:
    """The engine's decisions over ``sample`` under its broker.conf in ``mode`` (``observed`` or
    ``closed-loop``), the load model calibrated on its reports as ``preparation.calibrate`` does."""
    return [d for res in replay_results(sample, mode)[1] for d in res.decisions]


def replay_results(sample: Path, mode: str, broker_conf: Path | None = None,
                   recorded_line: bool = False, seed: int = 0, lookups: bool = False) -> tuple[list[str], list[Any]]:
    """(broker ids, the engine's TickResults) over ``sample`` in ``mode`` under ``broker_conf`` (default: the
    sample's own), the load model calibrated on the sample's reports as ``preparation.calibrate`` does; with
    ``recorded_line`` on the Pulsar line the recording's brokers report (as ``replay`` chooses it); ``seed`` draws
    Pulsar's random choices (``replay --seed``); with ``lookups`` the leader's logged lookups too (as the Spark
    replay's stream carries them)."""
    from lbreplay.kernel.config import parse_broker_conf, typed_overrides
    from lbreplay.lake.ingest import read_dumps
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration, bandwidth_per_byte
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import leader_held_view

    rows = read_dumps(sample, sample.name).rows
    ids = sorted({r["broker"] for r in rows["broker_load"]})
    per: dict[str, list[dict[str, Any]]] = {b: [r for r in rows["broker_load"] if r["broker"] == b] for b in ids}

    def sums(f: Any) -> np.ndarray:
        return np.array([float(sum(f(r) for r in per[b])) for b in ids])

    x = lambda r: (r["msg_rate_in"] or 0.0) + (r["msg_rate_out"] or 0.0)  # noqa: E731
    calib = CpuCalibration.from_sums(sums(lambda r: 1), sums(x), sums(lambda r: r["cpu_usage"]),
                                     sums(lambda r: x(r) ** 2), sums(lambda r: x(r) * r["cpu_usage"]))
    calib.bandwidth_in_per_byte = bandwidth_per_byte(sums(lambda r: r["bandwidth_in_usage"] or 0.0),
                                                     sums(lambda r: r["msg_throughput_in"] or 0.0))
    calib.bandwidth_out_per_byte = bandwidth_per_byte(sums(lambda r: r["bandwidth_out_usage"] or 0.0),
                                                      sums(lambda r: r["msg_throughput_out"] or 0.0))
    conf_file = broker_conf or sample / "broker.conf"
    conf = typed_overrides(parse_broker_conf(conf_file.read_text(encoding="utf-8")), path="broker.conf")
    if recorded_line:
        from tests.live_audit.timer_replay import recorded_line as line_of

        conf["pulsarVersion"] = line_of(rows).line
    namespaces = sorted({r["namespace"] for r in rows["bundle_load"]})
    replay = Replay(RunSpec(sample.name, sample.name, mode, conf, seed), StaticInputs(ids, namespaces, calib))
    hold = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    elected = sorted((_ms(r["ts"]), r["broker"]) for r in rows["leader_election"])
    runs, reads = recorded_runs(rows)
    ticks = leader_held_view(iter(version_ticks(rows, ids, namespaces)), len(ids), hold,
                             elections_ms=[t for t, _ in elected], leader_brokers=[b for _, b in elected],
                             runs_ms=runs, departures=recorded_departures(rows, ids), reads_ms=reads,
                             lookups=recorded_lookups(rows) if lookups else None)
    return ids, [replay.step(obs) for obs in ticks]


def recorded_lookups(rows: dict[str, list[dict[str, Any]]]) -> list[list[Any]] | None:
    """The recording's ``leader_placement`` rows as the replay's stream holds them (``preparation.leader_lookups``):
    the leader's lookups, [ms, bundle, selected broker or None] in logged order; None without placement lines."""
    from lbreplay.collect.leader_log import logged_by_leader

    elected = sorted((_ms(r["ts"]), r["broker"]) for r in rows["leader_election"])
    placed = sorted(rows.get("leader_placement", ()), key=lambda r: (_ms(r["ts"]), r["seq"]))
    if not placed:
        return None
    return [[_ms(r["ts"]), r["bundle"], r.get("selected")] for r in placed if r["lookup"] and logged_by_leader(
        r["broker"], _ms(r["ts"]), [t for t, _ in elected], [b for _, b in elected])]


def recorded_runs(rows: dict[str, list[dict[str, Any]]]) -> tuple[list[int], list[int | None]]:
    """The recording's ``shedding_run`` rows as the replay's stream holds them (``preparation.leader_timer``): the
    logged runs in time order and, per run, the time of the reports its strategy read (``read_at``, or None)."""
    logged = sorted((_ms(r["ts"]), None if r.get("read_at") is None else _ms(r["read_at"])) for r in rows["shedding_run"])
    return [t for t, _ in logged], [r for _, r in logged]


def recorded_departures(rows: dict[str, list[dict[str, Any]]], ids: list[str]) -> list[list[int]] | None:
    """The recording's ``broker_departure`` rows as the replay's stream holds them (``tick_stream.departure_rows``)."""
    from lbreplay.replay.tick_stream import departure_rows

    return departure_rows(((_ms(r["ts"]), r["broker"]) for r in rows.get("broker_departure", ())), ids)
