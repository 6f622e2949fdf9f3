"""The comparison of the leader's logged decisions (:mod:`lbreplay.collect.leader_log`) with an audit's, per run.

A leader's decision matches the audit's when both name the same action, bundle and source broker and the leader's
line falls within :data:`SAME_RUN_MS` of the audit's tick (``ModularLoadManagerImpl.doLoadShedding`` /
``checkNamespaceBundleSplit`` log a few ms to seconds after the report versions the audit decides on).
"""

from __future__ import annotations

from dataclasses import dataclass

from lbreplay.collect.leader_log import Decision


@dataclass
class Comparison:
    """Per tick, the leader's decisions matched to the audit's (same action, bundle, source broker)."""

    matched: list[tuple[Decision, Decision]]
    leader_only: list[Decision]
    audit_only: list[Decision]
    near: list[tuple[Decision, Decision]]  # same decision, a different tick (listed also as leader/audit-only)

    @property
    def agreement(self) -> float:
        total = len(self.matched) + len(self.leader_only)
        return len(self.matched) / total if total else 1.0

    def summary(self) -> str:
        total = len(self.matched) + len(self.leader_only)
        return (f"matched {len(self.matched)}/{total} of the leader's decisions ({100 * self.agreement:.0f} %), "
                f"{len(self.leader_only)} the audit missed, {len(self.audit_only)} the leader never made")


SAME_RUN_MS = 30_000  # a leader's run logs its decisions seconds after the audit's tick (split calls, lag)


def _same_run(audit: Decision, leader: Decision) -> bool:
    """The same run: the leader's line within 30 s of the audit's tick, whichever minute each falls in (a split
    check whose split calls take seconds logs its later splits seconds after the report's tick, maybe in the next
    minute; an extensible owner's SplitScheduler runs seconds off the leader's minute; runs are a minute apart)."""
    return abs(audit.at_ms - leader.at_ms) < SAME_RUN_MS


def compare(leader: list[Decision], audit: list[Decision], actions: tuple[str, ...] = ("UNLOAD", "SPLIT"),
            near_ticks: int = 2) -> Comparison:
    """Match per tick (:func:`_same_run`) on (action, bundle, source); a SPLIT whose source the log does not name
    matches on bundle."""
    lead = [d for d in leader if d.action in actions]
    aud = [d for d in audit if d.action in actions]
    left = list(aud)
    matched, leader_only = [], []
    for d in lead:
        same = [a for a in left if a.action == d.action and a.bundle == d.bundle
                and (d.source is None or a.source == d.source) and _same_run(a, d)]
        hit = min(same, key=lambda a: abs(a.at_ms - d.at_ms)) if same else None
        if hit is None:
            leader_only.append(d)
        else:
            left.remove(hit)
            matched.append((d, hit))
    near = []
    for d in leader_only:
        a = next((a for a in left if a.action == d.action and a.bundle == d.bundle
                  and (d.source is None or a.source == d.source)
                  and abs(a.tick_ms - d.tick_ms) <= near_ticks * 60_000), None)
        if a is not None:
            near.append((d, a))
    return Comparison(matched, leader_only, left, near)
