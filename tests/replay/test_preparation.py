"""``replay.preparation``: an extensible recording's report versions (BrokerLoadData + TopBundlesLoadData, each
published on its own by ``BrokerLoadDataReporter`` / ``TopBundleLoadDataReporter``) as the leader's stores hold
them: at every publication, each broker's latest of both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

T0 = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)
B1, B2 = "127.0.0.1:18081", "127.0.0.1:18082"


def _ts(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _s(ts: datetime) -> int:
    """Seconds after T0 of a timestamp Spark returned (naive, in the session's UTC)."""
    return int((ts.replace(tzinfo=UTC) - T0).total_seconds())


@pytest.mark.spark
def test_extensible_versions_are_the_latest_of_both_stores(spark: Any) -> None:
    from lbreplay.lake.dump_tables import BROKER_LOAD_DATA_EXT, TOP_BUNDLES_LOAD_DATA
    from lbreplay.lake.ingest import rows_frame
    from lbreplay.replay.preparation import extensible_report_versions

    def load(broker: str, s: float, ema: float | None) -> dict[str, Any]:
        tombstone = ema is None  # a tombstone row: every load column null, updated_at null
        return {"cluster": "c", "ts": _ts(s), "broker": broker, "weighted_max_ema": ema, "cpu_usage": None if
                tombstone else 10.0, "cpu_limit": None if tombstone else 100.0, "updated_at": None if tombstone else _ts(s)}

    def top(broker: str, s: float, bundles: list[str]) -> list[dict[str, Any]]:
        return [{"cluster": "c", "ts": _ts(s), "broker": broker, "position": i, "bundle": f"t/n/{b}", "namespace": "t/n",
                 "msg_rate_in": 1.0 + i} for i, b in enumerate(bundles)]

    load_rows = [load(B1, 10, 0.2), load(B1, 40, 0.3), load(B1, 50, None), load(B1, 55, 0.1), load(B2, 12, 0.5)]
    top_rows = (top(B1, 5, ["0x00000000_0x80000000"]) + top(B1, 20, ["0x00000000_0x80000000", "0x80000000_0xffffffff"])
                + top(B2, 30, ["0x80000000_0xffffffff"]))
    brokers, bundles = extensible_report_versions(rows_frame(spark, BROKER_LOAD_DATA_EXT, load_rows),
                                                  rows_frame(spark, TOP_BUNDLES_LOAD_DATA, top_rows))
    got = sorted((r["broker"], _s(r["ts"]), r["weighted_max_ema"], r["updated_at_ms"])
                 for r in brokers.collect())
    ms = int(T0.timestamp() * 1000)
    assert got == [  # B1's top list at 5 s comes before its first BrokerLoadData: no version yet
        (B1, 10, 0.2, ms + 10_000), (B1, 20, 0.2, ms + 10_000), (B1, 40, 0.3, ms + 40_000),
        (B1, 50, None, None), (B1, 55, 0.1, ms + 55_000),  # the tombstone: no load data until the next version
        (B2, 12, 0.5, ms + 12_000), (B2, 30, 0.5, ms + 12_000),
    ]
    listed = sorted((r["broker"], _s(r["ts"]), r["bundle"]) for r in bundles.collect())
    assert listed == [
        (B1, 10, "t/n/0x00000000_0x80000000"),  # the list published at 5 s is held at B1's first version
        *[(B1, s, f"t/n/{b}") for s in (20, 40, 50, 55) for b in ("0x00000000_0x80000000", "0x80000000_0xffffffff")],
        (B2, 30, "t/n/0x80000000_0xffffffff"),  # B2 had no list before 30 s
    ]
    assert {_s(r["last_update"]) for r in brokers.collect() if r["broker"] == B2} == {12, 30}


@pytest.mark.spark
def test_a_top_bundles_tombstone_clears_the_leaders_list_until_the_next(spark: Any) -> None:
    """The committed overshed recording (data/samples/real-extensible-overshed): 18081 tombstoned its
    TopBundlesLoadData (``TopBundleLoadDataReporter.tombstone``) 1.5 s before the leader's run and published its
    next list 50 s later. Each version from the tombstone (a version of its own) until that list says
    ``top_bundles_cleared`` 1 -- the leader's TransferShedder reads no bundle of it -- and keeps the last list as the
    broker's held bundles; an empty list clears it too; a lake without the publications clears nothing."""
    from lbreplay.lake.dump_tables import BROKER_LOAD_DATA_EXT, TOP_BUNDLES_LOAD_DATA, TOP_BUNDLES_PUBLICATION
    from lbreplay.lake.ingest import rows_frame
    from lbreplay.replay.preparation import extensible_report_versions

    load_rows = [{"cluster": "c", "ts": _ts(s), "broker": B1, "weighted_max_ema": 0.2, "cpu_usage": 10.0,
                  "cpu_limit": 100.0, "updated_at": _ts(s)} for s in (10, 66, 80)]
    top_rows = [{"cluster": "c", "ts": _ts(s), "broker": B1, "position": 0, "bundle": f"t/n/{b}", "namespace": "t/n"}
                for s, b in ((5, "0x00000000_0x80000000"), (115, "0x80000000_0xffffffff"))]
    pubs = [{"cluster": "c", "ts": _ts(s), "broker": B1, "listed": n}
            for s, n in ((5, 1), (65, None), (115, 1), (120, 0))]
    brokers, bundles = extensible_report_versions(rows_frame(spark, BROKER_LOAD_DATA_EXT, load_rows),
                                                  rows_frame(spark, TOP_BUNDLES_LOAD_DATA, top_rows),
                                                  rows_frame(spark, TOP_BUNDLES_PUBLICATION, pubs))
    got = sorted((_s(r["ts"]), r["top_bundles_cleared"]) for r in brokers.collect())
    assert got == [(10, 0.0), (65, 1.0), (66, 1.0), (80, 1.0), (115, 0.0), (120, 1.0)]
    held = sorted((_s(r["ts"]), r["bundle"][4:]) for r in bundles.collect())
    assert held == [(10, "0x00000000_0x80000000"), *[(s, "0x00000000_0x80000000") for s in (65, 66, 80)],
                    (115, "0x80000000_0xffffffff"), (120, "0x80000000_0xffffffff")]
    brokers, _ = extensible_report_versions(rows_frame(spark, BROKER_LOAD_DATA_EXT, load_rows),
                                            rows_frame(spark, TOP_BUNDLES_LOAD_DATA, top_rows))
    assert {r["top_bundles_cleared"] for r in brokers.collect()} == {0.0}
