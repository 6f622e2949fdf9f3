"""SQL views over the output tables, in the ``lbreplay`` database (docs/user-guide.md, "SQL views and example queries").

Every view shows only runs whose ``runs.status`` is ``succeeded`` (a run's rows are complete only then):

* ``moves`` — each UNLOAD / TRANSFER decision with its source, its target and the bundle load it moved. An
  unload without a destination (Pulsar's ``ModularLoadManagerImpl.doLoadShedding`` unloads, the next lookup
  places the bundle) takes its target from the ASSIGN of the same bundle that follows it in the run.
* ``broker_timeline`` — per broker per tick: resource usage, weighted max usage, strategy score, bundle and
  topic counts, and the cluster's mean weighted usage at that tick.
* ``strategy_comparison`` — one row per run: its config (with the effective shedding and placement strategy
  of its ``pulsarVersion``) and its KPIs from ``run_metrics`` as columns (all of them also as a map).

``ensure_views(spark)`` creates or replaces them (idempotent); the report, the replay and the demo call it.
"""

from __future__ import annotations

from typing import Any

from lbreplay.lake.registry import VIEWED, by_name
from lbreplay.lake.tables import DATABASE, RESOURCES, ensure_tables
from lbreplay.report.kpis import KPIS

# run_metrics names promoted to strategy_comparison columns, in order: the KPI registry's stored KPIs.
KPI_METRICS: tuple[str, ...] = tuple(k.metric for k in KPIS if k.derive is None)

VIEW_NAMES: tuple[str, ...] = ("moves", "broker_timeline", "strategy_comparison")
# the tables the views read (registered by ensure_views before it creates them): the registry's ``viewed`` tables
VIEW_TABLES: tuple[str, ...] = tuple(t.name for t in VIEWED)


def _sql_str(value: str) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _effective_key_sql(key: str, config_col: str = "r.config") -> str:
    """SQL for the value of Pulsar ``key`` a run used: the key as given in ``runs.config`` (or one of its
    aliases), else the default of the run's ``pulsarVersion`` (conf/pulsar/defaults.yaml)."""
    from lbreplay.kernel.config import PulsarConfig, _defaults_doc, versions

    aliases = [a for a, k in (_defaults_doc().get("aliases") or {}).items() if k == key]
    given = [f"get_json_object({config_col}, '$.{name}')" for name in (key, *aliases)]
    version = f"coalesce(get_json_object({config_col}, '$.pulsarVersion'), {_sql_str(PulsarConfig.resolve({})['pulsarVersion'])})"
    cases = " ".join(
        f"WHEN {_sql_str(v)} THEN {_sql_str(PulsarConfig.resolve({'pulsarVersion': v})[key])}" for v in versions()
    )
    return f"coalesce({', '.join(given)}, CASE {version} {cases} END)"


def _short(expr: str) -> str:
    """Short class name (``org.apache...ThresholdShedder`` -> ``ThresholdShedder``)."""
    return f"regexp_extract({expr}, '([^.]+)$', 1)"


def view_sql(name: str, database: str = DATABASE) -> str:
    """The ``SELECT`` behind view ``name`` (tables read from ``database``)."""
    db = database
    ok = f"(SELECT run_id FROM {db}.runs WHERE status = 'succeeded')"
    if name == "moves":
        return f"""
WITH d AS (
  SELECT d.*,
         lead(d.action) OVER w AS next_action,
         lead(d.target_broker) OVER w AS next_target,
         lead(d.tick) OVER w AS next_tick,
         lead(d.ts) OVER w AS next_ts
  FROM {db}.decisions d
  WHERE d.action IN ('UNLOAD', 'TRANSFER', 'ASSIGN') AND d.run_id IN {ok}
  WINDOW w AS (PARTITION BY d.run_id, d.bundle ORDER BY d.seq)
)
SELECT d.run_id, d.cluster, d.tick, d.ts, d.seq, d.action, d.bundle,
       regexp_extract(d.bundle, '^(.*)/[^/]*$', 1) AS namespace,
       d.source_broker,
       coalesce(d.target_broker, CASE WHEN d.next_action = 'ASSIGN' THEN d.next_target END) AS target_broker,
       d.target_broker IS NULL AND d.next_action = 'ASSIGN' AS placed_by_assignment,
       CASE WHEN d.target_broker IS NULL AND d.next_action = 'ASSIGN' THEN d.next_tick ELSE d.tick END AS placed_tick,
       CASE WHEN d.target_broker IS NULL AND d.next_action = 'ASSIGN' THEN d.next_ts ELSE d.ts END AS placed_ts,
       d.details['bundleLoad'] AS bundle_load,
       b.msg_rate_in + b.msg_rate_out AS bundle_msg_rate,
       b.msg_throughput_in + b.msg_throughput_out AS bundle_msg_throughput,
       d.strategy, d.reason, d.details
FROM d
LEFT JOIN {db}.bundle_load b
  ON b.cluster = d.cluster AND b.date = to_date(d.ts) AND b.ts = d.ts AND b.bundle = d.bundle
WHERE d.action IN ('UNLOAD', 'TRANSFER')"""
    if name == "broker_timeline":
        pct = ", ".join(f"t.{r}_pct" for r in RESOURCES)
        return f"""
SELECT t.run_id, t.cluster, t.tick, t.ts, t.broker, {pct},
       t.max_usage, t.weighted_max_usage, t.score, t.msg_rate, t.msg_throughput, t.num_bundles, t.num_topics,
       avg(t.weighted_max_usage) OVER (PARTITION BY t.run_id, t.tick) AS cluster_avg_weighted_max_usage,
       count(1) OVER (PARTITION BY t.run_id, t.tick) AS alive_brokers
FROM {db}.broker_ticks t
WHERE t.alive AND t.run_id IN {ok}"""
    if name == "strategy_comparison":
        kpis = ",\n       ".join(f"max(CASE WHEN m.metric = '{k}' THEN m.value END) AS {k}" for k in KPI_METRICS)
        shed = _effective_key_sql("loadBalancerLoadSheddingStrategy")
        place = _effective_key_sql("loadBalancerLoadPlacementStrategy")
        version = _effective_key_sql("pulsarVersion")
        return f"""
SELECT r.run_id, r.cluster, r.mode, r.seed, r.ticks AS run_ticks, r.started_at, r.finished_at,
       {_short(shed)} AS shedding_strategy,
       {_short(place)} AS placement_strategy,
       {version} AS pulsar_version,
       r.config, r.replay_options,
       {kpis},
       map_from_entries(collect_list(CASE WHEN m.metric IS NOT NULL THEN struct(m.metric, m.value) END)) AS metrics
FROM {db}.runs r
LEFT JOIN {db}.run_metrics m ON m.run_id = r.run_id
WHERE r.status = 'succeeded'
GROUP BY r.run_id, r.cluster, r.mode, r.seed, r.ticks, r.started_at, r.finished_at, r.config, r.replay_options"""
    raise KeyError(f"unknown view {name!r}; known: {', '.join(VIEW_NAMES)}")


def ensure_views(spark: Any, lake: str | None = None, database: str = DATABASE) -> list[str]:
    """``CREATE OR REPLACE VIEW`` every view in ``database``; returns their qualified names.

    With ``lake`` (default: the session's ``lbreplay.lake``) the tables they read (``VIEW_TABLES``) are registered
    first, so the views resolve even in a lake that has no run yet. Pass ``lake=""`` to skip that (tables already
    registered)."""
    if lake is None:
        lake = spark.conf.get("lbreplay.lake", None) or ""
    if lake and database == DATABASE:
        ensure_tables(spark, lake, by_name(VIEWED))
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    names = []
    for name in VIEW_NAMES:
        spark.sql(f"CREATE OR REPLACE VIEW {database}.{name} AS {view_sql(name, database)}")
        names.append(f"{database}.{name}")
    return names
