"""Does lbreplay's audit of a recorded cluster reproduce what its leader decided?

``check(dump, work, cluster, broker_conf)`` runs the real pipeline in one Spark session -- ``ingest`` the
recording, ``validate`` it, ``replay --mode observed --broker-conf`` -- and compares the audit's UNLOAD and SPLIT
decisions with the leader's (``leader-decisions.log`` beside the dump, see :mod:`lbreplay.collect.leader_log`),
per tick: same bundles from the same brokers. When today's validation refuses the raw recording, the report says
which rules and rows, and the audit runs on the leader's view instead (:mod:`lbreplay.live_audit.leader_view`: the
versions held at each shedding time, stale double claims dropped), so the comparison still happens and every
difference is listed with the facts that explain it (the versions the leader held at its decision time, what the
audit's tick held, whether the audit made the same decision at a neighbouring tick).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import io
import json
import math
import shutil
from dataclasses import asdict
from datetime import UTC
from pathlib import Path
from typing import Any

from lbreplay.collect.leader_log import (
    Decision,
    owner_kept,
    parse_leader_log,
    shedding_runs,
    shedding_views,
    transfer_views,
)
from lbreplay.kernel.leader_election import (
    LOGGED_RUN_WITHIN_MS,
    at_logged_runs,
    run_read_times,
    runs_at,
    timer_minutes,
)
from lbreplay.kernel.resource_usage import RESOURCES, java_2f
from lbreplay.kernel.resource_usage import printed_resource_usage as print_usage
from lbreplay.lake.dump_rows import LEADER_LOG, epoch_ms, leader_log_lines
from lbreplay.live_audit.comparison import (
    SAME_RUN_MS,
    AuditDecision,
    Comparison,
    compare,
    destination_drawn,
    drawn_among,
    drawn_cause,
    kept_cause,
)
from lbreplay.live_audit.leader_view import (
    held_at,
    published_versions,
    recorded_versions,
    shedding_phase_ms,
    write_leader_view,
)
from lbreplay.live_audit.lookup_check import audit_lookups, lookup_report, render_lookups

RUN_STEP_MS = 1_000  # a shedding run's lag behind its timer tick moves by at most this since the previous run


def leader_log(dump: Path) -> list[str]:
    """The lines of the dump's leader log (``dump_rows.leader_log_lines``), read once per version of the file (the
    comparison reads them for the decisions, the shedding timer and the explanations)."""
    log = dump / LEADER_LOG
    if not log.is_file():
        return []
    st = log.stat()
    return list(_log_lines(dump, st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=4)
def _log_lines(dump: Path, mtime_ns: int, size: int) -> tuple[str, ...]:
    del mtime_ns, size  # the cache key: a rewritten log is read again
    return tuple(leader_log_lines(dump))


def leader_decisions(dump: Path) -> list[Decision]:
    """The leader's decisions; a SPLIT's source is the broker whose report held the bundle at that time."""
    decisions = parse_leader_log(leader_log(dump))
    brokers = recorded_versions(dump, "brokers")
    out = []
    for d in decisions:
        if d.action == "SPLIT" and d.source is None:
            owners = []
            for broker, versions in brokers.items():
                v = held_at(versions, d.at_ms)
                if v is not None and d.bundle in (json.loads(v.path.read_bytes()).get("lastStats") or {}):
                    owners.append((v.mtime, broker))
            if owners:
                d = Decision(d.at_ms, d.action, d.bundle, max(owners)[1], None, d.strategy, d.line, d.outcome)
        out.append(d)
    return out


def _reports(dump: Path) -> dict[str, list[Any]]:
    """Per broker, its recorded report versions: ``LocalBrokerData`` (modular) or ``BrokerLoadData``."""
    return recorded_versions(dump, "brokers") or published_versions(dump, "broker-load-data")


def _held(dump: Path, t: int) -> dict[str, Any]:
    """Per broker: the report version the leader held at ``t`` and its age."""
    out = {}
    for broker, versions in _reports(dump).items():
        v = held_at(versions, t)
        if v is not None:
            out[broker] = {"version": v.version, "mtime": v.mtime, "age_s": round((t - v.mtime) / 1000, 1)}
    return out


def audit_decisions(spark: Any, lake: str, run_id: str) -> list[Decision]:
    """The audit run's UNLOAD (TRANSFER), SPLIT and KEEP decisions, each with the brokers it was drawn from."""
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import table_location

    rows = (spark.read.format("delta").load(table_location(lake, "decisions"))
            .where((F.col("run_id") == run_id) & F.col("action").isin("UNLOAD", "SPLIT", "TRANSFER", "KEEP"))
            .orderBy("seq").collect())
    return [AuditDecision(int(r["ts"].timestamp() * 1000), "UNLOAD" if r["action"] == "TRANSFER" else r["action"],
                          r["bundle"], r["source_broker"], r["target_broker"], r["strategy"], r["reason"] or "",
                          drawn_among=tuple(r["drawn_among"]) if r["drawn_among"] is not None else None)
            for r in rows]


def _report_tables(rows: dict[str, list[Any]]) -> tuple[str, str]:
    """The recording's (broker, bundle) report tables: modular, or the extensible load manager's."""
    return ("broker_load", "bundle_load") if rows.get("broker_load") else ("broker_load_data_ext",
                                                                            "top_bundles_load_data")


def _bundle_rows(spark: Any, lake: str, cluster: str, ts_ms: int, bundle: str, table: str) -> list[str]:
    """The brokers whose reports written in the minute of ``ts_ms`` list ``bundle``."""
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import table_location

    minute = ts_ms // 60_000 * 60
    rows = (spark.read.format("delta").load(table_location(lake, table))
            .where((F.col("cluster") == cluster) & (F.col("bundle") == bundle)
                   & (F.col("ts") >= F.timestamp_seconds(F.lit(minute)))
                   & (F.col("ts") < F.timestamp_seconds(F.lit(minute + 60))))
            .select("broker").distinct().collect())
    return sorted(r["broker"] for r in rows)


def explain(spark: Any, lake: str, cluster: str, dump: Path, cmp: Comparison, ticks: list[int],
            bundle_table: str = "bundle_load") -> list[dict[str, Any]]:
    """One entry per difference with the facts that explain it."""
    out = []
    for facts, d in difference_facts(cmp, owner_kept(leader_log(dump)), ticks):
        facts["leader_held_at_decision"] = _held(dump, d.at_ms)
        facts["audit_tick_bundle_owners"] = _bundle_rows(spark, lake, cluster, d.tick_ms, d.bundle, bundle_table)
        if d.line:
            facts["log"] = d.line[-300:]
        out.append(facts)
    return out


def difference_facts(cmp: Comparison, kept_lines: list[tuple[int, str, str]], ticks: list[int]
                     ) -> list[tuple[dict[str, Any], Decision]]:
    """Per difference, the facts the comparison and the leader's "same as the current owner" lines give (no
    Spark): its side, the decision, the same decision a tick off, the owner kept by either side, a draw."""
    out = []
    near = {id(d): a for d, a in cmp.near}
    for side, items in (("leader-only", cmp.leader_only), ("audit-only", cmp.audit_only)):
        for d in items:
            facts: dict[str, Any] = {"side": side, "decision": {k: v for k, v in asdict(d).items() if k != "line"},
                                     "tick": _iso(d.tick_ms)}
            if ticks and not ticks[0] <= d.tick_ms <= ticks[-1]:
                facts["cause"] = "outside the audited ticks"
            if side == "leader-only" and id(d) in near:
                a = near[id(d)]
                facts["audit_same_decision_at"] = _iso(a.tick_ms)
            kept = cmp.kept_by_audit(d) if side == "leader-only" else None
            if kept is not None:
                facts.update(audit_kept_at=_iso(kept.at_ms), audit_drawn_among=list(drawn_among(kept)),
                             cause=kept_cause(d, kept), destination_drawn=any(ld is d for ld, _ in cmp.leader_drawn))
            if side == "audit-only":
                twin = next((ld for ld, _a in cmp.near if _a is d), None)
                if twin is not None:
                    facts["leader_same_decision_at"] = _iso(twin.at_ms)
                facts.update(owner_kept_cause(d, kept_lines))
                if any(a is d for a in cmp.audit_drawn):
                    facts.update(audit_drawn_among=list(drawn_among(d)), destination_drawn=True,
                                 cause=drawn_cause(d, "leader_owner_kept_at" in facts))
            out.append((facts, d))
    return out


def matched_rows(cmp: Comparison) -> list[dict[str, Any]]:
    """The report's ``matched_decisions``: each matched decision with both targets and the audit's draw."""
    return [{"tick": _iso(d.tick_ms), "action": d.action, "bundle": d.bundle, "source": d.source,
             "leader_target": d.target, "audit_target": a.target, "audit_drawn_among": list(drawn_among(a)),
             "destination_drawn": destination_drawn(d, a)} for d, a in cmp.matched]


def owner_kept_cause(d: Decision, kept_lines: list[tuple[int, str, str]]) -> dict[str, Any]:
    """An UNLOAD only the audit made that the leader's run shed too, its placement choosing the owner (logged by
    :func:`~lbreplay.collect.leader_log.owner_kept`, within the same run): a destination difference, with its cause;
    else nothing."""
    kept = next((t for t, bundle, owner in kept_lines if d.action == "UNLOAD" and bundle == d.bundle
                 and owner == d.source and abs(t - d.at_ms) < SAME_RUN_MS), None)
    if kept is None:
        return {}
    return {"leader_owner_kept_at": _iso(kept),
            "cause": f"destination: the leader shed it from {d.source} too, but its placement chose the owner (no "
                     f"move, doLoadShedding skips it); the audit's chose {d.target}"}


def after_the_recording(leader: list[Decision], last_tick_ms: int | None, rows: dict[str, list[dict[str, Any]]],
                        broker_table: str) -> tuple[list[Decision], list[Decision]]:
    """(the leader's decisions the audit could make, those it could not): a decision of a timed run whose audit
    tick comes after the recording's last report tick, where the audit's timer ticks stop
    (``tick_stream.with_leader_timer``). An UNLOAD's run is at or after its timer minute (``LoadSheddingTask`` lags
    behind its timer, ``UnloadScheduler`` runs at a fixed rate); where the ingested ``shedding_run`` rows log that
    run (within 30 s of the minute), its tick is at the run's read of ``LoadData`` (``read_at``) or its start, else
    at the minute (``leader_election.at_logged_runs``). An extensible recording's SPLIT comes from its owner's own
    ``SplitScheduler``, whose timer started with that broker (not recorded; seconds from the leader's): the audit
    checks splits at the leader's timer minutes, so the split goes with the nearest one."""
    if last_tick_ms is None:
        return leader, []
    starts = sorted(epoch_ms(r["ts"]) for r in rows.get("leader_election", []))
    runs = sorted(((epoch_ms(r["ts"]), epoch_ms(r["read_at"]) if r.get("read_at") is not None else None)
                   for r in rows.get("shedding_run", [])), key=lambda r: r[0])
    runs_ms, reads_ms = [t for t, _ in runs], [r for _, r in runs]
    timed_splits = broker_table != "broker_load"
    kept: list[Decision] = []
    beyond: list[Decision] = []
    for d in leader:
        start = max((t for t in starts if t <= d.at_ms), default=None)
        tick = None
        if start is not None and d.action == "UNLOAD":
            minute = start + (d.at_ms - start) // 60_000 * 60_000  # its tick as the audit's timer places it
            tick = next(at_logged_runs(iter([(minute, minute)]), runs_ms, reads_ms))[0]
        elif start is not None and d.action == "SPLIT" and timed_splits:  # the owner's timer: the nearest minute
            tick = start + (d.at_ms - start + 30_000) // 60_000 * 60_000
        (beyond if tick is not None and tick > last_tick_ms else kept).append(d)
    return kept, beyond


def _not_audited(d: Decision) -> dict[str, Any]:
    return {"at": _iso(d.at_ms), "action": d.action, "bundle": d.bundle, "source": d.source,
            "cause": "its run (its read of LoadData, or its timer minute) comes after the recording's last "
                     "report tick: no audited run"}


def _iso(ms: int) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _timer_tick(audit: list[int], t: int) -> int | None:
    """The audit's timer tick a logged run (or line) at ``t`` belongs to: the last one at or before it, less than
    30 s back (``leader_election.at_logged_runs``: a run never starts before its timer minute)."""
    i = bisect.bisect_right(audit, t)
    return audit[i - 1] if i and t - audit[i - 1] < LOGGED_RUN_WITHIN_MS else None


def run_lags(audit: list[int], elections: list[int], leader: list[int]) -> list[dict[str, Any]]:
    """Each logged run against the audit's timer: its tick, its lag behind it, and the lag's step since the
    election's previous run. ``LoadSheddingTask.run`` re-schedules itself after each run (fixed delay), so the lag
    grows by each earlier run's duration; ``UnloadScheduler`` runs at a fixed rate, so it stays."""
    out: list[dict[str, Any]] = []
    last: dict[int, int] = {}  # election -> lag of its last run
    for t in leader:
        s = _timer_tick(audit, t)
        if s is None:
            out.append({"run": t, "tick": None, "lag": None, "step": None})
            continue
        election = max((e for e in elections if e <= s), default=0)
        lag = t - s
        out.append({"run": t, "tick": s, "lag": lag, "step": lag - last.get(election, 0)})
        last[election] = lag
    return out


def _shedding_timer(dump: Path, rows: dict[str, list[dict[str, Any]]], broker_conf: Path | None
                    ) -> tuple[list[int], list[int], list[int], list[str], tuple[int, int]] | None:
    """(the audit's timer ticks, the leader's logged runs, the recorded elections, the log's lines, the reports'
    first and last time), or None without reports or a leader log: the timer minutes of the recorded election
    (``kernel.leader_election``) at the shedding interval (``loadBalancerSheddingIntervalMinutes`` of the audit's
    keys), between the first and the last report version."""
    from lbreplay.kernel.config import PulsarConfig
    from lbreplay.replay.run_config import resolve_run_config

    pulsar, _ = resolve_run_config(None, str(broker_conf) if broker_conf else None)  # the audit's keys
    interval = int(PulsarConfig.resolve(pulsar)["loadBalancerSheddingIntervalMinutes"])
    reports = [epoch_ms(r["ts"]) for r in rows.get(_report_tables(rows)[0], [])]
    elections = sorted(epoch_ms(r["ts"]) for r in rows.get("leader_election", []))
    lines = leader_log(dump)
    if not reports or not (dump / LEADER_LOG).is_file():
        return None
    first, last = min(reports), max(reports)
    audit = [t for t, minute in timer_minutes(elections, first, last) if runs_at(minute, interval)]
    leader = [t for t in shedding_runs(lines) if first <= t <= last]
    return audit, leader, elections, lines, (first, last)


def shedding_timer_check(dump: Path, rows: dict[str, list[dict[str, Any]]], broker_conf: Path | None) -> dict[str, Any]:
    """The leader's shedding runs (its log) against the audit's: the timer minutes of the recorded election
    (``kernel.leader_election``) at the shedding interval, between the first and the last report version. A run is
    on the timer when it falls less than 30 s after a tick and its lag moved by at most ``RUN_STEP_MS`` since the
    election's previous run (one run's duration)."""
    timer = _shedding_timer(dump, rows, broker_conf)
    if timer is None:
        return {"leader": 0, "audit": 0}
    audit, leader, elections, lines, (first, last) = timer
    lags = run_lags(audit, elections, leader)
    views = [(t, b, pct) for t, b, pct in shedding_views(lines) if first <= t <= last]
    versions = _reports(dump)
    equal, lagged, other = 0, [], []
    for t, broker, pct in views:
        s = _timer_tick(audit, t)
        held = held_at(versions.get(broker, []), s) if s is not None else None
        if held is not None and printed_resource_usage(json.loads(held.path.read_bytes())) == pct:
            equal += 1
            continue
        # the run came later than its timer minute by the task's earlier runs' durations (fixed delay), and the
        # broker wrote a report in between: the leader read that one
        late = held_at(versions.get(broker, []), t)
        fact = {"run": _iso(t), "timer_minute": _iso(s) if s is not None else None, "broker": broker, "printed": pct}
        if (s is not None and late is not None and s < late.mtime <= t
                and printed_resource_usage(json.loads(late.path.read_bytes())) == pct):
            lagged.append({**fact, "written": _iso(late.mtime), "cause": "report written between the timer minute "
                           "and the run, late by the shedding task's earlier runs' durations (fixed delay)"})
        else:
            other.append(fact)
    # TransferShedder's printed LoadStats: the weightedMaxEMA of the BrokerLoadData held at the audit's timer tick
    loads_printed = [v for v in transfer_views(lines) if first <= v[0] <= last]
    for t, printed, order in loads_printed:
        s = _timer_tick(audit, t)
        at = {b: held_at(vs, s) for b, vs in versions.items()} if s is not None else {}
        loads = {b: float(json.loads(v.path.read_bytes())["weightedMaxEMA"]) for b, v in at.items()
                 if v is not None and v.path.suffix == ".json"}
        expected = load_stats(loads)
        if at and expected == (printed, order):
            equal += 1
        else:
            other.append({"run": _iso(t), "timer_minute": _iso(s) if s is not None else None, "printed": printed,
                          "sorted": ", ".join(order), "held": expected[0], "held_sorted": ", ".join(expected[1])})
    off = [r for r in lags if r["tick"] is None or abs(r["step"]) > RUN_STEP_MS]
    return {"leader": len(leader), "audit": len(audit), "elections": len(elections),
            "leader_on_timer": len(lags) - len(off),
            "max_lag_ms": max((r["lag"] for r in lags if r["lag"] is not None), default=None),
            "max_step_ms": max((abs(r["step"]) for r in lags if r["step"] is not None), default=None),
            "runs_off_timer": [{**r, "run": _iso(r["run"]), "tick": _iso(r["tick"]) if r["tick"] is not None else None}
                               for r in off],
            "views": len(views) + len(loads_printed), "views_equal": equal, "views_written_during_lag": lagged,
            "views_unexplained": other}


def load_stats(loads: dict[str, float]) -> tuple[dict[str, str], list[str]]:
    """TransferShedder's ``LoadStats`` of the brokers' ``weightedMaxEMA`` as its debug line prints them (``%.2f``)
    and the brokers sorted by load (``LoadStats.update`` / ``setLoadDataStore``)."""
    total = sum(loads.values())
    sq = sum(v * v for v in loads.values())
    n = len(loads)
    avg = total / n if n else 0.0
    var = sq / n - avg * avg if n else 0.0
    std = math.sqrt(var) if var >= 0 else math.nan  # Java's Math.sqrt of a rounding-negative variance: NaN
    values = {"sum": total, "sqSum": sq, "avg": avg, "std": std}
    return {k: java_2f(v) for k, v in values.items()}, sorted(loads, key=lambda b: loads[b])


def printed_resource_usage(report: dict[str, Any]) -> dict[str, str]:
    """``LocalBrokerData.printResourceUsage()`` of a report (:func:`kernel.resource_usage.printed_resource_usage`)."""
    usage = [float((report.get(k) or {}).get("usage", 0.0)) for k in RESOURCES]
    limit = [float((report.get(k) or {}).get("limit", 0.0)) for k in RESOURCES]
    return print_usage(usage, limit)


def leader_view_times(dump: Path, rows: dict[str, list[dict[str, Any]]], broker_conf: Path | None) -> list[int] | None:
    """When each of the audit's timer ticks' run read ``LoadData``: its logged run (its first line), or the time of
    the report versions its strategy printed where those are older (``leader_election.run_read_times``, on the
    versions' ZooKeeper times), else the tick itself; None without a recorded election."""
    timer = _shedding_timer(dump, rows, broker_conf)
    if timer is None or not timer[0]:
        return None
    audit, runs, _elections, lines, _span = timer
    versions = {b: [(v.mtime, printed_resource_usage(json.loads(v.path.read_bytes()))) for v in vs]
                for b, vs in recorded_versions(dump, "brokers").items()}
    reads = run_read_times(runs, shedding_views(lines), versions)
    return [t for t, _minute, _lag in at_logged_runs(((s, 0) for s in audit), runs, reads)]


def _ingest_leader_view(spark: Any, lake: str, dump: Path, work: Path, cluster: str, leader: list[Decision],
                        rows: dict[str, list[dict[str, Any]]], broker_conf: Path | None, report: dict[str, Any]) -> str:
    """Write the leader's view (:func:`write_leader_view` at :func:`leader_view_times`), ingest and validate it as
    cluster ``<cluster>-leader-view``; ``report["leader_view"]`` says how."""
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.validation import validate

    view = work / "leader-view"
    shutil.rmtree(view, ignore_errors=True)
    phase = shedding_phase_ms([d.at_ms for d in leader])
    starts = leader_view_times(dump, rows, broker_conf)
    stats = write_leader_view(dump, view, phase, times_ms=starts)
    audited = f"{cluster}-leader-view"
    vd = ingest(spark, lake, view, audited)
    vv = validate(spark, lake, audited)
    report["leader_view"] = {"phase_ms": None if starts else phase,
                             "at": "each shedding run's read of LoadData" if starts else "the decisions' median phase",
                             "ticks": stats.ticks, "rows": {k: len(v) for k, v in vd.rows.items()},
                             "stale_claims_dropped": len(stats.stale_claims_dropped),
                             "stale_claims": stats.stale_claims_dropped[:50],
                             "validation_passed": vv.passed, "validation": vv.details()}
    return audited


def check(dump: Path, work: Path, cluster: str, broker_conf: Path | None, spark: Any = None,
          master: str = "local[2]", lake: str | None = None) -> dict[str, Any]:
    """Run ingest -> validate -> replay --mode observed -> compare; returns the report (also written as JSON)."""
    from lbreplay.errors import LbReplayError
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.validation import validate
    from lbreplay.replay.spark_replay import replay_command
    from lbreplay.spark import get_spark

    lake = lake or str((work / "lake").resolve())
    spark = spark or get_spark(lake, master=master, conf={"spark.sql.shuffle.partitions": "2",
                                                          "spark.ui.enabled": "false"})
    leader = leader_decisions(dump)
    failed = [d for d in parse_leader_log(leader_log(dump), attempts=True) if d.outcome == "failed"]
    report: dict[str, Any] = {"cluster": cluster, "leader_decisions": len(leader),
                              "leader_failed_split_attempts": [f"{_iso(d.at_ms)} {d.bundle}" for d in failed],
                              "leader_unloads": sum(d.action == "UNLOAD" for d in leader),
                              "leader_splits": sum(d.action == "SPLIT" for d in leader)}
    dumped = ingest(spark, lake, dump, cluster)
    report["shedding_runs"] = shedding_timer_check(dump, dumped.rows, broker_conf)
    report["raw"] = {"files": dumped.files, "reports": dumped.reports, "ticks": dumped.ticks,
                     "rows": {k: len(v) for k, v in dumped.rows.items()}}
    raw = validate(spark, lake, cluster)
    report["raw"]["validation_passed"] = raw.passed
    report["raw"]["validation"] = raw.details()
    audited = cluster
    if not raw.passed and _report_tables(dumped.rows)[0] != "broker_load":  # the leader's view is the modular one's
        report["result"] = "not audited: validation refuses the raw recording"
        _write(work, report)
        return report
    if not raw.passed:
        audited = _ingest_leader_view(spark, lake, dump, work, cluster, leader, dumped.rows, broker_conf, report)
        if not report["leader_view"]["validation_passed"]:
            report["result"] = "not audited: validation refuses both the raw recording and the leader's view"
            _write(work, report)
            return report
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            replay_command(audited, None, str(broker_conf) if broker_conf else None, [], "observed", None, None,
                           lake, None, True, window=(None, None))
    except LbReplayError as exc:
        report["result"] = f"replay refused: {exc}"
        _write(work, report)
        return report
    run_id = buf.getvalue().strip().splitlines()[-1]
    audit = audit_decisions(spark, lake, run_id)
    broker_table, bundle_table = _report_tables(dumped.rows)
    ticks = _audited_ticks(spark, lake, audited, broker_table)
    leader, beyond = after_the_recording(leader, ticks[-1] if ticks else None, dumped.rows, broker_table)
    cmp = compare(leader, audit)
    report.update(run_id=run_id,
                  leader_after_the_recording=[_not_audited(d) for d in beyond],
                  audited_cluster=audited, audit_decisions=sum(d.action != "KEEP" for d in audit),
                  audit_kept=sum(d.action == "KEEP" for d in audit), drawn=len(cmp.leader_drawn),
                  agreement_with_draws=round(cmp.agreement_with_draws, 4),
                  audit_unloads=sum(d.action == "UNLOAD" for d in audit),
                  audit_splits=sum(d.action == "SPLIT" for d in audit),
                  matched=len(cmp.matched), agreement=round(cmp.agreement, 4), summary=cmp.summary(),
                  matched_decisions=matched_rows(cmp),
                  differences=explain(spark, lake, audited, dump, cmp, ticks, bundle_table),
                  audited_ticks=[_iso(ticks[0]), _iso(ticks[-1])] if ticks else [])
    report["lookups"] = lookup_report(leader_log(dump), dumped.rows, functools.partial(audit_lookups, spark, lake, run_id))
    report["result"] = "compared"
    _write(work, report)
    return report


def verdict(report: dict[str, Any], require: float) -> list[str]:
    """Why a comparison fails (empty: it passes): the agreement below ``require`` (the leader's decisions the
    audit matched), a decision only the audit made that nothing explains (a ``cause``), a logged shedding run off
    the audit's timer (:func:`run_lags`), a printed report the audit did not hold."""
    if report.get("result") != "compared":
        return [f"not compared: {report.get('result')}"]
    why = []
    agreement = report.get("agreement_with_draws", report["agreement"])  # a destination drawn is not a difference
    if agreement < require:
        why.append(f"agreement {agreement:.0%} < {require:.0%}")
    extra = [d for d in report.get("differences", []) if d["side"] == "audit-only" and not d.get("cause")]
    if extra:
        why.append(f"{len(extra)} decision(s) only the audit made, unexplained")
    runs = report.get("shedding_runs") or {}
    if runs.get("leader_on_timer", 0) != runs.get("leader", 0):
        why.append(f"{runs.get('leader', 0) - runs.get('leader_on_timer', 0)} logged shedding run(s) off the "
                   "audit's timer")
    if runs.get("views_unexplained"):
        why.append(f"{len(runs['views_unexplained'])} printed report(s) not held at the audit's tick")
    return why


def _audited_ticks(spark: Any, lake: str, cluster: str, table: str) -> list[int]:
    """The audited report ticks (epoch ms), in order."""
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import table_location

    return sorted({int(r["ts"].timestamp() * 1000) for r in spark.read.format("delta").load(
        table_location(lake, table)).where(F.col("cluster") == cluster).select("ts").distinct().collect()})


def _write(work: Path, report: dict[str, Any]) -> None:
    from lbreplay.collect.layout import atomic_write_json

    atomic_write_json(work / "report" / "comparison.json", report)


def destinations(report: dict[str, Any]) -> dict[str, int]:
    """The unloads both made whose destination the leader logged, and those with the leader's destination; plus
    the unloads the leader's placement kept on the owner (no move) where the audit's moved the bundle, and those
    the audit's kept (a KEEP) where the leader's moved it. ``drawn``: the different destinations Pulsar's placement
    drew at random among brokers holding the leader's choice (not a difference)."""
    both = [m for m in report.get("matched_decisions", []) if m["action"] == "UNLOAD" and m.get("leader_target")]
    kept = [d for d in report.get("differences", []) if "leader_owner_kept_at" in d]
    audit_kept = [d for d in report.get("differences", []) if "audit_kept_at" in d]
    drawn = sum(bool(m.get("destination_drawn")) for m in both + kept + audit_kept)
    return {"compared": len(both) + len(kept) + len(audit_kept),
            "same": sum(m["leader_target"] == m["audit_target"] for m in both),
            "owner_kept": len(kept), "audit_kept": len(audit_kept), "drawn": drawn}


def render(report: dict[str, Any]) -> str:
    """The report as text: figures first, then every difference."""
    lines = [(f"leader: {report['leader_decisions']} decisions ({report['leader_unloads']} unloads, "
              f"{report['leader_splits']} splits)")]
    raw = report.get("raw", {})
    lines.append(f"raw recording: {raw.get('files')} files, {raw.get('ticks')} ticks; validation "
                 f"{'passed' if raw.get('validation_passed') else 'FAILED'}")
    lines += [f"  {x}" for x in raw.get("validation", [])[:20]]
    if "leader_view" in report:
        lv = report["leader_view"]
        at = (f"shedding phase {lv['phase_ms'] / 1000:.3f} s in the minute" if lv.get("phase_ms") is not None
              else lv.get("at", "each shedding run"))
        lines.append(f"leader's view (at {at}): {lv['ticks']} ticks, "
                     f"{lv['stale_claims_dropped']} stale double claims dropped; validation "
                     f"{'passed' if lv['validation_passed'] else 'FAILED'}")
        lines += [f"  {x}" for x in lv.get("validation", [])[:20]]
    sr = report.get("shedding_runs") or {}
    if sr.get("leader"):
        lines.append(f"shedding runs: leader {sr['leader']}, audit {sr['audit']} (timer of {sr['elections']} recorded "
                     f"election(s)); {sr['leader_on_timer']} of the leader's on it (largest lag "
                     f"{sr['max_lag_ms']} ms, largest step {sr['max_step_ms']} ms); "
                     f"{sr.get('views_equal')} of the {sr.get('views')} reports its strategy printed are those held "
                     "at the audit's timer ticks, "
                     f"{len(sr.get('views_written_during_lag', []))} written during the run's lag, "
                     f"{len(sr.get('views_unexplained', []))} unexplained")
        lines += [f"  OFF THE TIMER: {json.dumps(v)}" for v in sr.get("runs_off_timer", [])]
        lines += [f"  lag: {json.dumps(v)}" for v in sr.get("views_written_during_lag", [])]
        lines += [f"  UNEXPLAINED: {json.dumps(v)}" for v in sr.get("views_unexplained", [])]
    lines.append(f"result: {report.get('result')}")
    if report.get("result") == "compared":
        lines.append(f"audit run {report['run_id']} on {report['audited_cluster']} {report['audited_ticks']}: "
                     + f"{report['audit_decisions']} decisions ({report['audit_unloads']} unloads, "
                     f"{report['audit_splits']} splits)")
        lines.append(f"AGREEMENT: {report['summary']}")
        if "agreement_with_draws" in report:
            lines.append(f"AGREEMENT COUNTING DRAWS: {report['agreement_with_draws']:.0%} ({report['matched']} "
                         f"matched + {report['drawn']} drawn at random; {report['agreement']:.0%} matched only)")
        dest = destinations(report)
        if dest["compared"]:
            lines.append(f"DESTINATIONS: {dest['same']} of {dest['compared']} unloads to the leader's destination, "
                         f"{dest['same'] + dest['drawn']} counting {dest['drawn']} drawn at random "
                         f"({dest['owner_kept']} the leader's placement kept on the owner, the audit's moved; "
                         f"{dest['audit_kept']} the audit's kept, the leader's moved)")
        lines += render_lookups(report.get("lookups"))
        for d in report.get("leader_after_the_recording", []):
            lines.append(f"  not audited: {d['at']} {d['action']} {d['bundle']} from {d['source']} ({d['cause']})")
        for m in report["matched_decisions"]:
            lines.append(f"  = {m['tick']} {m['action']} {m['bundle']} from {m['source']}")
        for d in report["differences"]:
            dec = d["decision"]
            lines.append(f"  {'-' if d['side'] == 'leader-only' else '+'} [{d['side']}] {d['tick']} {dec['action']} "
                         f"{dec['bundle']} from {dec['source']} to {dec['target']}")
            for k in ("cause", "audit_same_decision_at", "leader_same_decision_at", "leader_owner_kept_at",
                      "audit_kept_at", "audit_drawn_among",
                      "audit_tick_bundle_owners", "leader_held_at_decision"):
                if k in d:
                    lines.append(f"      {k}: {json.dumps(d[k])}")
    return "\n".join(lines)
