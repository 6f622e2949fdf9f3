"""``collect.extensible``: what the recorder writes for each message of the extensible load manager's system topics,
and how ``ingest`` reads it back."""

from __future__ import annotations

import json
from pathlib import Path

from lbreplay.collect.extensible import ExtensibleRecorder
from lbreplay.collect.layout import JsonLines
from lbreplay.lake.ingest import read_dumps

BROKER = "127.0.0.1:18081"
LOAD_DATA = {"cpu": {"usage": 20.0, "limit": 100.0}, "memory": {"usage": 100.0, "limit": 1000.0},
             "directMemory": {"usage": 1.0, "limit": 256.0}, "bandwidthIn": {"usage": 1.0, "limit": 10000.0},
             "bandwidthOut": {"usage": 1.0, "limit": 10000.0}, "msgThroughputIn": 1.0, "msgThroughputOut": 2.0,
             "msgRateIn": 3.0, "msgRateOut": 4.0, "bundleCount": 2, "topics": 3, "maxResourceUsage": 0.2,
             "weightedMaxEMA": 0.2, "msgThroughputEMA": 3.0, "updatedAt": 1795772323939, "reportedAt": 0}


def _recorder(out: Path) -> ExtensibleRecorder:
    """The recorder's writing half, without a Pulsar client (its readers hand each message to ``_write``)."""
    rec = object.__new__(ExtensibleRecorder)
    rec.out = out
    rec.units = JsonLines(out / "collect" / "extensible" / "service-unit-state.jsonl")
    rec.counts = {"broker-load-data": 0, "top-bundles-load-data": 0, "service-unit-state": 0}
    return rec


def test_a_tombstone_is_recorded_and_ingested_as_no_load_data(tmp_path: Path) -> None:
    """An empty BrokerLoadData message is the broker's tombstone (``BrokerLoadDataReporter.tombstone``: it removed
    its entry when a bundle left or reached it): kept as ``<publish ms>.tombstone``, read by ingest as a
    broker_load_data_ext row without load data between the broker's two versions."""
    rec = _recorder(tmp_path)
    rec._write("broker-load-data", BROKER, 1795772323939, json.dumps(LOAD_DATA).encode())
    rec._write("broker-load-data", BROKER, 1795772429026, b"")
    rec._write("broker-load-data", BROKER, 1795772433938,
               json.dumps({**LOAD_DATA, "updatedAt": 1795772433938}).encode())
    rec._write("top-bundles-load-data", BROKER, 1795772429030, b"")
    rec.units.close()
    files = sorted(p.name for p in (tmp_path / "extensible").rglob("*") if p.is_file())
    assert files == ["1795772323939.json", "1795772429026.tombstone", "1795772429030.tombstone", "1795772433938.json"]
    assert rec.counts["broker-load-data"] == 3
    rows = sorted(read_dumps(tmp_path, "c").rows["broker_load_data_ext"], key=lambda r: r["ts"])
    assert [(r["broker"], r.get("weighted_max_ema"), r.get("updated_at") is None) for r in rows] == [
        (BROKER, 0.2, False), (BROKER, None, True), (BROKER, 0.2, False)]
    assert rows[1]["ts"].isoformat(timespec="milliseconds") == "2026-11-27T09:40:29.026+00:00"
