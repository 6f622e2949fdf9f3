"""The committed extensible recording with a TopBundlesLoadData tombstone just before a run
(data/samples/real-extensible-overshed): 3 Pulsar 4.0.7 brokers, TransferShedder; the leader made 10 unloads and
the owners 3 splits."""

from __future__ import annotations

from pathlib import Path

import pytest

from lbreplay.lake.ingest import read_dumps
from lbreplay.live_audit.audit_check import check
from tests.live_audit.test_real_extensible_sample import assert_reproduced

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-extensible-overshed"
TOMBSTONE_MS = 1795882265173  # 18081 removed its TopBundlesLoadData, 1.5 s before the 16:11 run


def test_ingest_keeps_each_top_bundles_publication_and_tombstone() -> None:
    """Every TopBundlesLoadData message is a top_bundles_publication row: a list with its length (its bundles'
    rows in top_bundles_load_data), a tombstone with ``listed`` null (``TopBundleLoadDataReporter.tombstone``)."""
    rows = read_dumps(SAMPLE, "ext").rows
    pubs = rows["top_bundles_publication"]
    tombstones = sorted(int(r["ts"].timestamp() * 1000) for r in pubs if r.get("listed") is None)
    files = sorted(SAMPLE.glob("extensible/top-bundles-load-data/*/*.tombstone"))
    assert tombstones == sorted(int(f.stem) for f in files) and len(files) == 9
    assert TOMBSTONE_MS in tombstones
    lists = [r for r in pubs if r.get("listed") is not None]
    assert len(lists) == len(list(SAMPLE.glob("extensible/top-bundles-load-data/*/*.json"))) == 18
    assert sum(r["listed"] for r in lists) == len(rows["top_bundles_load_data"])


@pytest.mark.spark
def test_audit_holds_no_top_bundles_of_a_broker_that_removed_them(spark, lake: str, tmp_path: Path) -> None:
    """At the 16:11 run the leader held no TopBundlesLoadData of 18081 (tombstoned 1.5 s before) and could not swap
    bundles back to it ("Can't unload bundle ... greater than the target"): the audit, holding the same, makes the
    leader's 13 decisions (10 unloads to the leader's destinations, 3 splits) and nothing else. Holding 18081's
    previous list instead, it made 7 unloads more at that run."""
    report = check(SAMPLE, tmp_path, "real-ext-overshed", SAMPLE / "broker.conf", spark=spark, lake=lake)
    assert_reproduced(report, 13, 10)
