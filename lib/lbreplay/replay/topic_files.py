"""The topic part of the tick stream read straight from ``topic_load``'s Parquet files, inside the replay task.

Each tick yields its topics' global ring positions ``namespace index * 2**32 + crc32(topic)`` (the hash
NamespaceBundleFactory.getBundle maps a topic with) and their loads, in time order, exactly as the Spark-written
topic part would (``preparation.topic_rows``), without rewriting the biggest input table:

* the files of the pinned snapshot are ordered by their first tick and merged by tick; a file is opened when the
  merge reaches its first tick and read a batch at a time (memory: one batch per file open at once). A file whose
  rows are not in time order is read whole and sorted (memory: that file);
* a tick listing the same topics as the tick before reuses their positions (no hashing);
* a tick's topics are ordered by position, topics sharing a position (crc32 collision) by their loads, so the
  bundle sums do not depend on the files' row order.

The caller decides when plain Parquet reads see the table's rows (a local lake, no deletion vectors, no column
mapping): ``lake.storage.plain_parquet_files``.
"""

from __future__ import annotations

import heapq
import queue
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Iterator, TypeVar

import numpy as np

LOAD_COLUMNS = ("msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out")
SESSION_COLUMNS = ("consumer_count", "producer_count")
BATCH_ROWS = 1 << 16
READ_BUFFER_BYTES = 1 << 20  # per column of an open Parquet file (:func:`open_parquet`)
_US = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}
PREFETCH_TICKS = 4  # ticks read ahead of the tick loop (:func:`prefetched`)
T = TypeVar("T")


@dataclass(frozen=True)
class FileSpan:
    """One Parquet file of ``topic_load``: its first and last ``ts`` (epoch microseconds), whether its rows are in
    ``ts`` order, and its position in the path order (the tie-break between files starting at the same tick)."""

    path: str
    first_us: int
    last_us: int
    ordered: bool
    rank: int


def ts_micros(column: Any) -> np.ndarray:
    """A Parquet ``ts`` column (timestamp of any unit) as epoch microseconds (floor for nanoseconds)."""
    import pyarrow as pa

    unit = column.type.unit
    us = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
    return us // 1000 if unit == "ns" else us * _US[unit]


def file_spans(paths: list[str]) -> list[FileSpan]:
    """Read each file's ``ts`` column, a batch at a time (memory: one batch, whatever the file's size), into its
    span."""
    spans = []
    for rank, path in enumerate(sorted(paths)):
        first, last, ordered, previous = None, None, True, None
        for batch in open_parquet(path).iter_batches(batch_size=BATCH_ROWS, columns=["ts"]):
            ts = ts_micros(batch.column(0))
            if not len(ts):
                continue
            lo, hi = int(ts.min()), int(ts.max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
            ordered = ordered and (previous is None or int(ts[0]) >= previous) and bool(np.all(np.diff(ts) >= 0))
            previous = int(ts[-1])
        if first is not None and last is not None:
            spans.append(FileSpan(path, first, last, ordered, rank))
    return sorted(spans, key=lambda s: (s.first_us, s.rank))


def open_parquet(path: str) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` read a buffer of :data:`READ_BUFFER_BYTES` at a time, not pre-buffered:
    by default Arrow holds the column chunks of the row group being read whole, so a task's memory grew with the
    size of the files it keeps open (one 87 MB file of a week's ``topic_load``, one row group: 100 MB of Arrow
    memory at its first batch, 21 MB buffered; the same read time)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, buffer_size=READ_BUFFER_BYTES, pre_buffer=False)


def _columns(pf: Any) -> list[str]:
    names = set(pf.schema_arrow.names)
    return ["ts", "topic", "namespace", *[c for c in LOAD_COLUMNS + SESSION_COLUMNS if c in names]]


def tick_runs(ts_ms: np.ndarray, batch: Any) -> Iterator[tuple[int, Any]]:
    """(ts_ms, rows) per run of equal ``ts_ms`` in a batch (``ts_ms`` aligned with its rows), in row order."""
    cuts = [0, *(np.flatnonzero(np.diff(ts_ms)) + 1).tolist(), len(ts_ms)]
    for a, b in zip(cuts[:-1], cuts[1:]):
        if b > a:
            yield int(ts_ms[a]), batch.slice(a, b - a)


def _tick_chunks(span: FileSpan, window_us: tuple[int | None, int | None]) -> Iterator[tuple[int, Any]]:
    """(ts_ms, rows) per run of equal ``ts_ms`` in one file, in time order, the rows outside ``window_us`` dropped."""
    import pyarrow as pa

    pf = open_parquet(span.path)
    columns = _columns(pf)
    if span.ordered:
        batches: Iterator[Any] = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    else:  # rows out of time order: the whole file, sorted (stable) by ts
        table = pf.read(columns=columns)
        order = np.argsort(ts_micros(table.column("ts").combine_chunks()), kind="stable")
        batches = iter(table.take(pa.array(order)).combine_chunks().to_batches())
    lo, hi = window_us
    for batch in batches:
        us = ts_micros(batch.column(0))
        keep = np.ones(len(us), dtype=bool)
        if lo is not None:
            keep &= us >= lo
        if hi is not None:
            keep &= us < hi
        if not keep.all():
            batch, us = batch.filter(pa.array(keep)), us[keep]
        yield from tick_runs(us // 1000, batch)


def _merged(spans: list[FileSpan], window_us: tuple[int | None, int | None]) -> Iterator[tuple[int, list[Any]]]:
    """(ts_ms, the tick's row chunks in file order) per tick; a file is opened when the merge reaches its first
    tick, so only the files overlapping the current tick are open."""
    pending = list(spans)  # ordered by first tick
    heap: list[tuple[int, int, int, Any, Iterator[tuple[int, Any]]]] = []
    seq = 0

    def push(rank: int, it: Iterator[tuple[int, Any]]) -> None:
        nonlocal seq
        nxt = next(it, None)
        if nxt is not None:
            heapq.heappush(heap, (nxt[0], rank, seq, nxt[1], it))
            seq += 1

    while heap or pending:
        while pending and (not heap or pending[0].first_us // 1000 <= heap[0][0]):
            span = pending.pop(0)
            push(span.rank, _tick_chunks(span, window_us))
        if not heap:
            continue
        ts = heap[0][0]
        chunks = []
        while heap and heap[0][0] == ts:
            _, rank, _, rows, it = heapq.heappop(heap)
            chunks.append(rows)
            push(rank, it)
        yield ts, chunks


class _Positions:
    """Ring positions of a tick's topics, reused while the ticks list the same topics."""

    def __init__(self, namespaces: list[str]):
        self.ns_index = {ns: i for i, ns in enumerate(namespaces)}
        self.crc: dict[str, int] = {}
        self.last: tuple[Any, Any, np.ndarray, np.ndarray | None] | None = None

    def of(self, topic: Any, namespace: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(positions of the kept topics, mask of the kept rows or None = all): topics of namespaces without
        bundles are dropped, as the Spark part's inner join with the namespace index does."""
        last = self.last
        if last is not None and last[0].equals(topic) and last[1].equals(namespace):
            return last[2], last[3]
        crc = self.crc
        names = topic.to_pylist()
        for t in names:
            if t not in crc:
                crc[t] = zlib.crc32(t.encode("utf-8"))
        ns = np.array([self.ns_index.get(n, -1) for n in namespace.to_pylist()], dtype=np.int64)
        pos = ns * (np.int64(1) << np.int64(32)) + np.array([crc[t] for t in names], dtype=np.int64)
        keep = None if bool(np.all(ns >= 0)) else ns >= 0
        if keep is not None:
            pos = pos[keep]
        self.last = (topic, namespace, pos, keep)
        return pos, keep


def ring_order(pos: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, bool]:
    """(order, tied) of a tick's topics: by ring position, topics sharing a position (crc32 collision, ``tied``)
    by their loads, so the bundle sums are the same whatever the files' row order."""
    order = np.argsort(pos, kind="stable")
    if np.any(np.diff(pos[order]) == 0):
        return np.lexsort((*vals.T[::-1], pos)), True
    return order, False


def _concat(chunks: list[Any], name: str) -> Any:
    import pyarrow as pa

    arrays = [c.column(c.schema.get_field_index(name)) for c in chunks]
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def topic_ticks(paths: list[str], namespaces: list[str],
                window_us: tuple[int | None, int | None] = (None, None)) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(ts_ms, positions, values (T, 6): throughput in/out, rate in/out, sessions, 1) per tick of ``topic_load``'s
    files ``paths``, in time order; ``window_us`` keeps the rows with ``ts`` in ``[from, to)`` (epoch µs)."""
    positions = _Positions(namespaces)
    last_order: tuple[np.ndarray, np.ndarray] | None = None
    lo, hi = window_us
    spans = [s for s in file_spans(paths) if (lo is None or s.last_us >= lo) and (hi is None or s.first_us < hi)]
    for ts, chunks in _merged(spans, window_us):
        pos, keep = positions.of(_concat(chunks, "topic"), _concat(chunks, "namespace"))
        n = sum(c.num_rows for c in chunks)
        vals = np.ones((n, 6))
        names = chunks[0].schema.names
        for k, name in enumerate(LOAD_COLUMNS):
            if name in names:
                vals[:, k] = np.nan_to_num(_concat(chunks, name).to_numpy(zero_copy_only=False).astype(np.float64))
            else:
                vals[:, k] = 0.0
        vals[:, 4] = 0.0
        for name in SESSION_COLUMNS:
            if name in names:
                vals[:, 4] += _concat(chunks, name).fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
        if keep is not None:
            vals = vals[keep]
        if last_order is not None and last_order[0] is pos:  # same topics, no ties: same order
            order = last_order[1]
        else:
            order, tied = ring_order(pos, vals)
            last_order = None if tied else (pos, order)
        yield ts, pos[order], vals[order]


def prefetched(items: Iterator[T], depth: int = PREFETCH_TICKS) -> Iterator[T]:
    """``items`` in order, produced up to ``depth`` ahead by a thread of their own: Arrow's Parquet reads and
    NumPy's sorts release the GIL, so the topic files are read on another core while the tick loop runs. An error
    of the producer is raised here, at its place in the order; closing this generator stops the producer."""
    done = object()
    buffer: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[Any, BaseException | None]) -> bool:
        """Hand ``entry`` over unless the consumer has gone (False)."""
        while not stop.is_set():
            try:
                buffer.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put((done, exc))

    thread = threading.Thread(target=produce, name="topic-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = buffer.get()
            if item is done:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)
