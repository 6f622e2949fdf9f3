"""The modular leader's timed tasks, started when a broker becomes leader.

``PulsarService.startLeaderElectionService``: on ``LeaderElectionState.Leading`` the broker runs
``startLoadBalancerTasks``, which starts ``LoadSheddingTask`` (its first run ``loadBalancerSheddingIntervalMinutes``
after the election, each next one the same delay after the last: ``LoadSheddingTask.run`` re-schedules itself) and
``LoadResourceQuotaUpdaterTask`` (fixed rate, ``loadBalancerResourceQuotaUpdateIntervalMinutes``). Both intervals
are whole minutes, so every run of either falls on a whole minute after the election: the leader's *timer
minutes*. A shedding run's own duration delays the next one (fixed delay): a replay adds the durations of the
task's earlier runs since the election (``modular_load_manager.RunClock``: 1 ms per step) to each run's start.
The real durations (an unload is an admin call: tens to hundreds of ms) are known only from the leader's log:
where it shows when a run started (:func:`at_logged_runs`), that time replaces the modelled one.
A new election (another broker, or the same one again) starts both tasks afresh.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Mapping, Sequence

MINUTE_MS = 60_000
LOGGED_RUN_WITHIN_MS = 30_000  # a logged run this close after a timer minute is that minute's


def timer_minutes(elections_ms: Sequence[int], first_ms: int, last_ms: int | None = None) -> Iterator[tuple[int, int]]:
    """``(time, minutes since the election)`` of every whole minute after each election, from ``first_ms`` to
    ``last_ms`` (both inclusive; no end when None), in time order; each election's until the next one."""
    elections = sorted(set(elections_ms))
    for i, elected in enumerate(elections):
        until = elections[i + 1] if i + 1 < len(elections) else None
        minute = max(1, -(-(first_ms - elected) // MINUTE_MS))  # the first whole minute at or after first_ms
        while True:
            t = elected + minute * MINUTE_MS
            if (until is not None and t >= until) or (last_ms is not None and t > last_ms):
                break
            yield t, minute
            minute += 1


def at_logged_runs(minutes: Iterator[tuple[int, int]], runs_ms: Sequence[int],
                   reads_ms: Sequence[int | None] | None = None) -> Iterator[tuple[int, int, int | None]]:
    """``(time, minute, lag)`` for each timer minute of ``minutes``: where the leader's log shows a run starting
    within 30 s after it (``runs_ms``, sorted; a run never starts before its timer minute), that run's time (or,
    where ``reads_ms`` gives one, the time of the reports it read: :func:`run_read_times`) and its lag behind the
    minute; else the minute itself and None."""
    for t, minute in minutes:
        i = bisect.bisect_left(runs_ms, t)
        if i < len(runs_ms) and runs_ms[i] - t < LOGGED_RUN_WITHIN_MS:
            read = reads_ms[i] if reads_ms is not None and i < len(reads_ms) else None
            yield (runs_ms[i] if read is None else read), minute, runs_ms[i] - t
        else:
            yield t, minute, None


def run_read_times(runs_ms: Sequence[int], views: Sequence[tuple[int, str, dict[str, str]]],
                   versions: Mapping[str, Sequence[tuple[int, dict[str, str]]]]) -> list[int | None]:
    """Per logged run (``runs_ms``, sorted): the latest time at which every report its strategy printed is the one
    held, where that is before what the run's lines would hold -- else None.

    ``LoadSheddingTask`` reads ``LoadData`` while ``updateAll`` applies each report write on another thread
    (``ModularLoadManagerImpl`` does not synchronize the two), so a report written a few ms before a run may not be
    in it yet. ``ThresholdShedder`` prints, per broker it finds not overloaded, the report it read
    (``printResourceUsage()``, DEBUG): ``views`` (line time, broker, printed) pins those versions. ``versions``:
    per broker, its reports (time, printed) in time order. A run whose printed report matches none held is left
    as logged (None)."""
    out: list[int | None] = [None] * len(runs_ms)
    for i, run in enumerate(runs_ms):
        end = runs_ms[i + 1] if i + 1 < len(runs_ms) else None
        lo, hi, usable = run - LOGGED_RUN_WITHIN_MS, None, True
        for t, broker, printed in views:
            if t < run or (end is not None and t >= end):
                continue
            held = [v for v in versions.get(broker, ()) if v[0] <= t]
            match = next((j for j in range(len(held) - 1, -1, -1) if held[j][1] == printed), None)
            if not held or match is None:
                usable = usable and not held  # a broker with no report yet says nothing
                continue
            lo = max(lo, held[match][0])
            if match < len(held) - 1:  # a newer report than the one it read was written before the line
                hi = held[match + 1][0] - 1 if hi is None else min(hi, held[match + 1][0] - 1)
        if usable and hi is not None and lo <= hi:
            out[i] = hi
    return out


def count_timer_minutes(elections_ms: Sequence[int], first_ms: int, last_ms: int,
                        runs_ms: Sequence[int] = (), reads_ms: Sequence[int | None] | None = None) -> int:
    """How many timer ticks fall from ``first_ms`` to ``last_ms``: the timer minutes of :func:`timer_minutes`,
    each at its logged run where ``runs_ms`` shows one, or at what it read (``reads_ms``; :func:`at_logged_runs`)."""
    ticks = at_logged_runs(timer_minutes(elections_ms, first_ms), runs_ms, reads_ms)  # in time order
    return sum(1 for _ in itertools.takewhile(lambda tick: tick[0] <= last_ms, ticks))


def runs_at(minute: int, interval_minutes: int) -> bool:
    """Does a task of ``interval_minutes`` run at timer minute ``minute``? (Its first run is one interval after
    the election; an interval of 0 re-schedules it at once, so it runs at every timer minute.)"""
    return minute > 0 and (interval_minutes <= 0 or minute % interval_minutes == 0)
