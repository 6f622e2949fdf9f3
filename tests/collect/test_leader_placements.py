"""The placements the brokers logged (``ModularLoadManagerImpl.selectBroker``), parsed from the committed samples'
leader logs and from the DEBUG line that names the chosen broker."""

from __future__ import annotations

from pathlib import Path

from lbreplay.collect.leader_log import Placement, is_leader_log_line, placements

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
B1, B2, B3 = "127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"


def _lines(sample: str) -> list[str]:
    return (SAMPLES / sample / "leader-decisions.log").read_text(encoding="utf-8").splitlines()


def test_the_3_0_leaders_16_lookups_then_its_shedding_runs_destinations() -> None:
    """The 3.0.7 leader (18082) logged 16 lookups at start-up on a lookup thread (``pulsar-2-1``), 3, 2, 1
    candidates in turn (``removeMostServicingBrokersForNamespace``), then 5 destination choices of its shedding runs
    on ``pulsar-load-manager-1-1``."""
    found = placements(_lines("real-modular-round-robin-3.0"))
    assert len(found) == 21
    lookups = [p for p in found if p.lookup]
    assert len(lookups) == 16 and {(p.broker, p.thread) for p in lookups} == {(B2, "pulsar-2-1")}
    assert [p.candidates for p in lookups] == [3, 2, 1] * 5 + [3]
    assert lookups[0] == Placement(1795895833362, B2, "pulsar-2-1", "lb/hot/0x00000000_0x10000000", 3)
    assert lookups[-1].bundle == "lb/hot/0xb0000000_0xc0000000"
    shed = [p for p in found if not p.lookup]
    assert [(p.bundle, p.candidates) for p in shed] == [
        ("lb/hot/0x60000000_0x70000000", 2), ("lb/hot/0x70000000_0x78000000", 1),
        ("lb/hot/0x70000000_0x74000000", 1), ("lb/hot/0x70000000_0x74000000", 1),
        ("lb/hot/0x70000000_0x74000000", 1)]
    assert all(p.selected is None for p in found)  # the class logged at INFO: no "Selected broker" line


def test_the_overload_shedder_leaders_placements_are_its_runs_own() -> None:
    """The OverloadShedder sample's 13 placement lines are all its leader's shedding runs' (no lookup)."""
    found = placements(_lines("real-modular-overload-shedder"))
    assert len(found) == 13 and not any(p.lookup for p in found)
    assert {p.broker for p in found} == {B3} and found[0].bundle == "lb/hot/0x90000000_0xa0000000"
    assert [p.candidates for p in found] == [2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 2, 1]


def test_the_selected_broker_line_names_the_choice_of_its_own_thread() -> None:
    """The DEBUG ``Selected broker Optional[<b>] from candidate brokers [...]`` goes to the last placement of the
    same broker and thread (another thread's placement in between keeps its own); ``Optional.empty``: none."""
    lines = [
        f"{B2} 2026-11-28T19:57:13,362+0000 [pulsar-2-1] INFO  org.apache.pulsar.broker.loadbalance.impl."
        "ModularLoadManagerImpl - 3 brokers being considered for assignment of lb/hot/0x00000000_0x10000000",
        f"{B2} 2026-11-28T19:57:13,362+0000 [pulsar-2-2] INFO  org.apache.pulsar.broker.loadbalance.impl."
        "ModularLoadManagerImpl - 2 brokers being considered for assignment of lb/hot/0x10000000_0x20000000",
        f"{B2} 2026-11-28T19:57:13,363+0000 [pulsar-2-1] DEBUG org.apache.pulsar.broker.loadbalance.impl."
        f"ModularLoadManagerImpl - Selected broker Optional[{B3}] from candidate brokers [{B1}, {B2}, {B3}]",
        f"{B2} 2026-11-28T19:57:13,364+0000 [pulsar-2-2] DEBUG org.apache.pulsar.broker.loadbalance.impl."
        f"ModularLoadManagerImpl - Selected broker Optional.empty from candidate brokers [{B1}, {B2}]",
    ]
    assert all(is_leader_log_line(line) for line in lines)
    found = placements(lines)
    assert [(p.bundle, p.candidates, p.selected, p.lookup) for p in found] == [
        ("lb/hot/0x00000000_0x10000000", 3, B3, True), ("lb/hot/0x10000000_0x20000000", 2, None, True)]
