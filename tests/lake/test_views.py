"""The SQL views (lbreplay.lake.views) and the user guide's example queries (docs/user-guide.md).

Two layers: hand-made output rows in a separate database, whose expected view rows are worked out by hand, and
the real replay runs of tests/report_runs.py (the user guide's queries must run and return rows on them).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from lbreplay.kernel.config import PulsarConfig
from lbreplay.lake import tables as T
from lbreplay.lake.views import KPI_METRICS, VIEW_NAMES, VIEW_TABLES, ensure_views, view_sql
from tests.conftest import REPO
from tests.report_runs import BROKERS, LEAVE_AT, ReplayedRuns, replayed_runs

pytestmark = pytest.mark.spark

TEST_DB = "lbreplay_viewtest"
T0 = dt.datetime(2026, 3, 1, 12, 0, 0)


def readme_queries() -> list[str]:
    """The fenced ```sql blocks of docs/user-guide.md's "SQL views and example queries" section (moved there from
    the README)."""
    text = (REPO / "docs" / "user-guide.md").read_text(encoding="utf-8")
    start = text.index("## SQL views and example queries")
    end = text.find("\n## ", start + 1)
    section = text[start:] if end < 0 else text[start:end]
    return [q.strip() for q in re.findall(r"```sql\n(.*?)```", section, flags=re.S)]


# --------------------------------------------------------------------------------------------- hand-made rows
def _ts(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


@pytest.fixture(scope="module")
def hand_views(spark: Any) -> Any:
    """Output tables written by hand into their own database; the views created over them.

    * run ``ok-1`` (succeeded, AvgShedder given by short name): seq 1 UNLOAD b1 A->B at minute 1; seq 2 UNLOAD b2
      from A without destination at minute 2; seq 3 SPLIT b3; seq 4 ASSIGN b2 -> C at minute 3; seq 5 ASSIGN of
      orphan b4 -> C; seq 6 TRANSFER b1 B->A at minute 4.
    * run ``ok-2`` (succeeded, pulsarVersion 2.9, no other key, no metrics); run ``bad`` (failed) with one UNLOAD.
    """
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {TEST_DB}")
    runs = [
        ("ok-1", "c", "closed-loop", '{"loadBalancerLoadSheddingStrategy": "AvgShedder"}', 0, {}, _ts(0), _ts(9),
         "succeeded", 5, "0", "{}"),
        ("ok-2", "c", "closed-loop", '{"pulsarVersion": "2.9"}', 0, {}, _ts(0), _ts(9), "succeeded", 5, "0", "{}"),
        ("bad", "c", "closed-loop", "{}", 0, {}, _ts(0), None, "failed", 0, "0", "{}"),
    ]
    d = lambda tick, seq, action, bundle, src, dst, details=None, run="ok-1": (  # noqa: E731
        run, "c", tick, _ts(tick), seq, action, bundle, src, dst, None, "S", f"why {seq}", details or {}, None)
    decisions = [
        d(1, 1, "UNLOAD", "t/n/b1", "A", "B", {"bundleLoad": 5.0}),
        d(2, 2, "UNLOAD", "t/n/b2", "A", None, {"bundleLoad": 7.0}),
        d(2, 3, "SPLIT", "t/n/b3", "B", "B"),
        d(2, 7, "KEEP", "t/n/b5", "A", "A"),  # a planned bundle the placement kept on its owner: no move
        d(3, 4, "ASSIGN", "t/n/b2", None, "C"),
        d(3, 5, "ASSIGN", "t/n/b4", None, "C"),
        d(4, 6, "TRANSFER", "t/n/b1", "B", "A", {"bundleLoad": 6.0}),
        d(1, 1, "UNLOAD", "t/n/b1", "A", "B", {"bundleLoad": 1.0}, run="bad"),
    ]
    tick = lambda run, t, broker, w, alive=True: (  # noqa: E731
        run, "c", t, _ts(t), broker, 1.0, 1.0, 1.0, 1.0, 1.0, w, w, w, 1.0, 1.0, 3, 30, alive)
    broker_ticks = [
        tick("ok-1", 0, "A", 0.2), tick("ok-1", 0, "B", 0.4), tick("ok-1", 0, "C", 0.9, alive=False),
        tick("ok-1", 1, "A", 0.5), tick("bad", 0, "A", 0.7),
    ]
    metrics = [("ok-1", "unloads", 2.0), ("ok-1", "load_std_mean", 0.1), ("ok-1", "custom_metric", 7.0),
               ("bad", "unloads", 1.0)]
    bundle_load = [("c", _ts(1), "A", "t/n/b1", "t/n", 0, 1, 10.0, 20.0, 100.0, 200.0, 1, 1, 1, 0, _ts(1).date())]
    for table, rows in ((T.RUNS, runs), (T.DECISIONS, decisions), (T.BROKER_TICKS, broker_ticks),
                        (T.RUN_METRICS, metrics), (T.BUNDLE_LOAD, bundle_load)):
        (spark.createDataFrame(rows, table.struct_type()).write.format("parquet").mode("overwrite")
         .saveAsTable(f"{TEST_DB}.{table.name}"))
    names = ensure_views(spark, lake="", database=TEST_DB)
    yield names
    spark.sql(f"DROP DATABASE IF EXISTS {TEST_DB} CASCADE")


def test_ensure_views_creates_every_view(spark: Any, hand_views: list[str]) -> None:
    """ensure_views returns and registers moves, broker_timeline and strategy_comparison."""
    assert hand_views == [f"{TEST_DB}.{v}" for v in VIEW_NAMES]
    got = {r["viewName"] if "viewName" in r.asDict() else r["tableName"]
           for r in spark.sql(f"SHOW VIEWS IN {TEST_DB}").collect() if not r["isTemporary"]}  # session temp views aside
    assert got == set(VIEW_NAMES)


def test_view_tables_are_what_the_views_read() -> None:
    """ensure_views(spark, lake) registers VIEW_TABLES before creating the views: exactly the tables they read."""
    read = {t for v in VIEW_NAMES for t in re.findall(r"\bprobe_db\.(\w+)", view_sql(v, "probe_db"))}
    assert read == set(VIEW_TABLES) and read <= set(T.ALL_TABLES)


def test_moves_resolves_targets_and_skips_failed_runs(spark: Any, hand_views: list[str]) -> None:
    """moves: UNLOAD/TRANSFER only (no SPLIT/ASSIGN/KEEP), nothing of the failed run; the unload without destination
    (seq 2) takes the target of the ASSIGN that follows it (seq 4, minute 3); bundle load from details and the
    observed bundle_load row (10+20 msg/s, 100+200 B/s) where one exists."""
    rows = spark.sql(f"SELECT * FROM {TEST_DB}.moves ORDER BY run_id, seq").collect()
    got = [(r.run_id, r.seq, r.action, r.bundle, r.namespace, r.source_broker, r.target_broker, r.placed_by_assignment,
            r.placed_tick, r.bundle_load, r.bundle_msg_rate, r.bundle_msg_throughput, r.reason) for r in rows]
    assert got == [
        ("ok-1", 1, "UNLOAD", "t/n/b1", "t/n", "A", "B", False, 1, 5.0, 30.0, 300.0, "why 1"),
        ("ok-1", 2, "UNLOAD", "t/n/b2", "t/n", "A", "C", True, 3, 7.0, None, None, "why 2"),
        ("ok-1", 6, "TRANSFER", "t/n/b1", "t/n", "B", "A", False, 4, 6.0, None, None, "why 6"),
    ]
    assert rows[1].placed_ts == _ts(3) and rows[0].placed_ts == _ts(1)


def test_broker_timeline_alive_brokers_of_succeeded_runs(spark: Any, hand_views: list[str]) -> None:
    """broker_timeline: alive rows only (C is dead at tick 0), no rows of the failed run; cluster mean of A and B
    at tick 0 is (0.2 + 0.4) / 2 = 0.3 with 2 alive brokers."""
    rows = spark.sql(f"SELECT run_id, tick, broker, weighted_max_usage, num_bundles, cluster_avg_weighted_max_usage, "
                     f"alive_brokers FROM {TEST_DB}.broker_timeline ORDER BY run_id, tick, broker").collect()
    got = [(r[0], r[1], r[2], r[3], r[4], round(r[5], 9), r[6]) for r in rows]
    assert got == [("ok-1", 0, "A", 0.2, 3, 0.3, 2), ("ok-1", 0, "B", 0.4, 3, 0.3, 2), ("ok-1", 1, "A", 0.5, 3, 0.5, 1)]


def test_strategy_comparison_one_row_per_succeeded_run(spark: Any, hand_views: list[str]) -> None:
    """strategy_comparison: ok-1 runs AvgShedder (given) with the default line's (pulsarVersion default, the newest
    checked line) placement LeastLongTermMessageRate;
    ok-2 gives only pulsarVersion 2.9, whose default shedding strategy is OverloadShedder (conf/pulsar/defaults.yaml,
    Pulsar 2.9 ServiceConfiguration); KPI columns pivot run_metrics, a run without metrics has nulls and an empty
    map; the failed run is absent."""
    rows = {r.run_id: r for r in spark.sql(f"SELECT * FROM {TEST_DB}.strategy_comparison").collect()}
    assert set(rows) == {"ok-1", "ok-2"}
    one, two = rows["ok-1"], rows["ok-2"]
    assert (one.shedding_strategy, one.placement_strategy, one.pulsar_version) == \
        ("AvgShedder", "LeastLongTermMessageRate", PulsarConfig.resolve({})["pulsarVersion"])
    assert (two.shedding_strategy, two.placement_strategy, two.pulsar_version) == \
        ("OverloadShedder", "LeastLongTermMessageRate", "2.9")
    assert (one.unloads, one.load_std_mean, one.splits) == (2.0, 0.1, None)
    assert one.metrics == {"unloads": 2.0, "load_std_mean": 0.1, "custom_metric": 7.0}
    assert two.unloads is None and not two.metrics
    cols = spark.table(f"{TEST_DB}.strategy_comparison").columns
    assert all(k in cols for k in KPI_METRICS)


def test_view_sql_rejects_unknown_view() -> None:
    with pytest.raises(KeyError, match="unknown view"):
        view_sql("nope")


# --------------------------------------------------------------------------------------------- real runs
@pytest.fixture(scope="module")
def runs(spark: Any, lake: str) -> ReplayedRuns:
    return replayed_runs(spark, lake)


_UNLOADS: dict[str, list[int]] = {}


def unload_seqs(spark: Any, run_id: str) -> list[int]:
    """seq of the run's UNLOAD / TRANSFER decisions, read from the decisions table (one query for all runs)."""
    if not _UNLOADS:
        for r in spark.sql("SELECT run_id, seq FROM lbreplay.decisions WHERE action IN ('UNLOAD', 'TRANSFER') "
                           "ORDER BY run_id, seq").collect():
            _UNLOADS.setdefault(r.run_id, []).append(int(r.seq))
    return _UNLOADS.get(run_id, [])


def test_readme_has_the_documented_queries() -> None:
    """The user guide's section documents queries on every view and the ownership-at-a-time query."""
    queries = readme_queries()
    assert len(queries) >= 6
    text = "\n".join(queries)
    for name in (*VIEW_NAMES, "ownership"):
        assert f"lbreplay.{name}" in text


@pytest.mark.parametrize("index", range(len(readme_queries())))
def test_readme_query_runs_and_returns_rows(spark: Any, runs: ReplayedRuns, index: int) -> None:
    """docs/user-guide.md "SQL views and example queries": each ```sql block runs (as `lbreplay sql` runs it) and
    returns rows on the replayed runs."""
    from lbreplay.lake.sql import run_query

    rows = run_query(spark, readme_queries()[index]).limit(50).collect()
    assert rows, readme_queries()[index]


def test_readme_ownership_at_a_time_has_every_bundle_once(spark: Any, runs: ReplayedRuns) -> None:
    """The documented ownership query at 10 minutes into each run: the history has 16 bundles and no split, so
    each run shows each of them exactly once; nothing is owned by a broker that is not in the history."""
    from lbreplay.lake.sql import run_query

    query = next(q for q in readme_queries() if q.startswith("-- Ownership at a point in time"))
    rows = [r for r in run_query(spark, query).collect() if r.run_id in runs.ids]
    for rid in runs.ids:
        bundles = [r.bundle for r in rows if r.run_id == rid]
        assert len(bundles) == 16 and len(set(bundles)) == 16
    assert {r.broker for r in rows} <= set(BROKERS)


def test_moves_of_threshold_run_leave_the_hot_broker(spark: Any, runs: ReplayedRuns) -> None:
    """ThresholdShedder sheds only broker-0 (8 of 16 equal bundles, the others 2 each: the only broker above the
    average plus loadBalancerBrokerThresholdShedderPercentage); every move has a live target other than broker-0,
    and the view has exactly the run's UNLOAD/TRANSFER decisions. Each bundle carries 10 MB/s (5 MB/s in + out)
    and 2000 msg/s in the history."""
    moves = spark.sql(f"SELECT * FROM lbreplay.moves WHERE run_id = '{runs.threshold}' ORDER BY seq").collect()
    assert moves and [m.seq for m in moves] == unload_seqs(spark, runs.threshold)
    assert {m.source_broker for m in moves} == {"broker-0:8080"}
    assert all(m.target_broker in BROKERS and m.target_broker != "broker-0:8080" for m in moves)
    assert all(m.bundle_msg_throughput == 1e7 and m.bundle_msg_rate == 2000.0 for m in moves)


def test_broker_timeline_of_real_run(spark: Any, runs: ReplayedRuns) -> None:
    """broker_timeline on the history: at tick 0 broker-0 holds 8 bundles and the others 2; 5 brokers are alive
    before tick LEAVE_AT and 4 (without broker-4) from then on."""
    rows = spark.sql(f"SELECT tick, broker, num_bundles, alive_brokers FROM lbreplay.broker_timeline "
                     f"WHERE run_id = '{runs.threshold}'").collect()
    at0 = {r.broker: r.num_bundles for r in rows if r.tick == 0}
    assert at0 == {"broker-0:8080": 8, **{b: 2 for b in BROKERS[1:]}}
    assert {r.alive_brokers for r in rows if r.tick < LEAVE_AT} == {5}
    assert {r.alive_brokers for r in rows if r.tick >= LEAVE_AT} == {4}
    assert not [r for r in rows if r.tick >= LEAVE_AT and r.broker == "broker-4:8080"]


def test_strategy_comparison_of_real_runs(spark: Any, runs: ReplayedRuns) -> None:
    """strategy_comparison: the presets' strategies (conf/strategies/*.yaml) and the KPI columns equal run_metrics;
    the unloads KPI equals the run's UNLOAD + TRANSFER decisions."""
    rows = {r.run_id: r for r in spark.sql("SELECT * FROM lbreplay.strategy_comparison").collect()}
    t, a = rows[runs.threshold], rows[runs.avg]
    assert (t.shedding_strategy, t.placement_strategy) == ("ThresholdShedder", "LeastLongTermMessageRate")
    assert (a.shedding_strategy, a.placement_strategy) == ("AvgShedder", "AvgShedder")
    metrics: dict[str, dict[str, float]] = {}
    for r in spark.sql(f"SELECT run_id, metric, value FROM lbreplay.run_metrics WHERE run_id IN "
                       f"('{runs.threshold}', '{runs.avg}')").collect():
        metrics.setdefault(r.run_id, {})[r.metric] = r.value
    for run in (t, a):
        assert set(KPI_METRICS) <= set(metrics[run.run_id])
        for k in KPI_METRICS:
            assert getattr(run, k) == metrics[run.run_id][k] or (getattr(run, k) is None and metrics[run.run_id][k] is None), k
        assert run.metrics == metrics[run.run_id]
        assert run.unloads == len(unload_seqs(spark, run.run_id)) and run.run_ticks == 30
