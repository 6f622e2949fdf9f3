"""Bundle ranking and selection shared by the modular shedding strategies.

``select_largest_first`` is the greedy loop OverloadShedder and ThresholdShedder share
(``OverloadShedder.findBundlesForUnloading``'s stream and ``ThresholdShedder.filterAndSelectBundle``);
``select_fitting`` is the "take a bundle if it still fits the remaining need" loop of
UniformLoadShedder and AvgShedder (``AvgShedder.selectBundleForUnloading``). ``ShedderReport`` and
``StatelessShedder`` hold the ``stats()`` / ``skip_reason()`` bookkeeping (and, for strategies without
cross-tick state, the no-op hooks) the modular shedding strategies share.

Candidates are ``LoadData.getBundleDataForLoadShedding()`` entries owned by the broker and not in
``recentlyUnloadedBundles``. Java streams that ``HashMap`` and sorts it stably, so bundles of equal value keep the
map's order: mirrored by :mod:`lbreplay.kernel.load_data_order` (the mask :func:`shedding_candidates` returns
carries each row's position in that map).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lbreplay.kernel.config import PulsarConfig
from lbreplay.kernel.load_data import RATE_IN, RATE_OUT, THR_IN, THR_OUT, LoadData
from lbreplay.kernel.load_data_order import bundle_data_for_load_shedding_rank
from lbreplay.kernel.version_profile import profile_for

INT_MAX = 2147483647
INT_MIN = -2147483648


def short_term_throughput(ld: LoadData) -> np.ndarray:
    """``shortTermData.msgThroughputIn + msgThroughputOut`` per bundle row (bytes/s)."""
    s = ld.bundles.short
    return s[:, THR_IN] + s[:, THR_OUT]


def short_term_msg_rate(ld: LoadData) -> np.ndarray:
    """``shortTermData.msgRateIn + msgRateOut`` per bundle row (msg/s)."""
    s = ld.bundles.short
    return s[:, RATE_IN] + s[:, RATE_OUT]


class SheddingCandidates(np.ndarray):
    """A boolean mask over bundle rows (:func:`shedding_candidates`) that carries ``map_rank``: each row's position
    in ``getBundleDataForLoadShedding()``'s iteration (kept by masks derived from it, e.g. ``mask & owned``)."""

    map_rank: np.ndarray | None

    def __array_finalize__(self, obj: object) -> None:
        self.map_rank = getattr(obj, "map_rank", None)


def _in_map_order(rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``rows`` (ascending) reordered as ``getBundleDataForLoadShedding()`` iterates them (stable)."""
    rank = getattr(mask, "map_rank", None)
    return rows if rank is None or rows.size < 2 else rows[np.argsort(rank[rows], kind="stable")]


class OwnedCandidates:
    """Shedding candidates with their owners, for a pass that ranks the candidates of several brokers: the candidate
    rows and their owners are taken once, so :meth:`rows` of a broker (``np.flatnonzero(candidates &
    ld.owned_mask(broker))``) scans only the candidates."""

    __slots__ = ("_rows", "_owner")

    def __init__(self, ld: LoadData, mask: np.ndarray) -> None:
        if ld.membership is None:
            self._rows = np.flatnonzero(mask)
            self._owner = ld.bundles.owner[self._rows]
        else:  # (broker, bundle) pairs of the brokers' own sets: a bundle in two sets is a candidate of both
            holders, rows = ld.owned_pairs()
            keep = mask[rows]
            order = np.argsort(rows[keep], kind="stable")
            self._rows, self._owner = rows[keep][order], holders[keep][order]
        rank = getattr(mask, "map_rank", None)
        if rank is not None and self._rows.size > 1:
            order = np.argsort(rank[self._rows], kind="stable")
            self._rows, self._owner = self._rows[order], self._owner[order]

    def rows(self, broker: int) -> np.ndarray:
        """The candidate rows ``broker`` owns (``localData.getBundles().contains``), in the map's order."""
        return self._rows[self._owner == broker]


def shedding_candidates(ld: LoadData, conf: PulsarConfig) -> np.ndarray:
    """``LoadData.getBundleDataForLoadShedding()`` of the config's line (``VersionProfile.shedding_skips``), not
    recently unloaded."""
    profile = profile_for(conf["pulsarVersion"])
    mask = ld.shedding_candidates(profile.shedding_skips, profile.sla_pattern_v2).view(SheddingCandidates)
    in_map = ld.bundle_data_for_load_shedding(profile.shedding_skips, profile.sla_pattern_v2)
    mask.map_rank = bundle_data_for_load_shedding_rank(ld, in_map)
    return mask


def ranked_candidates(
    ld: LoadData, broker: int, values: np.ndarray, candidates: np.ndarray | OwnedCandidates
) -> tuple[np.ndarray, np.ndarray]:
    """Shedding candidates of ``broker`` sorted by ``values`` descending (``Double.compare(e2, e1)``).

    ``candidates`` is :func:`shedding_candidates` or, when ranking several brokers in one pass, its
    :class:`OwnedCandidates`. Returns (bundle rows, their values). The sort is stable, so ties keep the order of
    ``getBundleDataForLoadShedding()``; NaN sorts first, as ``Double.compare`` ranks NaN above every number.
    """
    if isinstance(candidates, OwnedCandidates):
        rows = candidates.rows(broker)
    else:
        rows = _in_map_order(np.flatnonzero(candidates & ld.owned_mask(broker)), candidates)
    vals = values[rows]
    key = np.where(np.isnan(vals), -np.inf, -vals)
    order = np.argsort(key, kind="stable")
    return rows[order], vals[order]


def select_largest_first(
    rows: np.ndarray, values: np.ndarray, minimum: float, at_least_one: bool = True
) -> np.ndarray:
    """Greedy "largest first": take bundles while ``marked < minimum`` (or none taken yet).

    ``rows``/``values`` come from ``ranked_candidates`` (descending). The bundle that crosses the
    minimum is included, so the total usually overshoots. ``at_least_one`` mirrors
    ``atLeastOneBundleSelected`` (always true in released Pulsar). Assumes non-negative values, so the
    selection is a prefix of the ranking.
    """
    if rows.size == 0:
        return rows
    marked_before = np.concatenate(([0.0], np.cumsum(values)[:-1]))
    take = marked_before < minimum
    if at_least_one:
        take[0] = True
    stop = int(np.argmin(take)) if not take.all() else take.size
    return rows[:stop]


def java_int(x: float) -> int:
    """Java's ``(int)`` cast of a double: truncate toward zero, saturate, NaN -> 0."""
    if x != x:
        return 0
    if x >= INT_MAX:
        return INT_MAX
    if x <= INT_MIN:
        return INT_MIN
    return int(x)


def java_int_add(a: int, b: int) -> int:
    """32-bit ``int`` addition with Java's wrap-around."""
    s = (a + b) & 0xFFFFFFFF
    return s - 0x100000000 if s > INT_MAX else s


def select_fitting(
    values: np.ndarray,
    required: float,
    *,
    int_need: bool,
    positive_only: bool = False,
    slack: int = 0,
    limit: int = -1,
) -> tuple[np.ndarray, float]:
    """Sequential "take it if it fits": select ``v`` when ``v <= remaining (+ slack)``, then ``remaining -= v``.

    ``int_need`` mirrors UniformLoadShedder's ``MutableInt`` (``remaining`` is an int and
    ``add(-v)`` truncates ``-v`` toward zero); otherwise the need is a double (AvgShedder's
    ``MutableDouble``). ``positive_only`` skips ``v <= 0`` (AvgShedder's ``traffic > 0``).
    ``limit`` (``maxUnloadBundleNumPerShedding``; -1 none) caps the count. Returns the selected
    positions in ``values`` and the remaining need.
    """
    picked: list[int] = []
    remaining: float | int = java_int(required) if int_need else float(required)
    for i, v in enumerate(values.tolist()):
        if limit != -1 and len(picked) >= limit:
            break
        if positive_only and not v > 0:
            continue
        bound = java_int_add(int(remaining), slack) if int_need else remaining
        if v <= bound:
            picked.append(i)
            remaining = java_int_add(int(remaining), java_int(-v)) if int_need else remaining - v
    return np.asarray(picked, dtype=np.int64), float(remaining)


class SkipReasons:
    """Why a pass decided nothing: of the reasons noted, the one furthest along ``order`` wins."""

    def __init__(self, order: tuple[str, ...]) -> None:
        self._order = order
        self._best = -1

    def note(self, reason: str) -> None:
        self._best = max(self._best, self._order.index(reason))

    def reason(self) -> str | None:
        return self._order[self._best] if self._best >= 0 else None


def population_std(values: np.ndarray) -> float:
    """Population standard deviation (0 for no values)."""
    return float(np.std(values)) if values.size else 0.0


class ShedderReport:
    """``stats()`` and ``skip_reason()`` of a shedding strategy: the figures and the skip reason of its last call."""

    def __init__(self) -> None:
        self._stats: dict[str, Any] = {}
        self._skip: str | None = None

    def _finish(self, out: list[Any], skip: SkipReasons) -> list[Any]:
        """End a pass with ``out``: no skip reason when it unloads something, else the furthest one noted."""
        self._skip = None if out else skip.reason()
        return out

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)

    def skip_reason(self) -> str | None:
        return self._skip


class StatelessShedder(ShedderReport):
    """A shedding strategy without cross-tick state (``OverloadShedder``, ``UniformLoadShedder``): the
    ``LoadSheddingStrategy`` hooks keep the interface's no-ops and the threaded state is empty."""

    def on_active_brokers_change(self, active: set[str]) -> None:
        """No per-broker state."""

    def on_unload_attempt_completed(self, bundles: set[str]) -> None:
        """No pending state."""

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any] | None) -> None:
        """Stateless: nothing to restore."""
