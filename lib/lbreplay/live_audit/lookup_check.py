"""The leader's placements of looked-up bundles against the audit's replay of them.

A recording with placement lines (``leader_placement``, :func:`lbreplay.collect.leader_log.placements`) shows each
lookup the leader placed (``ModularLoadManagerImpl.selectBroker``'s INFO line on a lookup thread), and, when the
class logs at DEBUG, the broker it chose ("Selected broker"). The audit places the same lookups in the same order
(``replay.modular_leader.ModularLeader._lookups``: an ASSIGN each, ``details.logged_at_ms`` the logged time). The
leader's broker is the logged choice, else the broker of the first report after the lookup that lists the bundle
(its owner once the client's lookup made it load it).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lbreplay.collect.leader_log import Placement, logged_by_leader, placements

RECORDED_LOOKUP = "recorded lookup (selectBrokerForAssignment)"  # the audit's ASSIGN reason for a logged lookup


def _ms(ts: datetime) -> int:
    return int(ts.timestamp()) * 1000 + ts.microsecond // 1000


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def leader_lookups(lines: Sequence[str], rows: dict[str, list[dict[str, Any]]]) -> list[Placement]:
    """The lookups the recording's leader logged (not its shedding runs' own choices), in log order: logged by the
    broker the latest recorded election (``leader_election`` rows) elected, as the replay takes them."""
    elected = sorted((_ms(r["ts"]), r["broker"]) for r in rows.get("leader_election", []))
    times, leaders = [t for t, _ in elected], [b for _, b in elected]
    return [p for p in placements(lines) if p.lookup and logged_by_leader(p.broker, p.at_ms, times, leaders)]


def _first_listing(rows: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[list[int], list[str]]]:
    """Per bundle, the times of the reports listing it (sorted) and their brokers (``bundle_load`` rows)."""
    seen = sorted((r["bundle"], _ms(r["ts"]), r["broker"]) for r in rows.get("bundle_load", []))
    out: dict[str, tuple[list[int], list[str]]] = {}
    for bundle, ms, broker in seen:
        times, brokers = out.setdefault(bundle, ([], []))
        times.append(ms)
        brokers.append(broker)
    return out


def leader_broker(p: Placement, listed: dict[str, tuple[list[int], list[str]]]) -> tuple[str | None, str]:
    """Where the leader placed lookup ``p``, and how it is known: ``selected`` (the DEBUG line), ``report`` (the
    first report after it listing the bundle), or None, ``unknown``."""
    if p.selected is not None:
        return p.selected, "selected"
    times, brokers = listed.get(p.bundle, ([], []))
    i = bisect.bisect_right(times, p.at_ms)
    return (brokers[i], "report") if i < len(times) else (None, "unknown")


AuditLookup = tuple[int, str, str | None, tuple[str, ...]]  # logged ms, bundle, the kernel's broker, drawn among


def audit_lookups(spark: Any, lake: str, run_id: str) -> list[AuditLookup]:
    """The audit's placements of the logged lookups: (logged ms, bundle, the kernel's broker, the brokers it drew
    from at random, empty when no draw), in the audit's order."""
    from pyspark.sql import functions as F

    from lbreplay.lake.tables import table_location

    rows = (spark.read.format("delta").load(table_location(lake, "decisions"))
            .where((F.col("run_id") == run_id) & (F.col("action") == "ASSIGN") & (F.col("reason") == RECORDED_LOOKUP))
            .orderBy("seq").select(F.col("details")["logged_at_ms"].alias("at"), "bundle", "target_broker",
                                   "drawn_among").collect())
    return [(int(r["at"]), r["bundle"], r["target_broker"], tuple(r["drawn_among"] or ())) for r in rows]


def lookup_report(lines: Sequence[str], rows: dict[str, list[dict[str, Any]]],
                  audited: Callable[[], list[AuditLookup]]) -> dict[str, Any] | None:
    """How many lookups the leader logged, how many the audit placed (``audited()``, read only when the recording
    holds placement lines), how many of those whose leader's broker is known went there, how many others the
    audit's placement drew at random among brokers holding the leader's (``drawn``: not a difference; the audit's
    preallocation follows a logged "Selected broker"), and each difference; None without placement lines."""
    if not placements(lines):
        return None
    audit = audited()
    logged = leader_lookups(lines, rows)
    listed = _first_listing(rows)
    placed: dict[tuple[int, str], list[tuple[str | None, tuple[str, ...]]]] = {}
    for at, bundle, broker, drawn_among in audit:
        placed.setdefault((at, bundle), []).append((broker, drawn_among))
    compared, same, drawn, differences, missing = 0, 0, 0, [], []
    for p in logged:
        got = placed.get((p.at_ms, p.bundle))
        if not got:
            missing.append(f"{_iso(p.at_ms)} {p.bundle}")
            continue
        mine, among = got.pop(0)
        theirs, via = leader_broker(p, listed)
        if theirs is None:
            continue
        compared += 1
        if mine == theirs:
            same += 1
            continue
        drawn += theirs in among
        differences.append({"at": _iso(p.at_ms), "bundle": p.bundle, "candidates": p.candidates,
                            "leader": theirs, "known_by": via, "audit": mine, "drawn_among": list(among)})
    return {"logged": len(logged), "placed": len(audit), "compared": compared, "same": same, "drawn": drawn,
            "differences": differences, "not_placed": missing}


def render_lookups(report: dict[str, Any] | None) -> list[str]:
    """The LOOKUPS line and each difference (nothing without placement lines)."""
    if not report:
        return []
    drawn = report.get("drawn", 0)
    lines = [f"LOOKUPS: leader logged {report['logged']}, audit placed {report['placed']}; {report['same']} of "
             f"{report['compared']} to the leader's broker (its 'Selected broker' line, else the next report listing "
             f"the bundle), {report['same'] + drawn} counting {drawn} drawn at random among brokers holding it"]
    lines += [f"  lookup not placed: {x}" for x in report["not_placed"]]
    lines += [f"  lookup {d['at']} {d['bundle']} ({d['candidates']} candidates): leader {d['leader']} "
              f"({d['known_by']}), audit {d['audit']}"
              + (f" (drawn among {', '.join(d['drawn_among'])})" if d.get("drawn_among") else "")
              for d in report["differences"]]
    return lines
