"""``collect --leader-log-dir DIR``: the brokers' load-balancer log lines, gathered into ``<out>/leader-decisions.log``.

Every ``*.log`` file under DIR is one broker's log (Pulsar's ``pulsar.log.file``), followed as it grows while
``collect`` runs. The broker is named by the file (``127.0.0.1_8080.log``, ``broker-1.example.com:8080.log``) or by
its directory (``DIR/127.0.0.1_8080/pulsar-broker.log``): ``host_port`` -> ``host:port``. Whoever leads, the lines
:func:`lbreplay.collect.leader_log.is_leader_log_line` keeps (every shedding strategy's, the modular manager's
unload and split lines, the extensible manager's schedulers, the elections) are appended to
``leader-decisions.log`` prefixed with that ``host:port`` -- the file ``ingest`` reads the leader's runs from and the
live audit its decisions (the same lines ``scripts/pulsar/live-test.sh`` gathers). A file named by no ``host:port``
is still read, its lines unprefixed (a warning says so: an extensible split then names no owner).

Offsets are kept in ``collect/leader-log-offsets.jsonl`` (a line per file: inode and bytes read), so a later session goes on
where the last one stopped; a file that shrank or was replaced (rotation) is read again from its start. Only
complete lines are read. When the session ends the file is sorted by the lines' timestamps (a stable sort: lines of
one broker keep their order) and rewritten atomically.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lbreplay.collect.layout import atomic_write
from lbreplay.collect.leader_log import is_leader_log_line, log_time_ms
from lbreplay.errors import UsageError

LEADER_LOG = "leader-decisions.log"
OFFSETS = Path("collect") / "leader-log-offsets.jsonl"  # JSON Lines: ``ingest`` reads a recording's *.json as dumps
READ_LIMIT = 16 << 20  # bytes read per file per round (a long existing log is read over several rounds)
_BROKER = re.compile(r"(?P<host>[A-Za-z0-9][\w.-]*)[_:](?P<port>\d{1,5})")


def broker_of(path: Path) -> str | None:
    """``host:port`` from the file's name or its directory's, else None."""
    for name in (path.name.removesuffix(".log"), path.parent.name):
        m = _BROKER.fullmatch(name)
        if m:
            return f"{m.group('host')}:{m.group('port')}"
    return None


class LeaderLogGatherer:
    """Follows the ``*.log`` files under ``log_dir``; :meth:`gather` appends their new leader-log lines."""

    def __init__(self, log_dir: Path, out: Path) -> None:
        if not log_dir.is_dir():
            raise UsageError(f"--leader-log-dir {log_dir}: not a directory")
        self.log_dir = log_dir
        self.out = out
        self.target = out / LEADER_LOG
        self.offsets: dict[str, dict[str, int]] = self._load_offsets()
        self.lines = 0
        self.unnamed: list[str] = []  # files named by no host:port, not yet reported (take_unnamed)
        self._named_or_reported: set[str] = set()
        self.pending = False  # a file had more than READ_LIMIT new bytes in the last round

    def _load_offsets(self) -> dict[str, dict[str, int]]:
        path = self.out / OFFSETS
        try:
            records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError):
            return {}
        return {str(r["file"]): {"inode": int(r.get("inode", -1)), "offset": int(r.get("offset", 0))}
                for r in records if isinstance(r, dict) and "file" in r}

    def _save_offsets(self) -> None:
        """One line per followed file (``file``, ``inode``, ``offset``), the whole file replaced atomically."""
        lines = "".join(json.dumps({"file": k, **v}, sort_keys=True) + "\n" for k, v in sorted(self.offsets.items()))
        atomic_write(self.out / OFFSETS, lines.encode("utf-8"))

    def files(self) -> list[Path]:
        return sorted(p for p in self.log_dir.rglob("*.log") if p.is_file())

    def gather(self) -> int:
        """One round over every file: the new complete lines kept; returns how many were appended."""
        kept: list[str] = []
        self.pending = False
        for path in self.files():
            key = str(path.relative_to(self.log_dir))
            broker = broker_of(path)
            if key not in self._named_or_reported:
                self._named_or_reported.add(key)
                self.unnamed += [key] if broker is None else []
            kept += [f"{broker} {ln}" if broker else ln for ln in self._new_lines(path, key) if is_leader_log_line(ln)]
        if kept:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            with open(self.target, "a", encoding="utf-8") as fh:
                fh.write("".join(ln + "\n" for ln in kept))
            self.lines += len(kept)
        self._save_offsets()
        return len(kept)

    def _new_lines(self, path: Path, key: str) -> list[str]:
        try:
            stat = path.stat()
            seen = self.offsets.get(key, {})
            offset = int(seen.get("offset", 0))
            if seen.get("inode") != stat.st_ino or stat.st_size < offset:
                offset = 0  # a new file under the same name (rotated) or truncated: from its start
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(READ_LIMIT)
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # complete lines only; a line being written is read next round
        if len(data) == READ_LIMIT:
            self.pending = True
            end = end or len(data)  # one line longer than the limit: taken as it is
        self.offsets[key] = {"inode": stat.st_ino, "offset": offset + end}
        return data[:end].decode("utf-8", errors="replace").splitlines()

    def finish(self) -> None:
        """Read what is left, then sort ``leader-decisions.log`` by time (stable) and rewrite it atomically."""
        self.gather()
        while self.pending:
            self.gather()
        if not self.target.is_file():
            return
        lines = self.target.read_text(encoding="utf-8", errors="replace").splitlines()
        keyed: list[tuple[int, int, str]] = []
        last = 0
        for i, line in enumerate(lines):
            at = log_time_ms(line)
            last = at if at is not None else last
            keyed.append((last, i, line))
        atomic_write(self.target, "".join(ln + "\n" for _, _, ln in sorted(keyed)).encode("utf-8"))

    def take_unnamed(self) -> list[str]:
        """The files found since the last call whose lines go in without a broker id (for a warning)."""
        out, self.unnamed = self.unnamed, []
        return out

    def counts(self) -> dict[str, Any]:
        return {"leader_log_lines": self.lines}
