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



def test_a_timer_minute_goes_to_its_logged_run() -> None:
    """The live run committed as data/samples/real-modular-shedding-lag: LoadSheddingTask's runs came 66, 296, 325
    ms after their timer minutes (each run's admin calls delay the next: fixed delay). A timer minute takes the
    first logged run within 30 s after it and says its lag; a minute without one stays, lag None."""
    from lbreplay.kernel.leader_election import at_logged_runs

    minutes = [(60_000, 1), (120_000, 2), (180_000, 3), (240_000, 4)]
    runs = [60_066, 120_296, 180_325, 275_000]  # no run logged within 30 s of the fourth minute
    assert list(at_logged_runs(iter(minutes), runs)) == [
        (60_066, 1, 66), (120_296, 2, 296), (180_325, 3, 325), (240_000, 4, None)]
    assert list(at_logged_runs(iter(minutes[:1]), [])) == [(60_000, 1, None)]


@given(st.integers(0, 10**6), st.integers(1, 40), st.lists(st.integers(0, 29_999), min_size=1, max_size=40),
       st.integers(0, 40 * MINUTE_MS))
def test_counting_the_ticks_at_logged_runs(elected: int, n: int, lags: list[int], span: int) -> None:
    """With logged runs, the ticks the driver counts between two times are those the stream yields there: each
    minute at its run (never more than 30 s late), still in time order."""
    from lbreplay.kernel.leader_election import at_logged_runs

    runs = [elected + (k + 1) * MINUTE_MS + lags[k % len(lags)] for k in range(n)]
    first, last = elected, elected + span
    ticks = [t for t, _m, _lag in at_logged_runs(timer_minutes([elected], first, last + MINUTE_MS), runs)]
    assert ticks == sorted(ticks)
    assert count_timer_minutes([elected], first, last, runs) == sum(1 for t in ticks if t <= last)


def test_a_run_reads_the_reports_its_strategy_printed() -> None:
    """CI, 2026-11-28 (the trimmed live run): broker C wrote a report a few ms before the leader's 13:43 run's
    lines, but ThresholdShedder printed C's previous report ("broker is not overloaded" prints the report it read):
    ``updateAll`` (another thread, not synchronized with ``doLoadShedding``) had not applied the write yet. The run
    read at the latest time every printed report is the one held: 1 ms before C's newer write. A run whose prints
    are the latest reports, or that printed a report never written, keeps its logged time (None)."""
    from lbreplay.kernel.leader_election import run_read_times

    old, new, other = {"cpu": "7.10"}, {"cpu": "9.40"}, {"cpu": "3.00"}
    versions = {"A": [(1_000, other)], "C": [(52_000, old), (112_600, new)]}
    runs = [52_500, 112_700, 172_700]
    views = [(52_510, "A", other), (52_511, "C", old),  # run 1: what it held
             (112_710, "A", other), (112_712, "C", old),  # run 2: C's previous report, its newer one 112 ms before
             (172_710, "C", {"cpu": "1.23"})]  # run 3: a print no report has
    assert run_read_times(runs, views, versions) == [None, 112_599, None]
    assert run_read_times(runs, [], versions) == [None, None, None]


def test_a_timer_minute_at_its_logged_run_or_at_what_it_read() -> None:
    from lbreplay.kernel.leader_election import at_logged_runs

    minutes = [(60_000, 1), (120_000, 2)]
    assert list(at_logged_runs(iter(minutes), [60_066, 120_296], [None, 119_950])) == [
        (60_066, 1, 66), (119_950, 2, 296)]  # the lag stays the run's
