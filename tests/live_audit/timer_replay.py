"""The audit's engine over a committed recording's report versions, on its recorded election's timer, the brokers that
left dropped at their recorded departure (``tick_stream.leader_held_view``, no Spark):
what ``replay --mode observed --broker-conf <the recording's broker.conf>`` decides, tick by tick, on the Pulsar line
the recording's brokers report (``lake.recorded_line``, as the command chooses it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.leader_view import recorded_versions


def replay_on_the_timer(sample: Path, namespaces: list[str], with_leader: bool = True,
                        logged_runs: bool = True) -> tuple[list[Any], list[Any]]:
    """(the ticks, with the timer ticks of the recorded election; the engine's decisions, in order); without
    ``with_leader`` the ticks do not say which broker the election elected, without ``logged_runs`` the timer
    ticks are at the timer minutes, not at the runs the leader's log shows."""
    import numpy as np

    from lbreplay.kernel.config import parse_broker_conf, typed_overrides
    from lbreplay.replay.engine import Replay
    from lbreplay.replay.load_model import CpuCalibration
    from lbreplay.replay.records import RunSpec, StaticInputs
    from lbreplay.replay.tick_stream import leader_held_view
    from tests.live_audit.test_real_sample import _version_ticks
    from tests.replay.recording import recorded_departures, recorded_runs

    conf = typed_overrides(parse_broker_conf((sample / "broker.conf").read_text(encoding="utf-8")), path="broker.conf")
    rows = read_dumps(sample, sample.name).rows
    conf["pulsarVersion"] = recorded_line(rows).line
    brokers = recorded_versions(sample, "brokers")
    ids = sorted(brokers)
    static = StaticInputs(ids, namespaces, CpuCalibration(np.zeros(len(ids)), np.zeros(len(ids))))
    replay = Replay(RunSpec(sample.name, sample.name, "observed", conf), static)
    hold = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    elected = sorted((int(r["ts"].timestamp() * 1000), r["broker"]) for r in rows["leader_election"])
    runs, reads = recorded_runs(rows) if logged_runs else (None, None)
    ticks = list(leader_held_view(iter(_version_ticks(brokers, ids)), len(ids), hold,
                                  elections_ms=[t for t, _ in elected],
                                  leader_brokers=[b for _, b in elected] if with_leader else None, runs_ms=runs,
                                  departures=recorded_departures(rows, ids), reads_ms=reads))
    return ticks, [d for obs in ticks for d in replay.step(obs).decisions]


def recorded_line(rows: dict[str, list[dict[str, Any]]]) -> Any:
    """The line ``replay`` chooses for these ingested rows: ``choose_line`` over their broker_load versions (what
    ``recorded_versions`` reads from the lake)."""
    from lbreplay.lake.recorded_line import VersionSeen, choose_line

    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows["broker_load"]:
        if r.get("broker_version"):
            by.setdefault(r["broker_version"], []).append(r)
    seen = [VersionSeen(v, min(r["ts"] for r in rs), max(r["ts"] for r in rs), len({r["broker"] for r in rs}))
            for v, rs in sorted(by.items())]
    return choose_line(seen, None)


def decision_keys(decisions: list, leader: bool = False) -> list[tuple]:
    """(action, bundle, source, minute) of the SPLIT and UNLOAD decisions, sorted: the leader's (``leader``) or the
    engine's."""
    if leader:
        return sorted((d.action, d.bundle, d.source, d.at_ms // 60_000) for d in decisions
                      if d.action in ("SPLIT", "UNLOAD"))
    return sorted((d.action, d.bundle, d.source_broker, d.ts_ms // 60_000) for d in decisions
                  if d.action in ("SPLIT", "UNLOAD"))


def audit_decisions_of(decided: list) -> list:
    """The engine's decisions as ``audit_check.audit_decisions`` reads them from the ``decisions`` table: UNLOAD
    (TRANSFER), SPLIT and KEEP, each with the brokers its target was drawn from."""
    from lbreplay.live_audit.comparison import AuditDecision

    return [AuditDecision(d.ts_ms, "UNLOAD" if d.action == "TRANSFER" else d.action, d.bundle, d.source_broker,
                          d.target_broker, d.strategy, d.reason,
                          drawn_among=tuple(d.drawn_among) if d.drawn_among is not None else None)
            for d in decided if d.action in ("UNLOAD", "TRANSFER", "SPLIT", "KEEP")]


def counted_with_draws(sample: Path, decided: list) -> dict[str, Any]:
    """``audit_check``'s figures for the engine's decisions against the leader's log (no Spark): the leader's
    decisions, matched, drawn, and the destinations (``audit_check.destinations``), with the differences."""
    from lbreplay.collect.leader_log import owner_kept
    from lbreplay.live_audit.audit_check import destinations, difference_facts, leader_decisions, leader_log, matched_rows
    from lbreplay.live_audit.comparison import compare

    cmp = compare(leader_decisions(sample), audit_decisions_of(decided))
    differences = [facts for facts, _ in difference_facts(cmp, owner_kept(leader_log(sample)), [])]
    report = {"matched_decisions": matched_rows(cmp), "differences": differences}
    return {"leader": len(cmp.matched) + len(cmp.leader_only), "matched": len(cmp.matched),
            "drawn": len(cmp.leader_drawn), "audit_only": len(cmp.audit_only), "audit_drawn": len(cmp.audit_drawn),
            "destinations": destinations(report), "differences": differences}
