"""Progress of long commands: a live line with ETA on a terminal, plain log lines otherwise, nothing with --quiet.

:class:`Progress` renders one counter (ticks replayed, rows written). :class:`StepProgress` drives it for a
command made of a few known steps (``generate``: one Spark write per table), each weighted by its expected row
count, with the Spark tasks of the running step read from ``SparkContext.statusTracker()`` by a poller thread.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TextIO

TaskCounter = Callable[[bool], tuple[int, int]]
"""``counter(final) -> (completed, total)`` tasks of a step's Spark jobs; ``final`` once the step's actions returned."""


def eta_seconds(done: float, total: float, elapsed: float) -> float:
    """Time left at the rate observed so far: ``elapsed / done x (total - done)``; NaN before any progress."""
    return elapsed / done * max(total - done, 0.0) if done > 0 else float("nan")


def steps_done(weights: Sequence[float], step: int, fraction: float) -> float:
    """Units covered when the steps before ``step`` are complete and step ``step`` is ``fraction`` done."""
    return float(sum(weights[:step])) + float(weights[step]) * min(max(fraction, 0.0), 1.0)


class Progress:
    """``update(done)`` reports ``done``/``total`` units (ticks, runs) with the rate and the ETA."""

    def __init__(self, label: str, total: int, unit: str = "ticks", quiet: bool = False, out: TextIO | None = None,
                 log_every_s: float = 15.0, clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.unit, self.quiet = label, max(int(total), 1), unit, quiet
        self.out = out or sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.clock = clock
        self.start = clock()
        self.last_log = 0.0
        self.log_every_s = log_every_s
        self.done = 0
        self.detail = ""
        self.live = 0  # width of the live line on a terminal (0: none drawn)
        self.lock = threading.Lock()

    def line(self, done: int, detail: str = "") -> str:
        elapsed = self.clock() - self.start
        pct = 100.0 * done / self.total
        eta = eta_seconds(done, self.total, elapsed)
        eta_s = f"{eta:.0f}s" if eta == eta else "?"
        text = f"{self.label}: {done}/{self.total} {self.unit} ({pct:.0f}%), {elapsed:.0f}s elapsed, ETA {eta_s}"
        return f"{text} | {detail}" if detail else text

    def update(self, done: int, force: bool = False, detail: str = "") -> None:
        done = min(int(done), self.total)
        if self.quiet or ((done, detail) == (self.done, self.detail) and not force):
            return
        with self.lock:
            self.done, self.detail = done, detail
            now = self.clock()
            if self.tty:
                text = self.line(done, detail)
                self.out.write("\r" + text + " " * max(self.live - len(text), 4))
                self.out.flush()
                self.live = len(text) + 4
            elif force or now - self.last_log >= self.log_every_s or done == self.total:
                self.last_log = now
                print(self.line(done, detail), file=self.out, flush=True)

    def log(self, message: str) -> None:
        """A message line; on a terminal it replaces the live line, which the next update redraws."""
        if self.quiet:
            return
        with self.lock:
            if self.tty and self.live:
                self.out.write("\r" + " " * self.live + "\r")
                self.live = 0
            print(message, file=self.out, flush=True)

    def finish(self, redraw: bool = True) -> None:
        """Report completion (unless ``redraw`` is False) and end the live line on a terminal."""
        if self.quiet:
            return
        if redraw:
            self.update(self.total, force=True, detail=self.detail)
        if self.tty and self.live:
            self.out.write("\n")
            self.out.flush()
            self.live = 0


@dataclass
class StepNote:
    """What a step's body may add to its end line (e.g. the rows it wrote)."""

    text: str = ""


_groups = itertools.count()


class StepProgress:
    """Progress of a command made of known steps, each weighted by its expected rows (so the ETA is overall).

    ``with progress.step(name, spark_context):`` runs one step: its Spark jobs get their own job group, a daemon
    thread polls their tasks every ``poll_s`` seconds (always stopped and joined on exit, even on error) and the
    covered rows are ``steps_done(weights, k, completed / total tasks)``. Each step ends with a forced line.
    """

    def __init__(self, label: str, steps: Sequence[tuple[str, int]], unit: str = "rows", quiet: bool = False,
                 out: TextIO | None = None, log_every_s: float = 15.0, poll_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic):
        self.names = [name for name, _ in steps]
        self.weights = [max(int(rows), 0) for _, rows in steps]
        self.poll_s = poll_s
        self.progress = Progress(label, sum(self.weights), unit, quiet, out, log_every_s, clock)
        self.covered = 0

    def log(self, message: str) -> None:
        self.progress.log(message)

    def _report(self, k: int, tasks: tuple[int, int], fraction: float, force: bool = False, end: str = "") -> None:
        self.covered = max(self.covered, int(steps_done(self.weights, k, fraction)))  # floor: 100 % only at the end
        head = f"step {k + 1}/{len(self.names)} {self.names[k]}"
        self.progress.update(self.covered, force=force,
                             detail=f"{head}{end}, tasks {tasks[0]}/{tasks[1]}")

    @contextmanager
    def step(self, name: str, spark_context: Any = None) -> Iterator[StepNote]:
        """Run step ``name`` (one of the constructor's); its end line adds what the body puts in the note."""
        k = self.names.index(name)
        note = StepNote()
        started = self.progress.clock()
        with spark_job_group(spark_context, f"lbreplay-{name}-{next(_groups)}", name) as count:
            stop = threading.Event()

            def poll() -> None:
                while not stop.wait(self.poll_s):
                    done, total = count(False)
                    # the step's later jobs are not known yet: it is never complete before its actions return
                    self._report(k, (done, total), min(done / total, 0.99) if total else 0.0)

            poller = None
            if not self.progress.quiet:
                poller = threading.Thread(target=poll, name=f"lbreplay-progress-{name}", daemon=True)
                poller.start()
            try:
                yield note
            finally:
                stop.set()
                if poller is not None:
                    poller.join()
            if not self.progress.quiet:
                seconds = self.progress.clock() - started
                extra = f": {note.text}" if note.text else ""
                self._report(k, count(True), 1.0, force=True, end=f" done{extra} in {seconds:.1f}s")

    def close(self) -> None:
        """End the live line on a terminal (the last step's line already showed completion)."""
        self.progress.finish(redraw=False)


@contextmanager
def spark_job_group(spark_context: Any, group: str, description: str) -> Iterator[TaskCounter]:
    """Tag the Spark jobs started by this thread with job group ``group`` (restoring the previous local
    properties on exit) and yield a :data:`TaskCounter` over them (``SparkContext.setJobGroup``,
    ``StatusTracker.getJobIdsForGroup / getJobInfo / getStageInfo``). Without a context the counter is (0, 0)."""
    if spark_context is None:
        yield lambda _final: (0, 0)
        return
    keys = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
    previous = {key: spark_context.getLocalProperty(key) for key in keys}
    spark_context.setJobGroup(group, description)
    tracker = spark_context.statusTracker()
    try:
        yield lambda final: spark_tasks(tracker, group, final)
    finally:
        for key, value in previous.items():
            spark_context.setLocalProperty(key, value)  # None removes it


def spark_tasks(tracker: Any, group: str, final: bool = False, wait_s: float = 2.0) -> tuple[int, int]:
    """(completed, total) tasks of job group ``group``'s jobs, each stage counted once.

    A stage of a finished job that ran no task was skipped (its shuffle output reused): it leaves the total.
    With ``final`` (the group's actions have returned), waits up to ``wait_s`` for the status store -- fed
    asynchronously by the listener bus -- to see every job of the group finish. Never raises: progress must
    not break the command, a failed read counts as (0, 0).
    """
    deadline = time.monotonic() + wait_s
    try:
        while True:
            jobs = [info for info in (tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)) if info]
            running = any(info.status in ("RUNNING", "UNKNOWN") for info in jobs)
            if not (final and running and time.monotonic() < deadline):
                break
            time.sleep(0.05)
        finished: set[int] = set()
        stages: set[int] = set()
        for info in jobs:
            ids = [int(s) for s in info.stageIds]
            stages.update(ids)
            if info.status == "SUCCEEDED":
                finished.update(ids)
        done = total = 0
        for stage in sorted(stages):
            si = tracker.getStageInfo(stage)
            if si is None:
                continue
            completed = int(si.numCompletedTasks)
            done += completed
            total += completed if (stage in finished and completed == 0) else int(si.numTasks)
        return done, total
    except Exception:  # noqa: BLE001 -- a status read must never fail the command
        return 0, 0
