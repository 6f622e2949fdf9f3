"""``kernel.leader_election``: the timer minutes of the leader's timed tasks (PulsarService.startLoadBalancerTasks:
LoadSheddingTask and LoadResourceQuotaUpdaterTask, both started at the election, both in whole minutes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lbreplay.kernel.leader_election import MINUTE_MS, count_timer_minutes, runs_at, timer_minutes


def test_timer_minutes_follow_each_election_until_the_next() -> None:
    got = list(timer_minutes([10_000, 200_000], 0, 400_000))
    assert got == [(70_000, 1), (130_000, 2), (190_000, 3), (260_000, 1), (320_000, 2), (380_000, 3)]
    assert list(timer_minutes([10_000], 130_000, 190_000)) == [(130_000, 2), (190_000, 3)]  # both ends inclusive
    assert list(timer_minutes([10_000], 130_001, 189_999)) == []


def test_a_task_runs_one_interval_after_the_election_then_every_interval() -> None:
    """LoadSheddingTask.start schedules the first run one interval after the election; LoadResourceQuotaUpdaterTask
    is at a fixed rate from one interval on: both at the multiples of their interval, never at the election."""
    assert [m for m in range(0, 8) if runs_at(m, 1)] == [1, 2, 3, 4, 5, 6, 7]
    assert [m for m in range(0, 46) if runs_at(m, 15)] == [15, 30, 45]
    assert [m for m in range(0, 3) if runs_at(m, 0)] == [1, 2]


@given(st.lists(st.integers(-10**7, 10**7), min_size=1, max_size=5), st.integers(-10**7, 10**7),
       st.integers(0, 10**7))
def test_timer_minutes_properties(elections: list[int], first: int, span: int) -> None:
    """Every timer minute is a whole number (>= 1) of minutes after the latest election before it, inside
    [first, first + span], in time order, and the count the driver uses is the number the task makes."""
    last = first + span
    got = list(timer_minutes(elections, first, last))
    assert [t for t, _ in got] == sorted({t for t, _ in got})
    for t, minute in got:
        assert first <= t <= last and minute >= 1
        latest = max(e for e in elections if e < t)
        assert t == latest + minute * MINUTE_MS
    assert count_timer_minutes(elections, first, last) == len(got)
    # and none is missed: each whole minute after the latest election in the range is there
    expected = {e + k * MINUTE_MS for e in set(elections) for k in range(1, span // MINUTE_MS + 2 + abs(first - e) // MINUTE_MS)
                if first <= e + k * MINUTE_MS <= last and max(x for x in elections if x <= e + k * MINUTE_MS) == e}
    assert {t for t, _ in got} == expected

