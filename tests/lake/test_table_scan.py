"""``lbreplay.lake.table_scan``: the validation's fingerprints, duplicate-key probe and regex rules' predicates over
distinct values, each checked against the plain computation it replaces."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbreplay.lake import table_scan
from lbreplay.lake.expectations import SUITES, TOPIC_NAME_REGEX
from lbreplay.lake.tables import TOPIC_LOAD

T0 = datetime(2024, 1, 1)
SPARK_EXAMPLES = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))


def _topic_rows(spark, rows: list[tuple[int, str, float]]):
    """topic_load rows of cluster c1 from (minute, topic, rate)."""
    from pyspark.sql import functions as F

    data = [("c1", T0 + timedelta(minutes=m), t, "t/ns", r, r, r, r, 1, 1, (T0 + timedelta(minutes=m)).date())
            for m, t, r in rows]
    schema = ", ".join(f"{c.name} {c.type}" for c in TOPIC_LOAD.columns)
    return spark.createDataFrame(data, schema).repartition(3).withColumn("cluster", F.col("cluster"))



@pytest.fixture(autouse=True)
def cheap_paths_from_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cheap-summary paths are taken from ``storage.LARGE_SCAN_BYTES`` on; these frames are tiny: from 0."""
    from lbreplay.lake import storage

    monkeypatch.setattr(storage, "LARGE_SCAN_BYTES", 0)

@SPARK_EXAMPLES
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["persistent://t/ns/a", "persistent://t/ns/b", "x"]),
                          st.floats(-1e300, 1e300)), max_size=40))
def test_fingerprint_is_the_exact_sum_of_row_hashes(spark, rows) -> None:
    """The two long sums give the same ``rows:sum`` as the decimal sum stored by earlier validations (a lake's
    recorded fingerprints keep matching)."""
    from pyspark.sql import functions as F

    df = _topic_rows(spark, rows)
    got = table_scan.fingerprints({"topic_load": df})
    want = df.agg(F.count(F.lit(1)), F.sum(table_scan.row_hash(TOPIC_LOAD).cast("decimal(38,0)"))).first()
    if rows:
        assert got == {("topic_load", "c1"): (len(rows), f"{want[0]}:{want[1]}")}
    else:
        assert got == {} and table_scan.fingerprint(0, None, None) == table_scan.empty_fingerprint() == "0:None"


@SPARK_EXAMPLES
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=60))
def test_duplicate_probe_finds_every_repeated_key(spark, keys) -> None:
    """A repeated (ts, topic) anywhere in the frame, whichever partitions its rows sit in, is found; a frame without
    one is never reported (its 64-bit hashes do not collide at these sizes)."""
    df = _topic_rows(spark, [(m, f"persistent://t/ns/{t}", 1.0) for m, t in keys])
    assert table_scan.may_have_duplicates(df, TOPIC_LOAD.key) == (len(set(keys)) < len(keys))


def test_regex_rule_predicate_selects_the_same_rows(spark, monkeypatch) -> None:
    """The topic-name rule's predicate over distinct names selects exactly the rows the per-row regex selects, with
    the failing names listed, with none, and beyond the listing limit (the per-row regex again)."""
    from pyspark.sql import functions as F

    rule = next(r for r in SUITES["topic_load"] if r.name == "topic_name_format")
    assert rule.regex == TOPIC_NAME_REGEX
    bad = ["t/ns/a", "persistent:/t/ns/b", "persistent://t/ns/"]
    good = ["persistent://t/ns/a", "non-persistent://t/c/ns/b"]
    df = _topic_rows(spark, [(m, name, 1.0) for m in range(3) for name in bad + good])

    def selected(frame) -> list[tuple[int, str]]:
        return sorted((r.ts.minute, r.topic) for r in frame.where(table_scan.value_predicate(frame, rule)).collect())

    want = sorted((r.ts.minute, r.topic) for r in df.where(rule.failing()).collect())
    assert {t for _, t in want} == set(bad) and len(want) == 9
    assert selected(df) == want
    monkeypatch.setattr(table_scan, "MAX_FAILING_VALUES", 2)
    assert selected(df) == want
    clean = df.where(~rule.failing())
    assert selected(clean) == [] and str(table_scan.value_predicate(clean, rule)) == str(F.lit(False))


def test_small_frames_take_the_per_row_forms(spark, monkeypatch, tmp_path) -> None:
    """Below ``storage.LARGE_SCAN_BYTES`` the regex runs per row and the duplicate probe is one aggregation (no
    extra job, no Python worker); both answer as the cheap paths do."""
    from lbreplay.lake import storage

    monkeypatch.setattr(storage, "LARGE_SCAN_BYTES", 4 << 20)  # the default
    rule = next(r for r in SUITES["topic_load"] if r.name == "topic_name_format")
    _topic_rows(spark, [(0, "x", 1.0), (1, "x", 1.0), (1, "persistent://t/ns/a", 1.0)]).write.parquet(str(tmp_path / "t"))
    df = spark.read.parquet(str(tmp_path / "t"))  # files: a size estimate (a local frame's is unknown: the maximum)
    assert not storage.is_large(df) and str(table_scan.value_predicate(df, rule)) == str(rule.failing())
    assert not table_scan.may_have_duplicates(df, TOPIC_LOAD.key)
    assert table_scan.may_have_duplicates(df.unionByName(df.limit(1)), TOPIC_LOAD.key)
