"""What ``validate`` computes over a table's rows besides the rules' own columns: content fingerprints (exact sums of
64-bit row hashes), the probe for duplicate keys and the regex rules' predicates over distinct values; each is one
pass over the rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lbreplay.lake import storage
from lbreplay.lake.expectations import Rule
from lbreplay.lake.registry import table_named
from lbreplay.lake.tables import Table

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

MAX_FAILING_VALUES = 1000  # distinct failing values a regex rule's predicate lists (:func:`value_predicate`)


def row_hash(table: Table) -> Column:
    """A row's content hash: xxhash64 over its contract columns."""
    return F.xxhash64(*[F.col(c.name) for c in table.columns])


def hash_sums(h: Column) -> list[Column]:
    """The exact sum of the 64-bit hashes ``h`` as two long sums, of their upper (signed) and lower (unsigned) 32
    bits: no decimal arithmetic per row (half the time of a ``decimal(38,0)`` sum), no overflow below 2^31 rows.
    :func:`fingerprint` joins them back."""
    return [F.sum(F.shiftright(h, 32)).alias("_h_hi"), F.sum(h.bitwiseAND(0xFFFFFFFF)).alias("_h_lo")]


def fingerprint(n: int, hi: int | None, lo: int | None) -> str:
    """``rows:sum of xxhash64 over all columns`` (the sum of an empty set is None, as SQL's)."""
    return f"{n}:{None if hi is None or lo is None else (hi << 32) + lo}"


def fingerprints(frames: dict[str, DataFrame]) -> dict[tuple[str, str], tuple[int, str]]:
    """(table, cluster) -> (rows, "rows:sum of xxhash64 over all columns"), for every frame in one Spark job.
    The fingerprint changes whenever the cluster's rows change."""
    if not frames:
        return {}
    parts = [
        df.select(
            F.lit(name).alias("t"),
            F.col("cluster").alias("c"),
            row_hash(table_named(name)).alias("h"),
        )
        for name, df in frames.items()
    ]
    union = reduce(lambda a, b: a.unionByName(b), parts)
    agg = union.groupBy("t", "c").agg(F.count(F.lit(1)).alias("n"), *hash_sums(F.col("h")))
    return {(r["t"], r["c"]): (int(r["n"]), fingerprint(int(r["n"]), r["_h_hi"], r["_h_lo"])) for r in agg.collect()}


def empty_fingerprint() -> str:
    return "0:None"


def _repeats(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One shuffle partition's key hashes, sorted: whether two are equal (one row per partition)."""
    import numpy as np
    import pyarrow as pa

    hashes = [b.column(0).to_numpy(zero_copy_only=False) for b in batches]
    sorted_hashes = np.sort(np.concatenate(hashes)) if hashes else np.empty(0, dtype=np.int64)
    yield pa.RecordBatch.from_pydict({"repeats": [bool((sorted_hashes[1:] == sorted_hashes[:-1]).any())]})


def may_have_duplicates(df: DataFrame, key: tuple[str, ...]) -> bool:
    """Whether two rows may share ``key``: a 64-bit hash of the key, shuffled by itself and sorted per partition
    (NumPy, through Arrow) instead of aggregated (a hash map as large as the table: twice the time at size M), or
    aggregated below ``storage.LARGE_SCAN_BYTES``; a hash collision only costs the exact check."""
    h = F.xxhash64(*[F.col(k) for k in key]).alias("_h")
    if not storage.is_large(df):  # a small table: one aggregation, no Python worker
        return bool(df.groupBy(h).count().where(F.col("count") > 1).limit(1).collect())
    parts = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 8)
    flags = df.select(h).repartition(parts, "_h").mapInArrow(_repeats, "repeats BOOLEAN")
    return bool(flags.where("repeats").limit(1).collect())


def value_predicate(df: DataFrame, rule: Rule) -> Column:
    """``rule``'s Spark predicate; a regex rule's is evaluated once per distinct value of its column (a topic name
    repeats every minute: the regex over every row took 3x a scan of topic_load at size M), then selects the rows
    holding one of the failing values. Beyond :data:`MAX_FAILING_VALUES` of them, or below
    ``storage.LARGE_SCAN_BYTES``, the regex runs per row."""
    if rule.kind != "regex" or not storage.is_large(df):
        return rule.failing()
    column = F.col(rule.columns[0])
    # the regex inside an aggregate, not a filter: a filter on the distinct values is pushed below the distinct
    found = df.select(column).distinct().agg(
        F.count_if(rule.failing()).alias("n"),
        F.slice(F.collect_list(F.when(rule.failing(), column)), 1, MAX_FAILING_VALUES).alias("values"),
    ).collect()[0]  # a global aggregate: one row
    if found["n"] > MAX_FAILING_VALUES:
        return rule.failing()
    failing = list(found["values"])
    return column.isin(failing) if failing else F.lit(False)
