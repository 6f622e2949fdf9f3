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
from collections.abc import Iterator, Sequence

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


def at_logged_runs(minutes: Iterator[tuple[int, int]], runs_ms: Sequence[int]
                   ) -> Iterator[tuple[int, int, int | None]]:
    """``(time, minute, lag)`` for each timer minute of ``minutes``: where the leader's log shows a run starting
    within 30 s after it (``runs_ms``, sorted; a run never starts before its timer minute), that run's time and
    its lag behind the minute; else the minute itself and None."""
    for t, minute in minutes:
        i = bisect.bisect_left(runs_ms, t)
        if i < len(runs_ms) and runs_ms[i] - t < LOGGED_RUN_WITHIN_MS:
            yield runs_ms[i], minute, runs_ms[i] - t
        else:
            yield t, minute, None


def count_timer_minutes(elections_ms: Sequence[int], first_ms: int, last_ms: int,
                        runs_ms: Sequence[int] = ()) -> int:
    """How many timer ticks fall from ``first_ms`` to ``last_ms``: the timer minutes of :func:`timer_minutes`,
    each at its logged run where ``runs_ms`` shows one (:func:`at_logged_runs`)."""
    ticks = at_logged_runs(timer_minutes(elections_ms, first_ms), runs_ms)  # in time order: a shift is < 30 s
    return sum(1 for _ in itertools.takewhile(lambda tick: tick[0] <= last_ms, ticks))


def runs_at(minute: int, interval_minutes: int) -> bool:
    """Does a task of ``interval_minutes`` run at timer minute ``minute``? (Its first run is one interval after
    the election; an interval of 0 re-schedules it at once, so it runs at every timer minute.)"""
    return minute > 0 and (interval_minutes <= 0 or minute % interval_minutes == 0)
