"""The comparison of the leader's logged decisions (:mod:`lbreplay.collect.leader_log`) with an audit's, per run.

A leader's decision matches the audit's when both name the same action, bundle and source broker and the leader's
line falls within :data:`SAME_RUN_MS` of the audit's tick (``ModularLoadManagerImpl.doLoadShedding`` /
``checkNamespaceBundleSplit`` log a few ms to seconds after the report versions the audit decides on).

A destination Pulsar's placement drew at random (``LeastLongTermMessageRate`` / ``LeastResourceUsageWithWeight``
``selectBroker``: ``ThreadLocalRandom`` among equally good brokers; AvgShedder's ``getExpectedBroker``) is not a
difference: the audit records the brokers it drew among (``decisions.drawn_among``, and a KEEP row where its
placement drew the owner) and a leader's choice among them counts as drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lbreplay.collect.leader_log import Decision


@dataclass(frozen=True)
class AuditDecision(Decision):
    """An audit's decision (the ``decisions`` table's row), with the brokers its target was drawn from at random
    (``drawn_among``; None: no draw). ``action`` may be ``KEEP``: doLoadShedding's placement chose the owner."""

    drawn_among: tuple[str, ...] | None = field(default=None, compare=False)


def drawn_among(d: Decision) -> tuple[str, ...]:
    """The brokers ``d``'s target was drawn from (empty: no draw, or a leader's decision)."""
    return getattr(d, "drawn_among", None) or ()


@dataclass
class Comparison:
    """Per tick, the leader's decisions matched to the audit's (same action, bundle, source broker)."""

    matched: list[tuple[Decision, Decision]]
    leader_only: list[Decision]
    audit_only: list[Decision]
    near: list[tuple[Decision, Decision]]  # same decision, a different tick (listed also as leader/audit-only)
    # a leader-only UNLOAD and the audit's KEEP of its bundle and source in the same run (the audit's placement chose
    # the owner); listed also as leader-only
    audit_kept: list[tuple[Decision, Decision]] = field(default_factory=list)
    # audit-only UNLOADs whose destination was drawn among brokers holding its own source (the leader could have
    # drawn the owner and kept it); listed also as audit-only
    audit_drawn: list[Decision] = field(default_factory=list)

    @property
    def leader_drawn(self) -> list[tuple[Decision, Decision]]:
        """The leader-only UNLOADs counted as drawn: the audit kept the bundle on the owner by a draw among brokers
        that holds the leader's destination."""
        return [(d, k) for d, k in self.audit_kept if d.target is not None and d.target in drawn_among(k)]

    def kept_by_audit(self, d: Decision) -> Decision | None:
        """The audit's KEEP paired with the leader-only UNLOAD ``d`` (:attr:`audit_kept`), or None."""
        return next((k for ld, k in self.audit_kept if ld is d), None)

    @property
    def agreement(self) -> float:
        total = len(self.matched) + len(self.leader_only)
        return len(self.matched) / total if total else 1.0

    @property
    def agreement_with_draws(self) -> float:
        """The leader's decisions the audit matched or drew differently (:attr:`leader_drawn`), of all of them."""
        total = len(self.matched) + len(self.leader_only)
        return (len(self.matched) + len(self.leader_drawn)) / total if total else 1.0

    def summary(self) -> str:
        total = len(self.matched) + len(self.leader_only)
        drawn = len(self.leader_drawn)
        return (f"matched {len(self.matched)}/{total} of the leader's decisions ({100 * self.agreement:.0f} %), "
                f"{drawn} more drawn at random ({100 * self.agreement_with_draws:.0f} % counting draws), "
                f"{len(self.leader_only) - drawn} the audit missed, {len(self.audit_only)} the leader never made "
                f"({len(self.audit_drawn)} of them drawn)")


SAME_RUN_MS = 30_000  # a leader's run logs its decisions seconds after the audit's tick (split calls, lag)


def _same_run(audit: Decision, leader: Decision) -> bool:
    """The same run: the leader's line within 30 s of the audit's tick, whichever minute each falls in (a split
    check whose split calls take seconds logs its later splits seconds after the report's tick, maybe in the next
    minute; an extensible owner's SplitScheduler runs seconds off the leader's minute; runs are a minute apart)."""
    return abs(audit.at_ms - leader.at_ms) < SAME_RUN_MS


def compare(leader: list[Decision], audit: list[Decision], actions: tuple[str, ...] = ("UNLOAD", "SPLIT"),
            near_ticks: int = 2) -> Comparison:
    """Match per tick (:func:`_same_run`) on (action, bundle, source); a SPLIT whose source the log does not name
    matches on bundle. The audit's KEEP rows pair with the leader-only UNLOADs of their bundle and source in the
    same run (:attr:`Comparison.audit_kept`); an audit-only UNLOAD drawn among brokers holding its source is
    :attr:`Comparison.audit_drawn`."""
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
    keeps = [a for a in audit if a.action == "KEEP"]
    audit_kept = []
    for d in leader_only:
        k = next((k for k in keeps if d.action == "UNLOAD" and k.bundle == d.bundle and k.source == d.source
                  and _same_run(k, d)), None)
        if k is not None:
            keeps.remove(k)
            audit_kept.append((d, k))
    audit_drawn = [a for a in left if a.action == "UNLOAD" and a.source in drawn_among(a)]
    return Comparison(matched, leader_only, left, near, audit_kept, audit_drawn)


def destination_drawn(leader: Decision, audit: Decision) -> bool:
    """A matched UNLOAD whose leader destination differs from the audit's but is among the brokers the audit's
    placement drew from."""
    return leader.target is not None and leader.target != audit.target and leader.target in drawn_among(audit)



def kept_cause(d: Decision, kept: Decision) -> str:
    """The cause of the leader-only UNLOAD ``d`` the audit kept on the owner (its KEEP ``kept``): a destination
    drawn (no difference) when the audit's placement drew the owner among brokers holding the leader's
    destination, else a destination difference."""
    among = drawn_among(kept)
    if d.target is None or d.target not in among:
        return (f"destination: the audit shed it from {d.source} too, but its placement chose the owner (no move, "
                f"doLoadShedding skips it); the leader's chose {d.target}")
    return (f"destination: drawn at random: the audit shed it from {d.source} too, its placement drew the owner among "
            f"{', '.join(among)} (ThreadLocalRandom), the leader's drew {d.target}")


def drawn_cause(d: Decision, leader_kept: bool) -> str:
    """Why an audit-only UNLOAD drawn among brokers holding its own source (:attr:`Comparison.audit_drawn`) is no
    difference: the leader could have drawn the owner; ``leader_kept``: its log says it did ("The destination
    broker … is the same as the current owner")."""
    said = ("the leader logged \"the same as the current owner\" for it" if leader_kept
            else "the leader could have drawn the owner and kept it")
    return (f"destination: drawn at random: the audit's placement drew {d.target} among {', '.join(drawn_among(d))} "
            f"(ThreadLocalRandom), which holds the owner {d.source}; {said}")
