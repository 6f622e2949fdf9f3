"""The BundleData the leader finds in the metadata store (``/loadbalance/bundle-data/<bundle>``; the ingested
``bundle_data`` versions).

``ModularLoadManagerImpl.updateBundleData`` samples every bundle of every held report; for a bundle it holds no
BundleData for, ``getBundleDataOrDefaultAsync`` reads the stored one and only without it starts from default
stats, then ``BundleData.update(stats)`` adds the sample. The leader deletes a bundle's stored data when it drops
the bundle (``deleteBundleDataFromMetadataStore``: inactive, or split), so a version written before the leader's
own drop is gone when the bundle shows up again. ``TimeAverageBrokerData`` is no input: ``updateBundleData``
recomputes it from the bundles' BundleData (``TimeAverageBrokerData.reset``) at every sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lbreplay.kernel.load_data import Bundles

STORED_COLUMNS = (
    "bundle", "ts_ms", "topics",
    "short_msg_throughput_in", "short_msg_throughput_out", "short_msg_rate_in", "short_msg_rate_out",
    "short_num_samples", "short_max_samples",
    "long_msg_throughput_in", "long_msg_throughput_out", "long_msg_rate_in", "long_msg_rate_out",
    "long_num_samples", "long_max_samples",
)


@dataclass
class StoredBundleData:
    """Every recorded version, sorted by (bundle, time); ``rows[bundle]`` is the bundle's [lo, hi) slice."""

    ts_ms: np.ndarray  # (N,) int64, when the version was written
    short: np.ndarray  # (N, 4) shortTermData, MESSAGE_FIELDS order
    long: np.ndarray  # (N, 4) longTermData
    samples: np.ndarray  # (N, 4) int: short numSamples, short maxSamples, long numSamples, long maxSamples
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def from_columns(cls, cols: dict[str, np.ndarray]) -> "StoredBundleData":
        """From the columns of :data:`STORED_COLUMNS` (any order of rows)."""
        names = np.asarray(cols["bundle"], dtype=object)
        order = np.lexsort((np.asarray(cols["ts_ms"]), names))
        names = names[order]

        def mat(prefix: str) -> np.ndarray:
            keys = ("msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out")
            return np.stack([np.asarray(cols[f"{prefix}_{k}"], dtype=float)[order] for k in keys], axis=1) \
                if len(order) else np.zeros((0, 4))

        samples = np.stack([np.asarray(cols[k])[order].astype(np.int64) for k in
                            ("short_num_samples", "short_max_samples", "long_num_samples", "long_max_samples")],
                           axis=1) if len(order) else np.zeros((0, 4), dtype=np.int64)
        rows: dict[str, tuple[int, int]] = {}
        if len(names):
            starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
            for lo, hi in zip(starts.tolist(), np.r_[starts[1:], len(names)].tolist()):
                rows[str(names[lo])] = (lo, hi)
        return cls(np.asarray(cols["ts_ms"], dtype=np.int64)[order], mat("short"), mat("long"), samples, rows)

    def __len__(self) -> int:
        return len(self.ts_ms)

    def version_at(self, bundle: str, at_ms: int, after_ms: int | None = None) -> int | None:
        """The row of ``bundle``'s version the store holds at ``at_ms``: the latest written at or before it (and
        after ``after_ms``, when the leader deleted it then); None when there is none."""
        span = self.rows.get(bundle)
        if span is None:
            return None
        lo, hi = span
        k = lo + int(np.searchsorted(self.ts_ms[lo:hi], at_ms, side="right")) - 1
        if k < lo or (after_ms is not None and self.ts_ms[k] <= after_ms):
            return None
        return k


class BundleDataStore:
    """The leader's view of the stored BundleData over a replay: the recorded versions, minus the ones it
    deleted itself, and (``frozen_at``) nothing written after a time (a what-if leader writes its own)."""

    def __init__(self, stored: StoredBundleData, what_if: bool) -> None:
        self.stored = stored
        self.what_if = what_if
        self.frozen_at: int | None = None
        self.deleted_at: dict[str, int] = {}
        self._held: set[str] = set()
        self._last: tuple[list[str], np.ndarray] = ([], np.zeros(0, dtype=bool))  # the rows of the last note

    def start_tick(self, now_ms: int) -> None:
        """A what-if leader reads what was recorded up to its first tick; later versions are the real leader's."""
        if self.what_if and self.frozen_at is None:
            self.frozen_at = now_ms

    def seed(self, b: Bundles, rows: np.ndarray, now_ms: int) -> int:
        """``getBundleDataOrDefaultAsync`` for the ``rows`` about to be sampled that hold no BundleData: the stored
        version, where there is one, becomes the row's BundleData. Returns how many rows were seeded."""
        fresh = rows[~b.has_bundle_data[rows]]
        at = now_ms if self.frozen_at is None else min(now_ms, self.frozen_at)
        seeded = 0
        for row in fresh.tolist():
            k = self.stored.version_at(b.names[row], at, self.deleted_at.get(b.names[row]))
            if k is None:
                continue
            s = self.stored.samples[k]
            b.short[row], b.long[row] = self.stored.short[k], self.stored.long[k]
            b.short_samples[row], b.long_samples[row] = s[0], s[2]
            if s[1] > 0:
                b.short_max[row] = s[1]
            if s[3] > 0:
                b.long_max[row] = s[3]
            b.has_bundle_data[row] = True
            seeded += 1
        return seeded

    def note_held(self, b: Bundles, now_ms: int) -> None:
        """After a tick: the bundles whose BundleData the leader dropped since the last call are deleted from the
        store at ``now_ms`` (``deleteBundleDataFromMetadataStore``)."""
        names, mask = self._last
        if names == b.names and np.array_equal(mask, b.has_bundle_data):
            return  # nothing dropped (most ticks): no pass over the names
        self._last = (list(b.names), b.has_bundle_data.copy())
        held = {b.names[i] for i in np.flatnonzero(b.has_bundle_data).tolist()}
        for name in self._held - held:
            self.deleted_at[name] = now_ms
        self._held = held
