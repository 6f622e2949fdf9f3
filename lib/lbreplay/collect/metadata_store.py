"""Every version of the modular load manager's znodes under ``/loadbalance``, from a watch (not a poll).

Data and child watches on every node under ``/loadbalance`` report each create / change / delete; a worker
thread re-reads the node (setting the watch again) and writes the version it finds
(``ModularLoadManagerImpl`` writes ``/loadbalance/brokers/<broker>`` (``LocalBrokerData``),
``/loadbalance/bundle-data/<bundle>`` (``BundleData``) and ``/loadbalance/broker-time-average/<broker>``
(``TimeAverageBrokerData``); the leader reads them as they are). ZooKeeper reports a change, not each
intermediate value: when a node changed twice before it was read, the skipped versions are logged as
``missed`` in ``collect/metadata-versions.jsonl`` so an audit can tell. A deleted broker node (broker down or
restarting) is logged as ``absent``; a broker that comes back under the same id is a new node (new ``ctime``,
version 0). After a lost ZooKeeper session the watch is set again and the tree walked, recording only versions
not yet seen.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbreplay.collect.layout import (
    JsonLines,
    atomic_write,
    atomic_write_json,
    safe_part,
    version_file,
)
from lbreplay.errors import InvalidInputError, UsageError

ROOT = "/loadbalance"
BROKERS = f"{ROOT}/brokers"
BUNDLE_DATA = f"{ROOT}/bundle-data"
TIME_AVERAGE = f"{ROOT}/broker-time-average"
LEADER = f"{ROOT}/leader"
_RANGE = re.compile(r"0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}")
#: znodes outside the three report trees whose versions are logged inline (small JSON: leader, quotas, ...).
INLINE_LIMIT = 4096


def zk_hosts(metadata_store: str) -> str:
    """``zk:host:2181[,host2:2181][/chroot]`` (Pulsar's ``metadataStoreUrl``) -> kazoo's hosts string."""
    url = metadata_store.strip()
    url = url.removeprefix("zk:")
    url = url.removeprefix("//")
    if not url or "://" in url or url.startswith(("etcd:", "rocksdb:", "memory:", "oxia:")):
        raise UsageError(
            f"--metadata-store {metadata_store!r}: only ZooKeeper is supported (zk:host:2181[,host:2181][/chroot])")
    return url


def classify(path: str) -> tuple[str, str] | None:
    """A znode path -> (kind, name) for the three report trees, else None.

    ``/loadbalance/brokers/127.0.0.1:8080`` -> ("brokers", "127.0.0.1:8080");
    ``/loadbalance/bundle-data/public/default/0x00000000_0x40000000`` -> ("bundle-data", "public/default/0x…");
    ``/loadbalance/broker-time-average/b:8080`` -> ("broker-time-average", "b:8080").
    """
    for prefix, kind in ((BROKERS, "brokers"), (TIME_AVERAGE, "broker-time-average")):
        if path.startswith(prefix + "/"):
            name = path[len(prefix) + 1:]
            return (kind, name) if name and "/" not in name else None
    if path.startswith(BUNDLE_DATA + "/"):
        name = path[len(BUNDLE_DATA) + 1:]
        parts = name.split("/")
        if len(parts) >= 3 and _RANGE.fullmatch(parts[-1]):
            return "bundle-data", name
    return None


def is_load_report(data: bytes) -> bool:
    """A ``LocalBrokerData`` (modular load manager), as opposed to the extensible load manager's
    ``BrokerLookupData`` under the same ``/loadbalance/brokers/<broker>`` path."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and ("lastStats" in doc or doc.get("loadReportType") == "LocalBrokerData")


def output_path(out: Path, kind: str, name: str, mtime_ms: int, version: int) -> Path:
    """Where one version goes (see :mod:`lbreplay.collect.layout`)."""
    base = out / "loadbalance" / kind
    if kind == "bundle-data":
        sub = Path(*[safe_part(p) for p in name.split("/")])
    else:
        sub = Path(safe_part(name))
    return base / sub / version_file(mtime_ms, version)


def version_body(kind: str, name: str, data: bytes) -> bytes | Any:
    """The file content for one version: the broker's report as written; bundle data and time averages as a
    one-entry map keyed by the bundle / broker (``ingest`` takes the key as the name)."""
    if kind == "brokers":
        return data
    return {name: json.loads(data.decode("utf-8"))}


@dataclass
class Counts:
    versions: dict[str, int] = field(default_factory=lambda: {"brokers": 0, "bundle-data": 0,
                                                              "broker-time-average": 0, "other": 0})
    missed: int = 0
    absent: int = 0
    errors: int = 0


class MetadataStoreRecorder:
    """Watch ``/loadbalance`` on ZooKeeper and write each new version (see the module docstring)."""

    def __init__(self, metadata_store: str, out: Path, log: JsonLines, timeout_s: float = 30.0,
                 client_kwargs: dict[str, Any] | None = None, connect_timeout_s: float = 15.0) -> None:
        from kazoo.client import KazooClient

        self.out = out
        self.log = log
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.metadata_store = metadata_store
        self.client = KazooClient(hosts=zk_hosts(metadata_store), timeout=timeout_s, **(client_kwargs or {}))
        self.queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self.seen: dict[str, tuple[int, int]] = {}  # path -> (ctime, version) last written
        self.counts = Counts()
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._run, name="lbreplay-collect-zk", daemon=True)
        self._resync = threading.Event()
        self.known_children: dict[str, set[str]] = {}
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not connect(self.client, self.connect_timeout_s):
            hosts = zk_hosts(self.metadata_store).split("/", 1)[0]
            raise InvalidInputError(f"--metadata-store {self.metadata_store}: no ZooKeeper session with {hosts} "
                                    f"within {self.connect_timeout_s:g} s")
        self.client.add_listener(self._on_state)
        self._worker.start()
        self._watch_and_walk()

    def stop(self) -> None:
        """Drain what the watch reported, then close the session (pending reads finish; nothing half-written)."""
        self._stopped = True
        if self._worker.is_alive():  # never started when start() failed
            self.queue.put(None)
            self._worker.join(timeout=60)
        try:
            self.client.stop()
            self.client.close()
        except Exception as exc:  # noqa: BLE001 -- closing a dead session must not fail the stop
            self.log.write({"event": "close-error", "error": type(exc).__name__, "at": _now_ms()})

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST and not self._stopped:
            self.log.write({"event": "session-lost", "at": _now_ms()})
            self._resync.set()
        elif state == KazooState.CONNECTED and self._resync.is_set() and not self._stopped:
            self._resync.clear()
            self.log.write({"event": "session-restored", "at": _now_ms()})
            threading.Thread(target=self._watch_and_walk, daemon=True).start()

    def _watch_and_walk(self) -> None:
        self.known_children.clear()
        self.queue.put(("WALK", ROOT))

    def _on_event(self, event: Any) -> None:
        self.queue.put((str(event.type), event.path))

    # -- worker ----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                if self.queue.empty():
                    return
                self.queue.put(None)  # drain the rest first
                continue
            etype, path = item
            try:
                if etype == "DELETED":
                    self._deleted(path)
                    continue
                if etype in ("WALK", "CREATED", "CHILD", "NONE"):
                    self._children(path, walk=etype == "WALK")
                if etype != "CHILD":
                    self._read(path)
            except Exception as exc:  # noqa: BLE001 -- one unreadable node never stops the recording
                self.counts.errors += 1
                self.log.write({"event": "error", "path": path, "error": f"{type(exc).__name__}: {exc}",
                                "at": _now_ms()})

    def _children(self, path: str, walk: bool) -> None:
        """List (and watch) ``path``'s children; new ones are walked (their data read, their children listed)."""
        from kazoo.exceptions import NoNodeError

        try:
            children = set(self.client.get_children(path, watch=self._on_event))
        except NoNodeError:
            return
        known = self.known_children.get(path, set())
        self.known_children[path] = children
        for child in sorted(children if walk else children - known):
            self.queue.put(("WALK", f"{path.rstrip('/')}/{child}"))

    def _deleted(self, path: str) -> None:
        kind = classify(path)
        known = path in self.seen or path in self.known_children
        self.seen.pop(path, None)
        self.known_children.pop(path, None)
        if not known:  # the data and the child watch both report a deletion: log it once
            return
        rec = {"event": "deleted", "path": path, "at": _now_ms()}
        if kind and kind[0] == "brokers":
            rec["event"] = "absent"
            rec["broker"] = kind[1]
            self.counts.absent += 1
        self.log.write(rec)

    def _read(self, path: str) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self.client.get(path, watch=self._on_event)
        except NoNodeError:
            return
        key = (int(stat.ctime), int(stat.version))
        last = self.seen.get(path)
        if last is not None and last[0] == key[0] and last[1] >= key[1]:
            return  # this version (or a later one) is already written
        if last is not None and last[0] == key[0] and key[1] > last[1] + 1:
            self.counts.missed += key[1] - last[1] - 1
            self.log.write({"event": "missed", "path": path, "versions": [last[1] + 1, key[1] - 1],
                            "at": _now_ms()})
        self.seen[path] = key
        kind = classify(path)
        if kind is not None and kind[0] == "brokers" and not is_load_report(data):
            kind = None  # the extensible load manager's BrokerLookupData (its loads are in system topics)
        rec: dict[str, Any] = {"event": "version", "path": path, "version": key[1], "mtime": int(stat.mtime),
                               "ctime": key[0], "at": _now_ms()}
        if kind is None:
            if not data:
                return
            if len(data) <= INLINE_LIMIT:
                try:
                    rec["data"] = json.loads(data.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    rec["data_bytes"] = len(data)
            self.counts.versions["other"] += 1
            self.log.write(rec)
            return
        if not data:
            return
        target = output_path(self.out, kind[0], kind[1], int(stat.mtime), key[1])
        if not target.exists():
            body = version_body(kind[0], kind[1], data)
            if isinstance(body, bytes):
                atomic_write(target, body)
            else:
                atomic_write_json(target, body)
        rec["file"] = str(target.relative_to(self.out))
        self.counts.versions[kind[0]] += 1
        self.log.write(rec)


def connect(client: Any, timeout_s: float) -> bool:
    """Start a kazoo client; False (the client closed in the background) when no session came within ``timeout_s``.
    ``KazooClient.start(timeout)`` would wait for its connection attempt in flight to end before raising."""
    event = client.start_async()
    event.wait(timeout=timeout_s)
    if client.connected:
        return True
    close_in_background(client)
    return False


def close_in_background(client: Any) -> None:
    """Stop a kazoo client that never got a session without waiting: its connection thread finishes the attempt in
    flight (a socket read bounded by the session timeout, 20 s of 30) in a daemon thread."""

    def close() -> None:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001,S110 -- nothing to close cleanly without a session
            pass

    threading.Thread(target=close, name="lbreplay-collect-zk-close", daemon=True).start()


def _now_ms() -> int:
    return int(time.time() * 1000)
