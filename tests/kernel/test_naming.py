"""Topic -> bundle mapping and bundle names (lbreplay.kernel.naming)."""

from __future__ import annotations

import numpy as np
import pytest

from lbreplay.kernel.naming import (
    bundle_index_in_layout,
    bundle_names,
    boundaries_from_bundles,
    can_split,
    find_bundle_index,
    format_range,
    initial_boundaries,
    namespace_of_topic,
    normalize_topic_name,
    parse_bundle_name,
    parse_range,
    topic_hash,
)


def _crc32_reference(data: bytes) -> int:
    """Bit-by-bit IEEE CRC-32 (reflected polynomial 0xEDB88320), independent of zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_reference_crc_check_value() -> None:
    """The CRC-32 catalogue check value: crc32("123456789") == 0xCBF43926 (validates the reference above)."""
    assert _crc32_reference(b"123456789") == 0xCBF43926


def test_topic_hash_is_crc32_of_fully_qualified_name() -> None:
    """Spec §2: hash = Guava crc32 of TopicName.toString(), unsigned (NamespaceBundleFactory.getLongHashCode)."""
    names = ["persistent://tenant/ns/my-topic", "non-persistent://t/n/x-partition-3", "persistent://pulsar/global/ns1/topic-1"]
    got = topic_hash(names)
    assert got.dtype == np.int64
    assert got.tolist() == [_crc32_reference(n.encode()) for n in names]
    assert (got >= 0).all() and (got <= 0xFFFFFFFF).all()


def test_topic_hash_normalises_short_names() -> None:
    """TopicName: "my-topic" -> persistent://public/default/my-topic; "t/ns/x" -> persistent://t/ns/x."""
    assert normalize_topic_name("my-topic") == "persistent://public/default/my-topic"
    assert normalize_topic_name("t/ns/x") == "persistent://t/ns/x"
    assert topic_hash("my-topic")[0] == _crc32_reference(b"persistent://public/default/my-topic")
    assert topic_hash(["t/ns/x"])[0] == _crc32_reference(b"persistent://t/ns/x")


@pytest.mark.parametrize("bad", ["a/b", "a/b/c/d", "ftp://t/ns/x", "persistent://t/ns", "persistent://t/ns/"])
def test_invalid_topic_names_raise(bad: str) -> None:
    """TopicName rejects 2-part short names, unknown domains and names without a local part."""
    with pytest.raises(ValueError):
        topic_hash([bad])


def test_namespace_of_topic_v1_and_v2() -> None:
    """TopicName.getNamespace(): V2 tenant/ns, V1 (legacy) tenant/cluster/ns, short -> public/default."""
    assert namespace_of_topic("persistent://tenant/ns/t") == "tenant/ns"
    assert namespace_of_topic("persistent://pulsar/use/ns1/topic-1") == "pulsar/use/ns1"
    assert namespace_of_topic("my-topic") == "public/default"


def test_initial_boundaries_four() -> None:
    """Spec §2: N=4 gives 0x00000000, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff (PoliciesUtil.getBundles)."""
    assert initial_boundaries(4).tolist() == [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]


def test_initial_boundaries_non_divisor_last_bundle_larger() -> None:
    """PoliciesUtil.getBundles(3): seg = 2^32 // 3 = 0x55555555; last boundary is 0xffffffff, not 3*seg."""
    assert initial_boundaries(3).tolist() == [0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF]
    assert initial_boundaries(1).tolist() == [0, 0xFFFFFFFF]


@pytest.mark.parametrize("n", [0, -1])
def test_initial_boundaries_rejects_non_positive(n: int) -> None:
    """PoliciesUtil.getBundles: numBundles <= 0 -> BAD_REQUEST."""
    with pytest.raises(ValueError):
        initial_boundaries(n)


def test_find_bundle_seed_example() -> None:
    """Seed 000 (topics -> bundles): partitions [0x00000000, 0x80000000, 0xFFFFFFFF], hash 0x0000000F -> Bundle1."""
    assert find_bundle_index([0, 0x80000000, 0xFFFFFFFF], [0x0000000F]).tolist() == [0]


def test_find_bundle_binary_search_semantics() -> None:
    """NamespaceBundles.getBundle: hash on a boundary -> bundle starting there; 0xffffffff -> last bundle (spec §2);
    outside the layout -> -1 (Java IndexOutOfBoundsException, NamespaceBundlesTest#testFindBundle)."""
    parts = [0, 0x40000000, 0xA0000000, 0xB0000000, 0xC0000000, 0xFFFFFFFF]
    hashes = [0, 0x3FFFFFFF, 0x40000000, 0xA0000001, 0xBFFFFFFF, 0xC0000000, 0xFFFFFFFE, 0xFFFFFFFF]
    assert find_bundle_index(parts, hashes).tolist() == [0, 0, 1, 2, 3, 4, 4, 4]
    assert find_bundle_index([0x10000000, 0x20000000], [0x0FFFFFFF, 0x20000001]).tolist() == [-1, -1]


def test_find_bundle_includes_topic() -> None:
    """NamespaceBundlesTest#testFindBundle: the found bundle includes persistent://pulsar/global/ns1/topic-1."""
    parts = np.array([0, 0x40000000, 0xA0000000, 0xB0000000, 0xC0000000, 0xFFFFFFFF])
    h = _crc32_reference(b"persistent://pulsar/global/ns1/topic-1")
    i = int(find_bundle_index(parts, topic_hash("persistent://pulsar/global/ns1/topic-1"))[0])
    assert parts[i] <= h < parts[i + 1] or (i == len(parts) - 2 and h == 0xFFFFFFFF)


def test_bundle_names_and_constructor_layout() -> None:
    """NamespaceBundlesTest#testConstructor (3 bundles from 4 partitions) and NamespaceBundleTest#testToString."""
    names = bundle_names("pulsar/use/ns2", [0, 0x10000000, 0x40000000, 0xFFFFFFFF])
    assert names == [
        "pulsar/use/ns2/0x00000000_0x10000000",
        "pulsar/use/ns2/0x10000000_0x40000000",
        "pulsar/use/ns2/0x40000000_0xffffffff",
    ]
    assert format_range(0x10000000, 0xFFFFFFFF) == "0x10000000_0xffffffff"
    assert parse_range("0x10000000_0xffffffff") == (0x10000000, 0xFFFFFFFF)


def test_parse_bundle_name_valid_v1_and_v2() -> None:
    """Bundle names split at the last '/' (LoadManagerShared.getNamespaceNameFromBundleName)."""
    assert parse_bundle_name("pulsar/use/ns1/0x00000000_0x10000000") == ("pulsar/use/ns1", 0, 0x10000000)
    assert parse_bundle_name("t/ns/0x7fffffff_0xffffffff") == ("t/ns", 0x7FFFFFFF, 0xFFFFFFFF)


@pytest.mark.parametrize(
    "bad",
    [
        "t/ns/0x00000000_0x0FFFFFFF",  # upper-case hex
        "t/ns/0x0000000_0x10000000",  # 7 digits
        "t/ns/0x10000000_0x10000000",  # empty range (NamespaceBundleTest#testConstructor rejects [1,1))
        "t/ns/0x20000000_0x10000000",  # lower > upper
        "0x00000000_0x10000000",  # no namespace
        "t/ns/00000000_10000000",  # no 0x
    ],
)
def test_parse_bundle_name_rejects(bad: str) -> None:
    """Strict validation of Pulsar's 0x%08x_0x%08x format with lower < upper."""
    with pytest.raises(ValueError):
        parse_bundle_name(bad)


def test_can_split() -> None:
    """NamespaceBundleFactory.canSplitBundle: upper - lower > 1."""
    assert can_split(0, 2) is True
    assert can_split(0, 1) is False
    assert can_split(np.array([0, 5, 0]), np.array([1, 7, 0xFFFFFFFF])).tolist() == [False, True, True]


def test_boundaries_from_bundles_tiles() -> None:
    """A layout derived from its bundle names (any order, duplicates merged)."""
    got = boundaries_from_bundles(
        ["t/ns/0x80000000_0xffffffff", "0x00000000_0x40000000", (0x40000000, 0x80000000), "t/ns/0x80000000_0xffffffff"]
    )
    assert got.tolist() == [0, 0x40000000, 0x80000000, 0xFFFFFFFF]


@pytest.mark.parametrize(
    "ranges",
    [
        ["0x00000000_0x40000000", "0x50000000_0xffffffff"],  # gap
        ["0x00000000_0x60000000", "0x40000000_0xffffffff"],  # overlap
        ["0x00000001_0xffffffff"],  # does not start at 0
        ["0x00000000_0x40000000"],  # does not end at 0xffffffff
        [],
    ],
)
def test_boundaries_from_bundles_rejects(ranges: list[str]) -> None:
    """validateFullRange / NamespaceBundles: the bundles must tile the full hash range."""
    with pytest.raises(ValueError):
        boundaries_from_bundles(ranges)


def test_bundle_index_in_layout() -> None:
    """checkBundleDataExistInNamespaceBundles: a bundle is in the layout only with both bounds adjacent."""
    layout = [0, 0x40000000, 0x80000000, 0xFFFFFFFF]
    assert bundle_index_in_layout(layout, 0x40000000, 0x80000000) == 1
    assert bundle_index_in_layout(layout, 0, 0x80000000) == -1
    assert bundle_index_in_layout(layout, 0x80000000, 0xFFFFFFFF) == 2


def test_parse_boundaries_policies_format() -> None:
    """NamespacesBase.validateBundlesData: decode, sort, de-duplicate, require the full range."""
    from lbreplay.kernel.naming import parse_boundaries

    got = parse_boundaries(["0x80000000", "0x00000000", "0x40000000", "0x40000000", "0xffffffff"])
    assert got.tolist() == [0, 0x40000000, 0x80000000, 0xFFFFFFFF]
    for bad in (["0x00000000", "0x80000000"], ["0x10000000", "0xffffffff"], ["0x00000000", "zz", "0xffffffff"]):
        with pytest.raises(ValueError):
            parse_boundaries(bad)
