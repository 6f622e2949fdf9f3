"""The LOOKUPS comparison (``live_audit.lookup_check``): the leader's logged lookups against the audit's placements,
each difference listed (no Spark: the audit's placements as ``audit_lookups`` returns them)."""

from __future__ import annotations

from pathlib import Path

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.lookup_check import leader_lookups, lookup_report, render_lookups

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
RR = SAMPLES / "real-modular-round-robin-3.0"
B1, B2, B3 = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"


def test_each_lookup_is_compared_with_the_broker_of_the_next_report_listing_it() -> None:
    """The 3.0 leader's first lookup (lb/hot/0x00000000_0x10000000, 3 candidates) went to 18081 by its next report;
    an audit sending it to 18083 and missing the last lookup is told so, line by line; a lookup the audit drew at
    random among brokers holding the leader's is counted as drawn."""
    rows = read_dumps(RR, "rr").rows
    lines = (RR / "leader-decisions.log").read_text(encoding="utf-8").splitlines()
    logged = leader_lookups(lines, rows)
    assert len(logged) == 16
    audit = [(p.at_ms, p.bundle, B3 if k == 0 else None, (B1, B3) if k == 0 else ()) for k, p in enumerate(logged[:-1])]
    report = lookup_report(lines, rows, lambda: audit)
    assert report is not None
    assert (report["logged"], report["placed"], report["compared"]) == (16, 15, 15)
    assert report["not_placed"] == ["2026-11-28T19:57:22.393Z lb/hot/0xb0000000_0xc0000000"]
    assert report["differences"][0] == {"at": "2026-11-28T19:57:13.362Z", "bundle": "lb/hot/0x00000000_0x10000000",
                                        "candidates": 3, "leader": B1, "known_by": "report", "audit": B3,
                                        "drawn_among": [B1, B3]}
    assert report["same"] == 0 and len(report["differences"]) == 15  # the others: the audit placed nothing
    assert report["drawn"] == 1
    text = render_lookups(report)
    assert text[0].startswith("LOOKUPS: leader logged 16, audit placed 15; 0 of 15 to the leader's broker")
    assert text[0].endswith("1 counting 1 drawn at random among brokers holding it")
    assert text[1] == "  lookup not placed: 2026-11-28T19:57:22.393Z lb/hot/0xb0000000_0xc0000000"
    assert text[2] == (f"  lookup 2026-11-28T19:57:13.362Z lb/hot/0x00000000_0x10000000 (3 candidates): leader {B1} "
                       f"(report), audit {B3} (drawn among {B1}, {B3})")


def test_no_placement_line_no_lookups_report() -> None:
    """A recording without placement lines has no LOOKUPS line (and the audit's decisions are not read)."""
    sample = SAMPLES / "real-modular-3brokers"
    lines = (sample / "leader-decisions.log").read_text(encoding="utf-8").splitlines()

    def unread() -> list[tuple[int, str, str | None, tuple[str, ...]]]:
        raise AssertionError("the audit's placements are read only with placement lines")

    assert lookup_report(lines, {}, unread) is None and render_lookups(None) == []
