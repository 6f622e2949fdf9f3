"""The leader's view at each shedding time, rebuilt from a ``collect`` recording (every znode version).

``ModularLoadManagerImpl`` sheds and splits on its in-memory ``LoadData``: for each broker the latest
``/loadbalance/brokers/<broker>`` version it has read, for each bundle the latest ``BundleData``. Pulsar's
shedding task runs every ``loadBalancerSheddingIntervalMinutes`` from the moment the broker became leader (its
timer minutes), each run a little after its minute (``LoadSheddingTask`` re-schedules itself after each run). A run
reads ``LoadData`` as ``updateAll`` left it when the run started: reports written while the run is under way reach
it through ``updateAll`` on another thread (not synchronized with ``doLoadShedding``), too late for the strategy.
So the view is taken at each run's start -- its first logged line where the log shows one, else its timer minute --
and, without a recorded election, at the median phase of the leader's decisions.

:func:`write_leader_view` writes, for each minute of the recording, the versions held at that minute's shedding
time, each broker report stamped with that time (its own ``lastUpdate`` kept in ``recordedLastUpdate``), so the
ticks ``ingest`` builds (one per shedding time, every held report at it) are exactly the leader's views. A bundle listed by
two brokers (the old owner's report still lists a bundle just unloaded or split) or overlapping another's range is
kept only in the most recently written report -- the newest claim, the one the leader's ownership follows. This
is an interim adapter for today's validation (one owner per bundle, tiled ranges); its counts of dropped stale
claims are returned so a comparison can say what it changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbreplay.collect.layout import (
    atomic_write_json,
    read_json_lines,
    safe_part,
    version_file,
)
from lbreplay.kernel.naming import parse_range
from lbreplay.lake.dump_tree import broker_from_path


@dataclass(frozen=True)
class Version:
    mtime: int
    version: int
    path: Path


@dataclass
class ViewStats:
    ticks: int = 0
    stale_claims_dropped: list[dict[str, Any]] = field(default_factory=list)
    missing_brokers: list[dict[str, Any]] = field(default_factory=list)


def recorded_versions(dump: Path, kind: str) -> dict[str, list[Version]]:
    """name -> versions in mtime order, from ``collect/metadata-versions.jsonl`` (the files it names)."""
    prefix = f"/loadbalance/{kind}/"
    out: dict[str, list[Version]] = {}
    for rec in read_json_lines(dump / "collect" / "metadata-versions.jsonl"):
        if rec.get("event") == "version" and rec.get("file") and rec["path"].startswith(prefix):
            out.setdefault(rec["path"][len(prefix):], []).append(
                Version(int(rec["mtime"]), int(rec["version"]), dump / rec["file"]))
    for v in out.values():
        v.sort(key=lambda x: (x.mtime, x.version))
    return out


def published_versions(dump: Path, kind: str) -> dict[str, list[Version]]:
    """broker -> the extensible load manager's messages ``collect`` kept (``extensible/<kind>/<host_port>/<publish
    ms>.json``, kind ``broker-load-data`` or ``top-bundles-load-data``; a ``.tombstone`` is the entry's removal) in
    publish order; version = their rank."""
    out: dict[str, list[Version]] = {}
    root = dump / "extensible" / kind
    for d in sorted(root.iterdir()) if root.is_dir() else ():
        files = sorted((f for f in d.iterdir() if f.suffix in (".json", ".tombstone") and f.stem.isdigit()),
                       key=lambda f: int(f.stem))
        broker = broker_from_path(files[0].relative_to(dump), dump) if files else None  # as ingest names them
        if broker is not None:
            out[broker] = [Version(int(f.stem), i, f) for i, f in enumerate(files)]
    return out


def deletions(dump: Path, kind: str) -> dict[str, list[int]]:
    """name -> times its znode was seen deleted (a broker gone, the bundle data of an unloaded or split bundle)."""
    prefix = f"/loadbalance/{kind}/"
    out: dict[str, list[int]] = {}
    for rec in read_json_lines(dump / "collect" / "metadata-versions.jsonl"):
        if rec.get("event") in ("absent", "deleted") and rec.get("path", "").startswith(prefix):
            out.setdefault(rec["path"][len(prefix):], []).append(int(rec["at"]))
    return out


def held_at(versions: list[Version], t: int) -> Version | None:
    """The latest version written at or before ``t``."""
    best = None
    for v in versions:
        if v.mtime <= t:
            best = v
        else:
            break
    return best


def shedding_phase_ms(decision_times_ms: list[int], default_ms: int = 30_000) -> int:
    """The millisecond-in-minute of the leader's shedding cycles (the median phase of its decisions)."""
    if not decision_times_ms:
        return default_ms
    phases = sorted(t % 60_000 for t in decision_times_ms)
    return phases[len(phases) // 2]


def _overlaps(a: tuple[int | None, int | None], b: tuple[int | None, int | None]) -> bool:
    if None in a or None in b:
        return False
    return a[0] < b[1] and b[0] < a[1]  # type: ignore[operator]


def _split_name(bundle: str) -> tuple[str, tuple[int | None, int | None]]:
    ns, _, rng = bundle.rpartition("/")
    try:
        lo, hi = parse_range(rng)
    except Exception:  # noqa: BLE001 -- a malformed name is left to validation
        return ns, (None, None)
    return ns, (lo, hi)


def write_leader_view(dump: Path, out: Path, phase_ms: int, first_ms: int | None = None,
                      last_ms: int | None = None, times_ms: Sequence[int] | None = None) -> ViewStats:
    """Write the leader's view at each of ``times_ms`` (the shedding runs' starts: each timer minute of the recorded
    election, at its logged run where the log shows one), or, without them, at ``minute + phase_ms`` for every
    minute of the recording (see module doc)."""
    brokers = recorded_versions(dump, "brokers")
    bundle_data = recorded_versions(dump, "bundle-data")
    tabd = recorded_versions(dump, "broker-time-average")
    gone = {kind: deletions(dump, kind) for kind in ("brokers", "bundle-data", "broker-time-average")}
    all_times = [v.mtime for vs in brokers.values() for v in vs]
    if not all_times:
        return ViewStats()
    start = (first_ms if first_ms is not None else min(all_times)) // 60_000 * 60_000
    end = (last_ms if last_ms is not None else max(all_times)) // 60_000 * 60_000
    stats = ViewStats()
    views = (sorted(times_ms) if times_ms is not None
             else [minute + phase_ms for minute in range(start, end + 60_000, 60_000)])
    for t in views:
        docs: dict[str, tuple[Version, dict[str, Any]]] = {}
        for broker, versions in brokers.items():
            v = held_at(versions, t)
            if v is None:
                continue
            if any(v.mtime < g <= t for g in gone["brokers"].get(broker, [])):
                stats.missing_brokers.append({"t": t, "broker": broker, "why": "node deleted before t"})
                continue
            docs[broker] = (v, json.loads(v.path.read_bytes()))
        if not docs:
            continue
        # newest claim wins: walk reports newest first, drop bundles already claimed (same name or overlapping)
        claimed: list[tuple[str, tuple[int | None, int | None], str, str]] = []  # (ns, range, bundle, broker)
        for broker, (v, doc) in sorted(docs.items(), key=lambda kv: -kv[1][0].mtime):
            stats_map = doc.get("lastStats") or {}
            for bundle in sorted(stats_map):
                ns, rng = _split_name(bundle)
                owner = next((c[3] for c in claimed
                              if c[2] == bundle or (c[0] == ns and _overlaps(c[1], rng))), None)
                if owner is not None:
                    del stats_map[bundle]
                    stats.stale_claims_dropped.append({"t": t, "bundle": bundle, "stale_in": broker,
                                                       "kept_in": owner, "stale_mtime": v.mtime})
                else:
                    claimed.append((ns, rng, bundle, broker))
            doc["recordedLastUpdate"] = doc.get("lastUpdate")
            doc["lastUpdate"] = t
            doc["numBundles"] = len(stats_map)
            target = out / "loadbalance" / "brokers" / safe_part(broker) / version_file(t, v.version)
            atomic_write_json(target, doc)
        for kind, table in (("bundle-data", bundle_data), ("broker-time-average", tabd)):
            for name, versions in table.items():
                v = held_at(versions, t)
                if v is None or any(v.mtime < g <= t for g in gone[kind].get(name, [])):
                    continue
                sub = Path(*[safe_part(p) for p in name.split("/")])
                atomic_write_json(out / "loadbalance" / kind / sub / version_file(t, v.version),
                                  json.loads(v.path.read_bytes()))
        stats.ticks += 1
    return stats
