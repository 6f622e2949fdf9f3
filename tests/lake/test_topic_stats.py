"""``topic_load`` from a recording: ``collect``'s ``broker-stats/topics`` polls stamped at the reports' times, and
the closed loop's split of a recorded bundle by its topics' hashes (``ring_load.TopicWeightedLoad``)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from lbreplay.lake.ingest import read_dumps
from lbreplay.replay.ring_load import PointLoad, TopicWeightedLoad

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-3brokers"


def test_a_recording_topic_polls_become_topic_load_rows_at_its_report_times() -> None:
    """Each topic_load tick is a report's time; its topics are the brokers' latest polls (lb/hot's 40 topics once
    every broker polled), their rates as polled; ticks before the first poll listing topics have none."""
    dump = read_dumps(SAMPLE, "c")
    rows = dump.rows["topic_load"]
    reports = {r["ts"] for r in dump.rows["broker_load"]} | {r["ts"] for r in dump.rows["bundle_load"]}
    ticks = sorted({r["ts"] for r in rows})
    assert ticks and set(ticks) <= reports and min(reports) < ticks[0]
    last = [r for r in rows if r["ts"] == ticks[-1] and r["namespace"] == "lb/hot"]
    assert len({r["topic"] for r in last}) == len(last) >= 40
    assert sum(r["msg_rate_in"] for r in last) > 100 and all(r["topic"].startswith("persistent://lb/hot/") for r in last)


def test_a_split_divides_a_recorded_bundle_by_its_topics_hashes() -> None:
    """A recorded bundle keeps its recorded load whole; its halves get the shares its topics carry (each column by
    its own topic sums), uniform where the topics carry none of a column."""
    topics = ["persistent://t/ns/a", "persistent://t/ns/b", "persistent://t/ns/c"]
    pos = np.array([zlib.crc32(t.encode()) for t in topics], dtype=np.int64)
    rates = np.array([[1.0, 0.0], [3.0, 0.0], [6.0, 0.0]])
    order = np.argsort(pos)
    src = TopicWeightedLoad(np.array([0]), np.array([1 << 32]), np.array([[100.0, 8.0]]),
                            PointLoad(pos[order], rates[order]))
    mid = 1 << 31
    halves = src.range_sum(np.array([0, mid, 0]), np.array([mid, 1 << 32, 1 << 32]))
    low = rates[pos < mid, 0].sum() / rates[:, 0].sum()
    assert halves[:, 0] == pytest.approx([100 * low, 100 * (1 - low), 100.0])
    assert halves[:, 1] == pytest.approx([4.0, 4.0, 8.0])  # no topic carries column 1: by range
