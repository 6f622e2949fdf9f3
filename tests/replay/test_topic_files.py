"""The replay task's reader of ``topic_load``'s Parquet files (``lbreplay.replay.topic_files``), no Spark.

Every case is checked against a plain reference built from the rows themselves: a tick's topics are the rows with
its ``ts`` (floored to the millisecond), a topic's ring position is ``namespace index * 2**32 + crc32(topic)``
(``NamespaceBundleFactory#getBundle`` hashes the topic name with CRC32 into its namespace's ring), topics of
namespaces without bundles are dropped, and a tick's topics are ordered by (position, loads).
"""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbreplay.replay.topic_files import file_spans, prefetched, topic_ticks

NAMESPACES = ["acme/a", "acme/b"]
T0 = dt.datetime(2024, 1, 1)


def _rows(ticks: range, topics: list[tuple[str, str]], seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"ts": T0 + dt.timedelta(minutes=t), "topic": name, "namespace": ns,
             "msg_rate_in": float(rng.integers(1, 9)), "msg_rate_out": float(rng.integers(1, 9)),
             "msg_throughput_in": float(rng.integers(1, 9)) * 1e3, "msg_throughput_out": float(rng.integers(1, 9)) * 1e3,
             "producer_count": int(rng.integers(0, 3)), "consumer_count": None if t % 2 else int(rng.integers(0, 3))}
            for t in ticks for ns, name in topics]


def _write(path: Path, rows: list[dict[str, Any]], unit: str = "us") -> str:
    schema = pa.schema([("ts", pa.timestamp(unit)), ("topic", pa.string()), ("namespace", pa.string()),
                        ("msg_rate_in", pa.float64()), ("msg_rate_out", pa.float64()),
                        ("msg_throughput_in", pa.float64()), ("msg_throughput_out", pa.float64()),
                        ("producer_count", pa.int32()), ("consumer_count", pa.int32())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=7)
    return str(path)


def _reference(rows: list[dict[str, Any]], lo: dt.datetime | None = None,
               hi: dt.datetime | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
    by_tick: dict[int, list[tuple[int, tuple[float, ...]]]] = {}
    for r in rows:
        if r["namespace"] not in NAMESPACES or (lo and r["ts"] < lo) or (hi and r["ts"] >= hi):
            continue
        ms = int(r["ts"].replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
        pos = NAMESPACES.index(r["namespace"]) * 2 ** 32 + zlib.crc32(r["topic"].encode())
        vals = (r["msg_throughput_in"], r["msg_throughput_out"], r["msg_rate_in"], r["msg_rate_out"],
                float((r["consumer_count"] or 0) + (r["producer_count"] or 0)), 1.0)
        by_tick.setdefault(ms, []).append((pos, vals))
    out = []
    for ms in sorted(by_tick):
        items = sorted(by_tick[ms])
        out.append((ms, np.array([p for p, _ in items], dtype=np.int64), np.array([v for _, v in items])))
    return out


def _assert_same(got: list[tuple[int, np.ndarray, np.ndarray]], want: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
    assert [t for t, _, _ in got] == [t for t, _, _ in want]
    for (_, gp, gv), (_, wp, wv) in zip(got, want):
        np.testing.assert_array_equal(gp, wp)
        np.testing.assert_array_equal(gv, wv)


# two topic names of one namespace with the same CRC32 (found by a search over t-0, t-1, ...; checked below)
COLLIDING = ("persistent://acme/a/t-29888", "persistent://acme/a/t-22502420")


TOPICS = [("acme/a", "persistent://acme/a/x"), ("acme/b", "persistent://acme/b/y"),
          ("acme/a", "persistent://acme/a/z"), ("other/ns", "persistent://other/ns/w")]


def test_files_in_time_order_tick_across_files_and_a_namespace_without_bundles(tmp_path: Path) -> None:
    """Two ordered files that share tick 5 (the tick's rows are split between them), a topic of a namespace
    with no bundles (dropped), null consumer counts (0 sessions); files are given in no particular order."""
    first, second = _rows(range(0, 6), TOPICS, 1), _rows(range(5, 12), TOPICS, 2)
    second = [r for r in second if not (r["ts"] == T0 + dt.timedelta(minutes=5) and r["topic"].endswith("/x"))]
    paths = [_write(tmp_path / "b.parquet", second), _write(tmp_path / "a.parquet", first)]
    got = list(topic_ticks(paths, NAMESPACES))
    _assert_same(got, _reference(first + second))
    assert len(got) == 12 and len(got[5][1]) == 3 + 2  # tick 5: 3 topics from the first file, 2 from the second


def test_a_file_out_of_time_order_is_sorted_and_overlapping_files_merge(tmp_path: Path) -> None:
    """A file whose rows are shuffled is read whole and sorted; it overlaps an ordered file tick for tick."""
    a = _rows(range(0, 10), TOPICS[:2], 3)
    b = _rows(range(0, 10), TOPICS[2:], 4)
    shuffled = [a[i] for i in np.random.default_rng(0).permutation(len(a))]
    paths = [_write(tmp_path / "shuffled.parquet", shuffled), _write(tmp_path / "ordered.parquet", b)]
    spans = {Path(s.path).name: s.ordered for s in file_spans(paths)}
    assert spans == {"shuffled.parquet": False, "ordered.parquet": True}
    _assert_same(list(topic_ticks(paths, NAMESPACES)), _reference(a + b))


def test_window_keeps_ts_in_from_to_and_nanosecond_files(tmp_path: Path) -> None:
    """``--from/--to`` as epoch microseconds, half-open; a file written with nanosecond timestamps reads the same."""
    rows = _rows(range(0, 20), TOPICS, 5)
    path = _write(tmp_path / "ns.parquet", rows, unit="ns")
    lo, hi = T0 + dt.timedelta(minutes=4), T0 + dt.timedelta(minutes=9, seconds=30)
    us = lambda t: int(t.replace(tzinfo=dt.timezone.utc).timestamp()) * 1_000_000  # noqa: E731
    got = list(topic_ticks([path], NAMESPACES, (us(lo), us(hi))))
    _assert_same(got, _reference(rows, lo, hi))
    assert [t for t, _, _ in got][0] == us(lo) // 1000 and len(got) == 6


def test_topics_sharing_a_crc32_are_ordered_by_their_loads(tmp_path: Path) -> None:
    """Two topics hashing to the same ring position: whatever their row order in the files, the tick lists them
    by their loads, so the bundle sums are the same for every file layout."""
    x, y = COLLIDING
    assert zlib.crc32(x.encode()) == zlib.crc32(y.encode())
    topics = [("acme/a", x), ("acme/a", y), ("acme/b", "persistent://acme/b/q")]
    rows = _rows(range(0, 4), topics, 6)
    flipped = [r for t in range(4) for r in reversed(rows[3 * t:3 * t + 3])]
    got_a = list(topic_ticks([_write(tmp_path / "a.parquet", rows)], NAMESPACES))
    got_b = list(topic_ticks([_write(tmp_path / "b.parquet", flipped)], NAMESPACES))
    _assert_same(got_a, _reference(rows))
    _assert_same(got_b, got_a)
    assert got_a[0][1][0] == got_a[0][1][1]  # the collision is real


@pytest.mark.parametrize("changed", [False, True])
def test_positions_follow_the_tick_topic_list(tmp_path: Path, changed: bool) -> None:
    """Positions computed once are reused only while a tick lists the same topics: a tick with a topic renamed
    gets the new topic's position."""
    rows = _rows(range(0, 6), TOPICS[:3], 7)
    if changed:
        for r in rows:
            if r["ts"] >= T0 + dt.timedelta(minutes=3) and r["topic"].endswith("/z"):
                r["topic"] = "persistent://acme/a/renamed"
    _assert_same(list(topic_ticks([_write(tmp_path / "t.parquet", rows)], NAMESPACES)), _reference(rows))


def test_an_open_file_holds_a_buffer_not_its_row_group(tmp_path: Path) -> None:
    """A file is read through a buffer: with one row group of ~33 MB (incompressible topic names), reading its first
    tick allocates a small part of it, so a task's memory does not grow with the size of the files it keeps open
    (by default Arrow pre-buffers the row group's column chunks whole)."""
    from lbreplay.replay.topic_files import READ_BUFFER_BYTES, open_parquet

    rng = np.random.default_rng(5)
    n = 1_000_000
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[rng.integers(0, 16, size=(n, 32))]
    names = pa.array(np.char.add(b"persistent://acme/a/", digits.view("S32").ravel())).cast(pa.string())
    t0_us = int(T0.replace(tzinfo=dt.timezone.utc).timestamp() * 1e6)
    ticks_us = t0_us + np.repeat(np.arange(4), n // 4) * 60_000_000
    table = pa.table({"ts": pa.array(ticks_us, pa.int64()).cast(pa.timestamp("us")),
                      "topic": names, "namespace": pa.array(["acme/a"] * n),
                      **{c: np.ones(n) for c in ("msg_rate_in", "msg_rate_out", "msg_throughput_in",
                                                 "msg_throughput_out")}})
    path = tmp_path / "one-row-group.parquet"
    pq.write_table(table, path, row_group_size=n)
    size = path.stat().st_size
    assert pq.ParquetFile(path).metadata.num_row_groups == 1 and size > 30 * READ_BUFFER_BYTES

    def allocated_after_first_batch(pf: Any) -> int:
        before = pa.total_allocated_bytes()
        batches = pf.iter_batches(batch_size=1 << 12, columns=["ts", "topic"])
        next(batches)
        grown = pa.total_allocated_bytes() - before
        del batches
        return grown

    whole = allocated_after_first_batch(pq.ParquetFile(path))
    buffered = allocated_after_first_batch(open_parquet(str(path)))
    assert whole > size // 2  # the premise: Arrow's default holds the chunks whole
    assert buffered < size // 6


def test_prefetched_ticks_are_the_same_ticks_in_order(tmp_path: Path) -> None:
    """The tick stream reads the topic files a few ticks ahead on a thread of its own (``prefetched``): the same
    ticks, arrays and order as reading them in line."""
    a, b = _rows(range(0, 40), TOPICS, 5), _rows(range(20, 60), TOPICS[1:], 6)
    paths = [_write(tmp_path / "a.parquet", a), _write(tmp_path / "b.parquet", b)]
    _assert_same(list(prefetched(topic_ticks(paths, NAMESPACES), depth=2)), _reference(a + b))


def test_prefetched_raises_the_producers_error_in_place_and_stops_when_closed() -> None:
    """An error while reading ahead reaches the consumer after the items before it, as a plain read would raise
    it; a consumer that stops early (an audit slice's end) stops the reader thread."""
    import threading

    def failing() -> Any:
        yield 1
        yield 2
        raise ValueError("torn file")

    got = []
    with pytest.raises(ValueError, match="torn file"):
        for x in prefetched(failing(), depth=1):
            got.append(x)
    assert got == [1, 2]

    produced = []

    def endless() -> Any:
        n = 0
        while True:
            produced.append(n)
            yield n
            n += 1

    it = prefetched(endless(), depth=3)
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()
    assert not any(t.name == "topic-prefetch" and t.is_alive() for t in threading.enumerate())
    assert len(produced) <= 5 + 3 + 1  # at most the depth (and the item in hand) read ahead, then stopped
