"""Task side of a replay: the prepared tick stream read back as :class:`ObservedTick` s, in time order.

Each task streams the tick rows with Arrow in bounded batches (one batch per file and one tick), so memory does
not grow with the history and nothing of the history reaches the driver.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lbreplay.kernel.leader_election import at_logged_runs, timer_minutes
from lbreplay.replay.records import ObservedTick
from lbreplay.replay.stored_bundle_data import STORED_COLUMNS, StoredBundleData
from lbreplay.replay.stream_manifest import (
    BUNDLE_COLUMNS,
    RECORDED_LOAD_DATA,
    RESOURCES,
    TOPIC_COLUMNS,
    StreamManifest,
)
from lbreplay.replay.topic_files import open_parquet, prefetched, ring_order, tick_runs, topic_ticks

BATCH_TICKS = 8
FLAT_BATCH_ROWS = 1 << 16

BrokerRow = tuple[int, dict[str, Any], int]  # (ts_ms, the columns of its batch, its row in the batch)


def _part_files(path: str) -> list[str]:
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet")) if os.path.isdir(path) else []


def _broker_rows(path: str) -> Iterator[BrokerRow]:
    """Every row of the broker part, in ``ts_ms`` order: each file is sorted, and the files are merged, reading a
    few ticks at a time with Arrow (bounded memory)."""
    def rows(f: str) -> Iterator[BrokerRow]:
        for batch in open_parquet(f).iter_batches(batch_size=BATCH_TICKS):
            cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
            for r, ts in enumerate(cols["ts_ms"].to_pylist()):
                yield ts, cols, r

    return heapq.merge(*(rows(f) for f in _part_files(path)), key=lambda x: x[0])


def _flat_ticks(path: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(ts_ms, the tick's ``columns`` as arrays, string columns as Arrow arrays) per tick of a flat part, in
    ``ts_ms`` order. Each file is sorted by ``ts_ms`` and read a batch of rows at a time; the files are merged by
    ``ts_ms`` and a tick's rows found in several files are concatenated in file order (bounded memory: one batch
    per file and one tick)."""
    def chunks(f: str) -> Iterator[tuple[int, Any]]:
        for batch in open_parquet(f).iter_batches(batch_size=FLAT_BATCH_ROWS, columns=["ts_ms", *columns]):
            yield from tick_runs(batch.column(0).to_numpy(zero_copy_only=False), batch)

    merged = heapq.merge(*(chunks(f) for f in _part_files(path)), key=lambda x: x[0])
    for ts, group in itertools.groupby(merged, key=lambda x: x[0]):
        batches = [b for _, b in group]
        out: dict[str, Any] = {}
        for k, name in enumerate(columns, start=1):
            arrays = [b.column(k) for b in batches]
            if pa.types.is_string(arrays[0].type):
                out[name] = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
            else:
                out[name] = np.concatenate([a.to_numpy(zero_copy_only=False) for a in arrays])
        yield ts, out


def _topic_part_ticks(path: str) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(ts_ms, positions, values (T, 6)) per tick of the topic part, in ``ts_ms`` order; a tick's topics ordered by
    ring position, topics sharing a position (crc32 collision) by their values, so the sums are the same whatever
    the files' row order (:func:`~lbreplay.replay.topic_files.ring_order`, as when the task reads the files)."""
    for ts, cols in _flat_ticks(path, ("ring_position", *TOPIC_COLUMNS)):
        pos = cols["ring_position"].astype(np.int64)
        vals = np.ones((len(pos), 6))
        for k, name in enumerate(TOPIC_COLUMNS):
            vals[:, k] = np.nan_to_num(cols[name].astype(np.float64))
        order, _ = ring_order(pos, vals)
        yield ts, pos[order], vals[order]


def _bundle_part_ticks(path: str, listed: bool = False) -> Iterator[tuple[int, list[str], np.ndarray, np.ndarray]]:
    """(ts_ms, names, owner indices, values (U, 6)) per tick of the bundle part, the tick's bundles ordered by name
    (the layout's order); ``listed`` (top bundles lists): by owner, then as each list has them (``position``). A
    tick listing the same bundles in the same rows as the tick before reuses its names and order."""
    last: tuple[Any, list[str], np.ndarray] | None = None
    for ts, cols in _flat_ticks(path, ("bundle", "owner_index", *BUNDLE_COLUMNS, *(("position",) if listed else ()))):
        if listed:
            order = np.lexsort((cols["position"], cols["owner_index"]))
            names = cols["bundle"].to_pylist()
            ordered = [names[i] for i in order.tolist()]
        elif last is not None and last[0].equals(cols["bundle"]):
            ordered, order = last[1], last[2]
        else:
            names = cols["bundle"].to_pylist()
            order = np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
            ordered = [names[i] for i in order.tolist()]
            last = (cols["bundle"], ordered, order)
        vals = np.column_stack([np.nan_to_num(cols[c].astype(np.float64)) for c in BUNDLE_COLUMNS])
        yield ts, ordered, cols["owner_index"].astype(np.int32)[order], vals[order]


def _broker_values(row: BrokerRow, name: str, dtype: Any = np.float64) -> np.ndarray:
    """One array column of a broker row (empty when missing or null)."""
    v = None
    if name in row[1] and row[1][name][row[2]].is_valid:
        v = row[1][name][row[2]].values
    return np.zeros(0, dtype=dtype) if v is None else v.to_numpy(zero_copy_only=False).astype(dtype)


def stored_bundle_data(manifest: StreamManifest) -> StoredBundleData | None:
    """The stream's ``bundle_data`` part (the recorded BundleData versions), if it has one."""
    files = _part_files(f"{manifest.stream}/bundle_data") if manifest.bundle_data else []
    if not files:
        return None
    table = pa.concat_tables(pq.read_table(f, columns=list(STORED_COLUMNS)) for f in files)
    if table.num_rows == 0:
        return None
    return StoredBundleData.from_columns({c: table.column(c).to_numpy(zero_copy_only=False) for c in STORED_COLUMNS})


def ticks_from_stream(manifest: StreamManifest, hold_ms: int | None = None) -> Iterator[ObservedTick]:
    """The observed ticks of a prepared stream, in time order: the broker part defines the ticks; the bundle
    and topic parts join it on ``ts_ms`` (a tick they lack has no bundles / topics). A stream of report versions
    (``manifest.versioned``) is turned into the leader's held view (:func:`held_reports`)."""
    out = leader_held_view(_stream_ticks(manifest), len(manifest.broker_ids), hold_ms, versioned=manifest.versioned,
                           elections_ms=manifest.leader_elections, leader_brokers=manifest.leader_brokers,
                           runs_ms=manifest.shedding_runs, departures=manifest.departures,
                           reads_ms=manifest.shedding_reads, lookups=manifest.lookups)
    return _numbered_from_window(out, manifest.lead_in_ticks) if manifest.lead_in_ticks else out


def leader_held_view(ticks: Iterator[ObservedTick], nb: int, hold_ms: int | None, *, versioned: bool = True,
                     elections_ms: list[int] | None = None, leader_brokers: list[str] | None = None,
                     runs_ms: list[int] | None = None, departures: list[list[int]] | None = None,
                     reads_ms: list[int | None] | None = None,
                     lookups: list[list[Any]] | None = None) -> Iterator[ObservedTick]:
    """What the leader holds at each tick of a recording's stream, the one composition every replay of a recording
    uses: report versions held (:func:`held_reports`), the elected leader's timer ticks (:func:`with_leader_timer`),
    then the brokers that left dropped (:func:`without_departed`) and the leader's logged lookups
    (:func:`with_lookups`)."""
    out = held_reports(ticks, nb, hold_ms) if versioned else ticks
    if elections_ms:
        out = with_leader_timer(out, elections_ms, leader_brokers, runs_ms, reads_ms)
    if departures:
        out = without_departed(out, departures)
    if lookups is not None:
        out = with_lookups(out, lookups)
    return out


def with_lookups(ticks: Iterator[ObservedTick], lookups: list[list[Any]]) -> Iterator[ObservedTick]:
    """Each tick with the lookups (``[epoch ms, bundle, selected]``, logged order) the leader logged since the previous tick
    (the first tick: every one up to it), as ``ObservedTick.lookups``; lookups after the last tick are left out."""
    at = 0
    for obs in ticks:
        start = at
        while at < len(lookups) and int(lookups[at][0]) <= obs.ts_ms:
            at += 1
        obs.lookups = tuple((int(ms), str(b), None if s is None else str(s)) for ms, b, s in lookups[start:at])
        yield obs


def departure_rows(departures: Iterable[tuple[int, str]], brokers: list[str]) -> list[list[int]] | None:
    """``broker_departure`` rows (epoch ms, broker id) as [ms, broker row] pairs in time order; a broker outside
    ``brokers`` left before any report (nothing to drop); None without any."""
    row = {b: i for i, b in enumerate(brokers)}
    found = sorted({(int(ms), row[b]) for ms, b in departures if b in row})
    return [list(p) for p in found] or None


def with_leader_timer(ticks: Iterator[ObservedTick], elections_ms: list[int], leader_brokers: list[str] | None = None,
                      runs_ms: list[int] | None = None, reads_ms: list[int | None] | None = None
                      ) -> Iterator[ObservedTick]:
    """The leader's held view also at each of its timer minutes (``kernel.leader_election``: when its shedding and
    quota tasks can run), between the stream's first tick and its last; a timer minute at a report write's time
    comes after it. Where the leader's log shows the run (``runs_ms``: the shedding runs it logged), the tick is at
    the run's time, holding the reports written during its lag, and says the lag (``timer_lag_ms``). Every tick
    says its timer minute (0: a report tick) and, with ``leader_brokers`` (the broker each election elected), the
    leader then; the ticks are numbered anew in order. Where ``reads_ms`` says the run read older reports than those
    written before its lines (``shedding_run.read_at``), the tick is at that time instead."""
    elected = sorted(zip(elections_ms, leader_brokers)) if leader_brokers else []
    elected_ms = [t for t, _ in elected]

    def leader_at(ts_ms: int) -> str | None:
        i = bisect.bisect_right(elected_ms, ts_ms)
        return elected[i - 1][1] if i else None

    timer: Iterator[tuple[int, int, int | None]] | None = None
    pending: tuple[int, int, int | None] | None = None
    last: ObservedTick | None = None
    n = 0
    for obs in ticks:
        if timer is None:
            runs = sorted(zip(runs_ms or (), reads_ms or [None] * len(runs_ms or ())), key=lambda r: r[0])
            timer = at_logged_runs(timer_minutes(elections_ms, obs.ts_ms), [t for t, _ in runs], [r for _, r in runs])
            pending = next(timer, None)
        while last is not None and pending is not None and pending[0] < obs.ts_ms:
            yield dataclasses.replace(last, tick=n, ts_ms=pending[0], timer_minute=pending[1],
                                      leader_broker=leader_at(pending[0]), timer_lag_ms=pending[2])
            n += 1
            pending = next(timer, None)
        obs.tick, obs.timer_minute, obs.leader_broker = n, 0, leader_at(obs.ts_ms)
        n += 1
        yield obs
        last = obs
        while pending is not None and pending[0] == obs.ts_ms:
            yield dataclasses.replace(obs, tick=n, timer_minute=pending[1], timer_lag_ms=pending[2])
            n += 1
            pending = next(timer, None)


def _numbered_from_window(ticks: Iterator[ObservedTick], lead_in: int) -> Iterator[ObservedTick]:
    """Ticks numbered from 0 at the window's first: the lead-in's are -lead_in..-1."""
    for obs in ticks:
        obs.tick -= lead_in
        yield obs


def held_reports(ticks: Iterator[ObservedTick], nb: int, hold_ms: int | None = None) -> Iterator[ObservedTick]:
    """Report versions -> what the leader holds after each write (``ModularLoadManagerImpl``'s ``brokerData``).

    Each tick of a stream of versions holds only the reports written at that time; the leader keeps every broker's
    latest report (its ``/loadbalance/brokers/<broker>`` node) until the broker is gone. The lake does not record
    the node's deletion, so a report older than ``hold_ms`` (a live broker writes at least every
    ``loadBalancerReportUpdateMaxIntervalMinutes``) counts as its broker gone. Each held report keeps its own
    ``lastStats`` (``ObservedTick.listings``: a bundle may sit in two brokers' reports while it moves or around a
    split); the one-owner view names, per bundle, the broker whose report listing it is the newest. A report's
    recorded BrokerLoadData (``ObservedTick.broker_meta``, extensible recordings) is held with it, and its listing
    keeps the order of the tick's bundles (a top bundles list's own order)."""
    held = np.zeros(nb, dtype=bool)
    meta: dict[str, np.ndarray] = {}
    usage = np.zeros((nb, 5))
    limit = np.zeros((nb, 5))
    last_update = np.full(nb, -1, dtype=np.int64)
    listing: dict[int, tuple[list[str], np.ndarray]] = {}
    for obs in ticks:
        w = np.flatnonzero(obs.alive)
        held[w] = True
        usage[w], limit[w] = obs.usage[w], obs.limit[w]
        if obs.last_update is not None:
            last_update[w] = obs.last_update[w]
        for name, col in obs.broker_meta.items():
            meta.setdefault(name, np.full(nb, np.nan))[w] = col[w]
        for b in w.tolist():
            mine = np.flatnonzero(obs.bundle_owner == b)
            listing[b] = ([obs.bundle_names[i] for i in mine], obs.bundle_values[mine])
        if hold_ms is not None:
            gone = held & (last_update >= 0) & (obs.ts_ms - last_update > hold_ms)
            held[gone] = False
            for b in np.flatnonzero(gone).tolist():
                listing.pop(b, None)
        rows = [b for b in sorted(listing) if held[b]]
        names_all = [n for b in rows for n in listing[b][0]]
        brokers_all = np.array([b for b in rows for _ in listing[b][0]], dtype=np.int64)
        values_all = (np.concatenate([listing[b][1] for b in rows]) if rows else np.zeros((0, 6))).reshape(-1, 6)
        names, bundle_idx, owner, values = _one_owner_view(names_all, brokers_all, values_all, last_update)
        yield ObservedTick(obs.tick, obs.ts_ms, held.copy(), usage.copy(), limit.copy(), bundle_names=names,
                           bundle_owner=owner, bundle_values=values, topic_values=obs.topic_values,
                           topic_positions=obs.topic_positions, last_update=last_update.copy(),
                           listings=(brokers_all, bundle_idx, values_all),
                           broker_meta={k: v.copy() for k, v in meta.items()})


def _one_owner_view(names_all: list[str], brokers_all: np.ndarray, values_all: np.ndarray, last_update: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The held reports' listings (bundle name, broker row, values per entry) -> the bundles (sorted), each entry's
    bundle index, and per bundle the broker whose report listing it is the newest (ties: the higher broker row)
    with that report's values."""
    names = sorted(set(names_all))
    index = {n: i for i, n in enumerate(names)}
    bundle_idx = np.array([index[n] for n in names_all], dtype=np.int64)
    owner = np.full(len(names), -1, dtype=np.int32)
    newest = np.full(len(names), -1, dtype=np.int64)
    values = np.zeros((len(names), 6))
    for k in range(len(names_all)):
        i, b = bundle_idx[k], brokers_all[k]
        if (last_update[b], b) >= (newest[i], owner[i]):
            newest[i], owner[i], values[i] = last_update[b], b, values_all[k]
    return names, bundle_idx, owner, values


def without_departed(ticks: Iterator[ObservedTick], departures: list[list[int]]) -> Iterator[ObservedTick]:
    """The leader's held view without the brokers that left: from a broker's departure (``[ms, broker row]``: its
    ``/loadbalance/brokers/<broker>`` znode deleted, ``broker_departure``) the leader holds neither its report nor
    its bundles' listings (``ModularLoadManagerImpl.updateAllBrokerData`` removes a broker whose report is gone;
    ``ExtensibleLoadManagerImpl``'s ``BrokerRegistry`` no longer lists it as available), until it writes a report
    again (a new node after the departure: it starts afresh). Applied at the first tick at or after the departure
    (a report write or a timer minute: the leader's next action)."""
    order = sorted((int(ms), int(b)) for ms, b in departures)
    for obs in ticks:
        gone = {b for ms, b in order if ms <= obs.ts_ms and obs.alive[b]
                and (obs.last_update is None or obs.last_update[b] <= ms)}
        yield obs if not gone else _drop_brokers(obs, gone)


def _drop_brokers(obs: ObservedTick, gone: set[int]) -> ObservedTick:
    """``obs`` without the reports of the brokers in ``gone``: not alive, their listings dropped, each bundle's one
    owner the newest remaining report listing it."""
    alive = obs.alive.copy()
    alive[list(gone)] = False
    if obs.listings is None:  # snapshots: the broker's bundles are left without an owner
        owner = np.where(np.isin(obs.bundle_owner, list(gone)), -1, obs.bundle_owner).astype(np.int32)
        return dataclasses.replace(obs, alive=alive, bundle_owner=owner)
    brokers, idx, vals = obs.listings
    keep = ~np.isin(brokers, list(gone))
    names_all = [obs.bundle_names[i] for i in idx[keep].tolist()]
    last_update = obs.last_update if obs.last_update is not None else np.zeros(len(alive), dtype=np.int64)
    names, bundle_idx, owner, values = _one_owner_view(names_all, brokers[keep], vals[keep], last_update)
    return dataclasses.replace(obs, alive=alive, bundle_names=names, bundle_owner=owner, bundle_values=values,
                               listings=(brokers[keep], bundle_idx, vals[keep]))


def _stream_ticks(manifest: StreamManifest) -> Iterator[ObservedTick]:
    """The stream's ticks as written (one row per tick of the broker part)."""
    path = manifest.stream
    nb = len(manifest.broker_ids)
    bundles = _bundle_part_ticks(f"{path}/bundles", manifest.extensible)
    topics: Iterator[Any] = iter(())
    if manifest.topic_files is not None:
        window_us = tuple(manifest.topic_window_us or (None, None))
        topics = prefetched(topic_ticks(manifest.topic_files, manifest.namespaces, window_us))  # type: ignore[arg-type]
    elif manifest.topics:
        topics = _topic_part_ticks(f"{path}/topics")
    pending: dict[str, Any] = {"bundles": next(bundles, None), "topics": next(topics, None)}

    def at(key: str, it: Iterator[Any], ts: int) -> Any:
        while pending[key] is not None and pending[key][0] < ts:
            pending[key] = next(it, None)
        return pending[key] if pending[key] is not None and pending[key][0] == ts else None

    for tick, row in enumerate(_broker_rows(f"{path}/brokers")):
        ts = row[0]
        rows = _broker_values(row, "broker_index", np.int64)
        alive = np.zeros(nb, dtype=bool)
        alive[rows] = True
        usage = np.zeros((nb, 5))
        limit = np.zeros((nb, 5))
        for k, res in enumerate(RESOURCES):
            usage[rows, k] = np.nan_to_num(_broker_values(row, f"{res}_usage"))
            limit[rows, k] = np.nan_to_num(_broker_values(row, f"{res}_limit"))
        last_update = np.full(nb, -1, dtype=np.int64)
        last_update[rows] = _broker_values(row, "last_update_ms", np.int64)
        recorded = {}
        for name in RECORDED_LOAD_DATA if manifest.extensible else ():
            recorded[name] = np.full(nb, np.nan)
            recorded[name][rows] = _broker_values(row, name)
        u = at("bundles", bundles, ts)
        t = at("topics", topics, ts)
        yield ObservedTick(tick, int(ts), alive, usage, limit,
                           bundle_names=u[1] if u is not None else [],
                           bundle_owner=u[2] if u is not None else np.zeros(0, dtype=np.int32),
                           bundle_values=u[3] if u is not None else np.zeros((0, 6)),
                           topic_values=t[2] if t is not None else None,
                           topic_positions=t[1] if t is not None else None, last_update=last_update,
                           broker_meta=recorded)
