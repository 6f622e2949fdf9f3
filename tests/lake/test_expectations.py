"""``lbreplay.lake.expectations``' flag builders that check a cheap summary first (the distinct bundle names, one
aggregation per minute and namespace) flag exactly the rows their per-row form flags."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.lake import expectations as ex
from lbreplay.lake.tables import BUNDLE_LOAD

T0 = datetime(2024, 1, 1)
MAX = ex.MAX_HASH



@pytest.fixture(autouse=True)
def cheap_paths_from_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cheap-summary paths are taken from ``storage.LARGE_SCAN_BYTES`` on; these frames are tiny: from 0."""
    from lbreplay.lake import storage

    monkeypatch.setattr(storage, "LARGE_SCAN_BYTES", 0)

def _bundle_frame(spark, rows: list[tuple[int, int, str, str, int | None, int | None, str | None]]):
    """bundle_load rows of cluster c1 from (minute, second, broker, namespace, lower, upper, bundle name or None
    for the name the range gives)."""
    data = []
    for minute, second, broker, ns, lo, hi, name in rows:
        ts = T0 + timedelta(minutes=minute, seconds=second)
        bundle = name or f"{ns}/0x{lo or 0:08x}_0x{hi or 0:08x}"
        data.append(("c1", ts, broker, bundle, ns, lo, hi, 1.0, 1.0, 1.0, 1.0, 1, 1, 1, 1, ts.date()))
    schema = ", ".join(f"{c.name} {c.type}" for c in BUNDLE_LOAD.columns)
    return spark.createDataFrame(data, schema).repartition(3)


def _flags(df, column: str) -> list[tuple]:
    return sorted((r.ts, r.broker, r.bundle, r.range_lower, r[column]) for r in df.collect())


def _minute_rows(rng: random.Random, minute: int, kind: str) -> list[tuple]:
    """One minute of two namespaces: a tiling split over brokers b0..b2, then damaged as ``kind`` says."""
    rows = []
    for ns in ("t/a", "t/b"):
        cuts = sorted(rng.sample(range(1, MAX), rng.randint(1 if kind == "gap" else 0, 4)))  # a gap needs 2 ranges
        bounds = [0, *cuts, MAX]
        ranges = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
        if kind == "gap":
            ranges.pop(rng.randrange(len(ranges)))
        elif kind == "overlap":
            lo, hi = ranges[rng.randrange(len(ranges))]
            ranges.append((lo, min(MAX, hi + rng.randint(1, 10))))
        elif kind == "null":
            lo, hi = ranges[0]
            ranges[0] = (lo, None) if rng.random() < 0.5 else (None, hi)
        for i, (lo, hi) in enumerate(ranges):
            rows.append((minute, 30, f"b{i % 3}", ns, lo, hi, None))
        if kind == "stale":  # an earlier version of b0's report with other ranges: ignored
            rows.append((minute, 5, "b0", ns, 7, 9, None))
        if kind == "moved" and ns == "t/a":  # b3's earlier report listed t/a, its latest only t/b: ignored
            rows.append((minute, 5, "b3", "t/a", 0, 5, None))
            rows.append((minute, 40, "b3", "t/b", 0, 5, None))
    return rows


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32), st.lists(st.sampled_from(["ok", "gap", "overlap", "null", "stale", "moved"]),
                                       min_size=1, max_size=12))
def test_tiling_flags_equal_the_window_on_every_row(spark, seed, kinds) -> None:
    """``ranges_tile_namespace``: the per-group chain check sends only groups it cannot pass to the window; every
    row's flag equals the window's on the whole frame (NamespaceBundles: boundaries partition the ring)."""
    rng = random.Random(seed)
    df = _bundle_frame(spark, [r for m, kind in enumerate(kinds) for r in _minute_rows(rng, m, kind)])
    col = "_v_ranges_tile_namespace"
    got = _flags(df.transform(ex._tiling_build, ex.SuiteContext(spark, {})), col)
    assert got == _flags(ex._tiling_by_window(df), col)
    flagged_minutes = {ts.minute for ts, *_, flag in got if flag is not None}
    assert flagged_minutes <= {m for m, k in enumerate(kinds) if k in ("gap", "overlap", "null", "moved")}
    assert {m for m, k in enumerate(kinds) if k in ("gap", "overlap")} <= flagged_minutes


def test_tiling_all_tiled_flags_nothing(spark) -> None:
    rng = random.Random(7)
    df = _bundle_frame(spark, [r for m in range(5) for r in _minute_rows(rng, m, "ok" if m % 2 else "stale")])
    got = df.transform(ex._tiling_build, ex.SuiteContext(spark, {}))
    assert got.count() == df.count() and got.where("_v_ranges_tile_namespace IS NOT NULL").count() == 0
    assert set(got.columns) == set(df.columns) | {"_v_ranges_tile_namespace"}


def test_bundle_name_consistency_over_distinct_names(spark) -> None:
    """``bundle_name_consistent``: a name that disagrees with its namespace/range columns is flagged on each of its
    rows with the name the columns give; a frame whose names all agree gets no flag."""
    col = "_v_bundle_name_consistent"
    rows = [(m, 0, "b0", "t/a", 0, MAX, None) for m in range(3)]
    ok = _bundle_frame(spark, rows)
    assert ok.transform(ex._consistent_build, None).where(f"{col} IS NOT NULL").count() == 0
    bad = _bundle_frame(spark, [*rows, *[(m, 0, "b1", "t/a", 0, 16, "t/a/0x00000000_0x00000011") for m in range(3)]])
    got = _flags(bad.transform(ex._consistent_build, None), col)
    assert got == _flags(ex._consistent_flag(bad), col)
    assert [f for *_, f in got if f] == ["namespace/range columns give t/a/0x00000000_0x00000010"] * 3
