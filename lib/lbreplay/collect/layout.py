"""Where ``collect`` writes (all under ``--out DIR``), and its atomic file writes.

==============================================================  =============================================
file                                                            content
==============================================================  =============================================
``loadbalance/brokers/<host_port>/<mtime>-v<version>.json``      one version of ``/loadbalance/brokers/<broker>``
                                                                (``LocalBrokerData`` as the broker wrote it)
``loadbalance/bundle-data/<tenant>/<ns…>/<range>/<mtime>-v<n>.json``  ``{"<bundle>": BundleData}`` (one version)
``loadbalance/broker-time-average/<host_port>/<mtime>-v<n>.json``  ``{"<broker>": TimeAverageBrokerData}``
``extensible/broker-load-data/<host_port>/<ms>.json``            ``BrokerLoadData`` (extensible load manager)
``extensible/top-bundles-load-data/<host_port>/<ms>.json``       ``TopBundlesLoadData``
``extensible/<kind>/<host_port>/<ms>.tombstone``                 an empty message: the broker's entry removed
``collect/metadata-versions.jsonl``                             one line per recorded or missed znode version
                                                                (path, version, mtime, ctime, file) and per
                                                                deleted node (a broker gone: ``absent``)
``collect/admin/<stamp>.jsonl``                                 one admin-API poll: one line per request
                                                                (source, admin URL, HTTP status, body)
``collect/extensible/service-unit-state.jsonl``                 service-unit state changes (extensible)
``collect/session.jsonl``                                       start / stop of each collect session
``leader-decisions.log`` (with ``--leader-log-dir``)             the brokers' load-balancer log lines, each
                                                                prefixed with the broker's ``host:port``, in time
                                                                order (:mod:`lbreplay.collect.leader_log_files`):
                                                                ``ingest`` takes the leader's elections and shedding
                                                                runs from them, the live audit its decisions
``collect/leader-log-offsets.jsonl``                            how far each broker log was read (a later session
                                                                goes on from there)
==============================================================  =============================================

``<mtime>`` is the znode's modification time in epoch milliseconds (the moment the leader could first read that
version); ``host_port`` stands for ``host:port``. ``lbreplay ingest --source DIR`` reads the ``*.json`` files
(the ``.jsonl`` records are for audits and later tables). Each file is written to a hidden temporary name in its
directory and renamed into place, so a reader never sees half a file and ``ingest`` skips a leftover.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]")


def safe_part(name: str) -> str:
    """One path component for a znode name: ``host:port`` -> ``host_port``, other odd characters -> ``_``."""
    return _UNSAFE.sub("_", name)


def version_file(mtime_ms: int, version: int) -> str:
    """``<mtime>-v<version>.json`` (the 13-digit epoch millis is what ingest reads as the snapshot time)."""
    return f"{int(mtime_ms):013d}-v{int(version)}.json"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a hidden temporary file in the same directory, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write(path, (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode("utf-8"))


class JsonLines:
    """An append-only JSON Lines record: one ``write`` -> one complete line, flushed (thread-safe)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 -- kept open for the session, closed by close()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            if self._fh.closed:
                return
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """The complete records of a JSON Lines file (a torn last line, e.g. after a SIGKILL, is skipped)."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
