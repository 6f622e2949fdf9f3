"""Progress of long commands: a live line with ETA on a terminal, plain log lines otherwise, nothing with --quiet."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done)`` reports ``done``/``total`` units (ticks, runs) with the rate and the ETA."""

    def __init__(self, label: str, total: int, unit: str = "ticks", quiet: bool = False, out: TextIO | None = None,
                 log_every_s: float = 15.0):
        self.label, self.total, self.unit, self.quiet = label, max(int(total), 1), unit, quiet
        self.out = out or sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last_log = 0.0
        self.log_every_s = log_every_s
        self.done = 0

    def line(self, done: int) -> str:
        elapsed = time.monotonic() - self.start
        pct = 100.0 * done / self.total
        eta = (elapsed / done * (self.total - done)) if done else float("nan")
        eta_s = f"{eta:.0f}s" if eta == eta else "?"
        return f"{self.label}: {done}/{self.total} {self.unit} ({pct:.0f}%), {elapsed:.0f}s elapsed, ETA {eta_s}"

    def update(self, done: int, force: bool = False) -> None:
        done = min(int(done), self.total)
        if self.quiet or (done == self.done and not force):
            return
        self.done = done
        now = time.monotonic()
        if self.tty:
            self.out.write("\r" + self.line(done) + " " * 4)
            self.out.flush()
        elif force or now - self.last_log >= self.log_every_s or done == self.total:
            self.last_log = now
            print(self.line(done), file=self.out, flush=True)

    def finish(self) -> None:
        if self.quiet:
            return
        self.update(self.total, force=True)
        if self.tty:
            self.out.write("\n")
            self.out.flush()
