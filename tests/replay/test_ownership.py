"""``replay.ownership``: the replay's ownership follows the observed layout (a closed loop's first tick, every
tick of an audit), and its intervals say exactly who owned each bundle at each tick."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lbreplay.replay.ownership import Layout, Ownership
from lbreplay.replay.records import OwnershipInterval

BROKERS = ["b0:8080", "b1:8080", "b2:8080"]
NAMESPACES = ["t/ns"]
BUNDLES = [f"t/ns/0x{k * 0x10000000:08x}_0x{(k + 1) * 0x10000000 - (1 if k == 15 else 0):08x}" for k in range(16)]


def _follow(ticks: list[dict[str, int]]) -> list[OwnershipInterval]:
    """The intervals an audit writes for these observed (bundle -> owner row) ticks."""
    own = Ownership(BROKERS, NAMESPACES)
    intervals = []
    for tick, observed in enumerate(ticks):
        own.begin_tick(tick, 60_000 * tick)
        names = list(observed)
        own.follow(Layout(names, np.array([observed[n] for n in names], dtype=np.int32), NAMESPACES))
        intervals += own.closed
    return intervals + own.finish()


def test_a_moved_bundle_and_one_that_left_close_their_intervals() -> None:
    """Tick 1: b moves from b1 to b0, c leaves the reports, d appears: b's and c's intervals close at tick 1."""
    a, b, c, d = BUNDLES[:4]
    got = sorted((i.bundle, i.broker, i.from_tick, i.to_tick) for i in _follow([{a: 0, b: 1, c: 0}, {a: 0, b: 0, d: 1}]))
    assert got == sorted([(a, "b0:8080", 0, None), (b, "b1:8080", 0, 1), (b, "b0:8080", 1, None),
                          (c, "b0:8080", 0, 1), (d, "b1:8080", 1, None)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(BUNDLES), st.integers(-1, 2), max_size=16), min_size=1, max_size=8))
def test_intervals_say_who_owned_each_bundle_at_each_tick(ticks: list[dict[str, int]]) -> None:
    """For any sequence of observed layouts (bundles appearing, leaving, moving, unowned = -1), each (bundle, tick)
    with an owner lies in exactly one interval, of that owner; no interval covers a tick the bundle was not owned."""
    end = len(ticks)
    covered: dict[tuple[str, int], list[str]] = {}
    for i in _follow(ticks):
        for t in range(i.from_tick, end if i.to_tick is None else i.to_tick):
            covered.setdefault((i.bundle, t), []).append(i.broker)
    want = {(n, t): [BROKERS[o]] for t, observed in enumerate(ticks) for n, o in observed.items() if o >= 0}
    assert covered == want


def _layout(owned: dict[str, int]) -> Layout:
    names = list(owned)
    return Layout(names, np.array([owned[n] for n in names], dtype=np.int32), NAMESPACES)


def test_a_recordings_closed_loop_adopts_the_bundles_its_brokers_first_report() -> None:
    """A recording starts with no bundle reported; the closed loop adopts each bundle with its recorded owner
    when a broker first reports it, and never one overlapping its own layout: the recording's split children of a
    bundle it did not split, or (a held report still listing the parent) the parent of children it holds."""
    parent = "t/ns/0x00000000_0x20000000"
    left, right = "t/ns/0x00000000_0x10000000", "t/ns/0x10000000_0x20000000"
    own = Ownership(BROKERS, NAMESPACES)
    own.begin_tick(0, 0)
    own.follow(_layout({}))
    own.begin_tick(1, 60_000)
    assert own.adopt(_layout({parent: 1, BUNDLES[2]: 2})) == [parent, BUNDLES[2]]
    own.begin_tick(2, 120_000)
    assert own.adopt(_layout({left: 0, right: 0, BUNDLES[2]: 0, BUNDLES[3]: 0})) == [BUNDLES[3]]
    assert dict(zip(own.layout.names, own.layout.owner.tolist())) == {parent: 1, BUNDLES[2]: 2, BUNDLES[3]: 0}
    own.split(parent, [left, right], unload=False)
    own.begin_tick(3, 180_000)
    assert own.adopt(_layout({parent: 2, left: 1, BUNDLES[4]: 1})) == [BUNDLES[4]]  # the parent: nested
    got = sorted((i.bundle, i.broker, i.from_tick) for i in own.finish())
    assert (BUNDLES[4], "b1:8080", 3) in got and (BUNDLES[3], "b0:8080", 2) in got and (left, "b1:8080", 2) in got
