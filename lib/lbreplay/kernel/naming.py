"""Topic -> bundle mapping and bundle range strings (NamespaceBundleFactory, NamespaceBundles, NamespaceBundle).

A namespace's bundle layout is a sorted int64 array of ``n + 1`` boundaries (``NamespaceBundles.partitions``);
bundle ``i`` covers ``[b[i], b[i+1])`` and the last bundle is closed at ``0xffffffff``. Topics map to bundles
by the CRC-32 of their fully qualified name (``NamespaceBundleFactory.getLongHashCode`` with
``Hashing.crc32()``; ``ConsistentHashingTopicBundleAssigner`` computes the same).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

FIRST_BOUNDARY = 0x00000000  # Policies.FIRST_BOUNDARY
LAST_BOUNDARY = 0xFFFFFFFF  # Policies.LAST_BOUNDARY == NamespaceBundles.FULL_UPPER_BOUND
FULL_RANGE = "0x00000000_0xffffffff"  # NamespaceBundleFactory.getDefaultBundleRange()
_MAX_BUNDLES = 1 << 32  # PoliciesUtil.MAX_BUNDLES
_DOMAINS = ("persistent", "non-persistent")  # TopicDomain
_RANGE_RE = re.compile(r"^0x[0-9a-f]{8}_0x[0-9a-f]{8}$")


def format_range(lower: int, upper: int) -> str:
    """``String.format("0x%08x_0x%08x", lower, upper)``."""
    return f"0x{lower:08x}_0x{upper:08x}"


def parse_range(text: str) -> tuple[int, int]:
    """Parse ``0x%08x_0x%08x`` (``Long.decode`` of each side)."""
    lo, sep, hi = text.partition("_")
    if not sep:
        raise ValueError(f"malformed bundle range {text!r}")
    return int(lo, 16) if lo.lower().startswith("0x") else int(lo), int(hi, 16) if hi.lower().startswith("0x") else int(hi)


# --- topic names -------------------------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def _topic_parts(topic: str) -> tuple[str, str]:
    """(``TopicName.toString()``, ``TopicName.getNamespace()``), cached like ``TopicName.cache``."""
    name = topic
    if "://" not in name:
        # Short forms: "<topic>" -> public/default, "<tenant>/<ns>/<topic>" (StringUtils.split drops empty tokens).
        parts = [p for p in name.split("/") if p]
        if len(parts) == 3:
            name = "persistent://" + name
        elif len(parts) == 1:
            name = "persistent://public/default/" + parts[0]
        else:
            raise ValueError(
                f"invalid short topic name {topic!r}: it should be in the format of <tenant>/<namespace>/<topic> or <topic>"
            )
    domain, _, rest = name.partition("://")
    if domain not in _DOMAINS:
        raise ValueError(f"invalid topic name {topic!r}: domain must be one of {', '.join(_DOMAINS)}")
    parts = rest.split("/", 3)  # Splitter.on("/").limit(4)
    if len(parts) == 3:  # V2: tenant/namespace/local
        tenant, ns, local = parts
        namespace = f"{tenant}/{ns}"
    elif len(parts) == 4:  # V1 (legacy): tenant/cluster/namespace/local
        tenant, cluster, ns, local = parts
        namespace = f"{tenant}/{cluster}/{ns}"
    else:
        raise ValueError(f"invalid topic name {topic!r}")
    if not local or not all(namespace.split("/")):
        raise ValueError(f"invalid topic name {topic!r}")
    return f"{domain}://{rest}", namespace


def normalize_topic_name(topic: str) -> str:
    """``TopicName.get(topic).toString()``: ``my-topic`` -> ``persistent://public/default/my-topic``."""
    return _topic_parts(topic)[0]


def namespace_of_topic(topic: str) -> str:
    """``TopicName.getNamespace()``: ``tenant/ns`` (V2) or ``tenant/cluster/ns`` (V1)."""
    return _topic_parts(topic)[1]


def topic_hash_of(topic: str) -> int:
    """One topic's :func:`topic_hash`, as a Python int (no array)."""
    return zlib.crc32(normalize_topic_name(topic).encode("utf-8")) & 0xFFFFFFFF


def topic_hash(names: str | Iterable[str]) -> np.ndarray:
    """``getLongHashCode(TopicName.toString())``: unsigned CRC-32 (IEEE, UTF-8) of the normalised name, int64.

    Partitions hash separately (``…/t-partition-3``); a single string gives a one-element array.
    """
    if isinstance(names, str):
        names = [names]
    return np.fromiter(map(topic_hash_of, names), dtype=np.int64)


# --- namespace layouts -------------------------------------------------------------------------------------


def initial_boundaries(n: int) -> np.ndarray:
    """``PoliciesUtil.getBundles(n)``: ``[0, seg, …, (n-1)·seg, 0xffffffff]`` with ``seg = 2^32 // n``.

    The last boundary is always ``0xffffffff`` (not ``n·seg``), so the last bundle absorbs the remainder.
    """
    n = int(n)
    if n <= 0 or n > _MAX_BUNDLES:
        raise ValueError(f"invalid number of bundles {n}: it has to be in the range of (0, 2^32]")
    seg = _MAX_BUNDLES // n
    out = np.arange(n + 1, dtype=np.int64) * seg
    out[-1] = LAST_BOUNDARY
    return out


def find_bundle_index(boundaries: Sequence[int] | np.ndarray, hashes: int | Sequence[int] | np.ndarray) -> np.ndarray:
    """``NamespaceBundles.getBundle(hash)`` for many hashes: the bundle row per hash.

    ``Arrays.binarySearch`` semantics: a hash equal to a boundary belongs to the bundle starting there. A hash
    equal to the last boundary (``0xffffffff``) maps to the last bundle (Java would index out of range); a hash
    outside ``[b[0], b[-1]]`` gives -1 (Java: ``IndexOutOfBoundsException``).
    """
    b = np.asarray(boundaries, dtype=np.int64)
    h = np.atleast_1d(np.asarray(hashes, dtype=np.int64))
    n = b.size - 1
    if n < 1:
        raise ValueError("a bundle layout needs at least 2 boundaries")
    idx = np.searchsorted(b, h, side="right") - 1
    idx = np.where(h == b[-1], n - 1, idx)
    return np.where((h < b[0]) | (h > b[-1]), -1, idx).astype(np.int64)


def bundle_names(namespace: str, boundaries: Sequence[int] | np.ndarray) -> list[str]:
    """``NamespaceBundle.toString()`` of every bundle of a layout: ``<namespace>/0x%08x_0x%08x``."""
    b = [int(x) for x in np.asarray(boundaries, dtype=np.int64)]
    return [f"{namespace}/{format_range(lo, hi)}" for lo, hi in zip(b[:-1], b[1:])]


def split_bundle_name(bundle: str) -> tuple[str, str]:
    """``tenant/ns/0x..._0x...`` -> (namespace, range), split at the last ``/`` (``LoadManagerShared``
    ``getNamespaceNameFromBundleName`` / ``getBundleRangeFromBundleName``)."""
    ns, _, rng = bundle.rpartition("/")
    return ns, rng


def bundle_bounds(bundle: str) -> tuple[str, int, int]:
    """(namespace, lower, upper) of a bundle name known to be well formed (from the lake or a LoadData):
    :func:`split_bundle_name`, then :func:`parse_range`."""
    ns, rng = split_bundle_name(bundle)
    lower, upper = parse_range(rng)
    return ns, lower, upper


def parse_bundle_name(name: str) -> tuple[str, int, int]:
    """``tenant/ns/0x…_0x…`` -> (namespace, lower, upper); split at the last ``/`` (``LoadManagerShared``).

    Strict: the range must be Pulsar's own format (lower-case, 8 hex digits each side) and ``lower < upper``
    (``NamespaceBundle`` rejects empty ranges); raises ValueError otherwise.
    """
    ns, sep, rng = name.rpartition("/")
    if not sep or not ns or not all(ns.split("/")):
        raise ValueError(f"invalid bundle name {name!r}: expected <tenant>/<namespace>/0x%08x_0x%08x")
    if not _RANGE_RE.match(rng):
        raise ValueError(
            f"invalid bundle range {rng!r} in {name!r}: expected lower-case 0x%08x_0x%08x (e.g. 0x00000000_0x40000000)"
        )
    lower, upper = int(rng[2:10], 16), int(rng[13:21], 16)
    if lower >= upper:
        raise ValueError(f"invalid bundle range {rng!r} in {name!r}: lower bound must be below upper bound")
    return ns, lower, upper


def can_split(lower: int | np.ndarray, upper: int | np.ndarray) -> bool | np.ndarray:
    """``NamespaceBundleFactory.canSplitBundle``: ``upper - lower > 1`` (vectorized for arrays)."""
    res = np.asarray(upper, dtype=np.int64) - np.asarray(lower, dtype=np.int64) > 1
    return bool(res) if res.ndim == 0 else res


def boundaries_from_bundles(ranges: Iterable[str | tuple[int, int]]) -> np.ndarray:
    """A namespace layout from its bundles (range strings, full bundle names, or (lower, upper) pairs).

    The bundles must tile ``[0x00000000, 0xffffffff]`` without gaps or overlaps (exact duplicates are merged);
    otherwise ValueError (``NamespaceBundleFactory.validateFullRange`` and the ``NamespaceBundles`` checks).
    """
    pairs: set[tuple[int, int]] = set()
    for r in ranges:
        if isinstance(r, str):
            text = r if "/" in r else f"_/_/{r}"
            _, lo, hi = parse_bundle_name(text)
        else:
            lo, hi = int(r[0]), int(r[1])
            if not (FIRST_BOUNDARY <= lo < hi <= LAST_BOUNDARY):
                raise ValueError(f"invalid bundle range ({lo}, {hi})")
        pairs.add((lo, hi))
    if not pairs:
        raise ValueError("no bundles given: cannot derive a namespace layout")
    ordered = sorted(pairs)
    if ordered[0][0] != FIRST_BOUNDARY or ordered[-1][1] != LAST_BOUNDARY:
        raise ValueError(
            f"bundles do not cover the whole hash range: first {ordered[0][0]:#010x}, last {ordered[-1][1]:#010x}"
        )
    for (lo1, hi1), (lo2, hi2) in zip(ordered[:-1], ordered[1:]):
        if hi1 < lo2:
            raise ValueError(f"gap in bundle layout between {format_range(lo1, hi1)} and {format_range(lo2, hi2)}")
        if hi1 > lo2:
            raise ValueError(f"overlapping bundles {format_range(lo1, hi1)} and {format_range(lo2, hi2)}")
    return np.array([lo for lo, _ in ordered] + [LAST_BOUNDARY], dtype=np.int64)


def bundle_index_in_layout(boundaries: Sequence[int] | np.ndarray, lower: int, upper: int) -> int:
    """Row of bundle ``[lower, upper)`` in a layout, or -1 (``NamespaceBundles.validateBundle`` /
    ``checkBundleDataExistInNamespaceBundles``)."""
    b = np.asarray(boundaries, dtype=np.int64)
    i = int(np.searchsorted(b, lower, side="left"))
    if i < b.size - 1 and b[i] == lower and b[i + 1] == upper:
        return i
    return -1


def parse_boundaries(values: Iterable[str | int]) -> np.ndarray:
    """A layout from ``BundlesData.boundaries`` (hex strings such as ``"0x40000000"``, or ints).

    Like ``NamespacesBase.validateBundlesData``: values are decoded (``Long.decode``), sorted and de-duplicated,
    and must start at ``0x00000000`` and end at ``0xffffffff``; otherwise ValueError.
    """
    decoded: set[int] = set()
    for v in values:
        if isinstance(v, str):
            text = v.strip()
            try:
                num = int(text[2:], 16) if text.lower().startswith("0x") else int(text, 10)
            except ValueError:
                raise ValueError(f"invalid bundle boundary {v!r}") from None
        else:
            num = int(v)
        if not FIRST_BOUNDARY <= num <= LAST_BOUNDARY:
            raise ValueError(f"bundle boundary {v!r} is outside [0x00000000, 0xffffffff]")
        decoded.add(num)
    ordered = sorted(decoded)
    if len(ordered) < 2 or ordered[0] != FIRST_BOUNDARY or ordered[-1] != LAST_BOUNDARY:
        raise ValueError("bundle boundaries do not cover the whole hash range [0x00000000, 0xffffffff]")
    return np.array(ordered, dtype=np.int64)
