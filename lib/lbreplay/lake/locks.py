"""Run-id locks: one writer per run id on a lake at a time.

Two processes replaying the same run id would each replace that run's rows in five output tables (Delta
``replaceWhere run_id IN (...)``); their commits interleave and Delta's optimistic concurrency can fail either
writer on any table. A lock per run id (``fcntl.flock`` on ``<lake>/_locks/<digest>.lock``) lets exactly one win:
the other fails at once with a one-line reason. The kernel drops a ``flock`` when its holder dies (even by
``kill -9``), so a crashed run never leaves a stale lock. Lakes given as URIs (object stores) have no
local lock files: there Delta's conflict detection is the only guard.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterable, Iterator

from lbreplay.errors import LbReplayError
from lbreplay.lake.presence import require_local_lake

LOCK_DIR = "_locks"


class RunInProgressError(LbReplayError):
    """Another process on this lake is writing the same run id (exit 1: retry when it has finished)."""


def _lock_file(lake: str, run_id: str) -> Path:
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:32]  # run ids may hold '/', spaces, unicode
    return Path(lake) / LOCK_DIR / f"{digest}.lock"


@contextmanager
def run_id_lock(lake: str, run_ids: Iterable[str]) -> Iterator[None]:
    """Hold the lock of every id in ``run_ids`` for the duration of the block (non-blocking: a held lock raises
    :class:`RunInProgressError` naming the run id and the holder's pid). A local path that is not a lake is refused
    first (``lake.presence``), so no ``_locks`` directory is ever made outside a lake."""
    import fcntl

    ids = sorted({r for r in run_ids if r})
    if "://" in lake or not ids:
        yield
        return
    require_local_lake(lake)
    (Path(lake) / LOCK_DIR).mkdir(parents=True, exist_ok=True)
    held: list[IO[str]] = []
    try:
        for rid in ids:
            fh: IO[str] = open(_lock_file(lake, rid), "a+", encoding="utf-8")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown pid"
                fh.close()
                raise RunInProgressError(
                    f"run id {rid!r} is being written by another lbreplay process on this lake ({holder}); "
                    "nothing was written by this one: wait for that run to finish, or pick another --run-id"
                ) from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}\n")
            fh.flush()
            held.append(fh)
        yield
    finally:
        for fh in held:
            fh.close()  # closing drops the flock
