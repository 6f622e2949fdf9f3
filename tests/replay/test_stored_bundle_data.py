"""The stored BundleData the leader reads for a bundle it holds none for (ModularLoadManagerImpl.updateBundleData
-> getBundleDataOrDefaultAsync), as lbreplay.replay.stored_bundle_data keeps it."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from lbreplay.kernel.load_data import Bundles, tamd_update
from lbreplay.replay.stored_bundle_data import STORED_COLUMNS, BundleDataStore, StoredBundleData

A, B = "t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"


def _stored(versions: list[tuple[str, int, float, int]]) -> StoredBundleData:
    """(bundle, written at ms, long-term msgRateIn, long numSamples) per version; other figures derived."""
    cols: dict[str, Any] = {c: [] for c in STORED_COLUMNS}
    for bundle, ts, rate, n in versions:
        row = {"bundle": bundle, "ts_ms": ts, "topics": 3, "short_num_samples": min(n, 10), "short_max_samples": 10,
               "long_num_samples": n, "long_max_samples": 1000}
        for term, scale in (("short", 2.0), ("long", 1.0)):
            row |= {f"{term}_msg_rate_in": rate * scale, f"{term}_msg_rate_out": rate * scale * 2,
                    f"{term}_msg_throughput_in": rate * scale * 1000, f"{term}_msg_throughput_out": rate * scale * 2000}
        for c in STORED_COLUMNS:
            cols[c].append(row[c])
    return StoredBundleData.from_columns({c: np.array(v, dtype=object if c == "bundle" else None)
                                          for c, v in cols.items()})


def test_version_at_is_the_latest_written_by_then_and_none_after_a_delete() -> None:
    store = _stored([(B, 5_000, 7.0, 3), (A, 3_000, 2.0, 1), (A, 1_000, 1.0, 1)])  # rows in any order
    assert [store.ts_ms[store.version_at(A, t)] for t in (1_000, 2_999, 3_000, 10**12)] == [1_000, 1_000, 3_000, 3_000]
    assert store.version_at(A, 999) is None  # nothing written yet
    assert store.version_at("t/ns/other", 10**12) is None
    assert store.version_at(A, 10**12, after_ms=3_000) is None  # deleted at 3 000 ms: the older versions are gone
    assert store.version_at(A, 10**12, after_ms=2_000) is not None


def test_seed_gives_a_fresh_row_the_stored_data_and_leaves_held_rows_alone() -> None:
    b = Bundles.empty([A, B])
    b.has_bundle_data[1] = True
    b.long[1] = [9.0, 9.0, 9.0, 9.0]
    store = BundleDataStore(_stored([(A, 1_000, 100.0, 40), (B, 1_000, 500.0, 40)]), what_if=False)
    store.start_tick(2_000)
    assert store.seed(b, np.array([0, 1]), 2_000) == 1
    assert b.has_bundle_data.tolist() == [True, True]
    assert b.long[0].tolist() == [100_000.0, 200_000.0, 100.0, 200.0]  # MESSAGE_FIELDS order
    assert b.short[0].tolist() == [200_000.0, 400_000.0, 200.0, 400.0]
    assert (int(b.long_samples[0]), int(b.short_samples[0]), int(b.long_max[0])) == (40, 10, 1000)
    assert b.long[1].tolist() == [9.0] * 4  # the leader holds B's BundleData already: no read


def test_a_dropped_bundle_comes_back_without_the_versions_written_before_its_drop() -> None:
    """deleteBundleDataFromMetadataStore: the leader deletes the stored data of a bundle it drops."""
    b = Bundles.empty([A])
    store = BundleDataStore(_stored([(A, 1_000, 100.0, 40), (A, 9_000, 300.0, 50)]), what_if=False)
    assert store.seed(b, np.array([0]), 2_000) == 1
    store.note_held(b, 2_000)
    b.has_bundle_data[0] = False  # dropped (inactive, or split)
    store.note_held(b, 3_000)
    assert store.seed(b, np.array([0]), 4_000) == 0  # the 1 000 ms version was deleted at 3 000 ms
    assert store.seed(b, np.array([0]), 9_500) == 1  # written again after the drop
    assert b.long[0][2] == 300.0


def test_a_what_if_leader_reads_only_what_was_stored_by_its_first_tick() -> None:
    b = Bundles.empty([A, B])
    store = BundleDataStore(_stored([(A, 1_000, 100.0, 40), (B, 5_000, 500.0, 40)]), what_if=True)
    store.start_tick(2_000)
    store.start_tick(6_000)  # a later tick does not move the cut
    assert store.seed(b, np.array([0, 1]), 6_000) == 1
    assert b.has_bundle_data.tolist() == [True, False]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 1000), stored=st.floats(0, 1e6), sample=st.floats(0, 1e6))
def test_the_first_sample_after_a_read_is_a_running_mean_over_the_stored_samples(n: int, stored: float,
                                                                                  sample: float) -> None:
    """BundleData.update(stats) on the stored data: (n * stored + sample) / (n + 1), up to maxSamples
    (TimeAverageMessageData.update), where a default BundleData would take the sample itself."""
    b = Bundles.empty([A])
    store = BundleDataStore(_stored([(A, 0, stored, n)]), what_if=False)
    store.seed(b, np.array([0]), 1)
    vals, count = b.long[[0]].copy(), b.long_samples[[0]].copy()
    tamd_update(vals, count, b.long_max[[0]], np.array([[0.0, 0.0, sample, 0.0]]))
    k = min(n + 1, 1000)
    assert np.isclose(vals[0][2], ((k - 1) * stored + sample) / k)
