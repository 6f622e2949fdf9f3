"""The closed loop (what-if) on a committed real recording (data/samples/real-*): ``ingest`` -> ``validate`` ->
``replay`` under the recording's own broker.conf, both modes. The closed loop starts from the recorded state (the
bundles join as the recording's brokers report them, their recorded loads follow them) and, until its ownership
first departs from the recording's (its first applied decision), decides what the audit decides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lbreplay.errors import InvalidInputError, LbReplayError
from lbreplay.replay.load_model import MAX_CALIBRATION_MAPE
from lbreplay.replay.recorded_start import require_closed_loop_inputs, require_traffic, ticks_payload
from lbreplay.replay.stream_manifest import StreamManifest

SAMPLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "data" / "samples").glob("real-*") if p.is_dir())
SHED_OR_SPLIT = ("SPLIT", "UNLOAD", "TRANSFER")


WHATIF = sorted(p for p in (SAMPLES[0].parent / "whatif").glob("*-*") if p.is_dir()) if SAMPLES else []
# ModularLoadManagerImpl recordings: the real samples and the what-if experiment's runs (data/samples/whatif)
MODULAR = [p for p in SAMPLES + WHATIF if (p / "loadbalance" / "brokers").is_dir()]
END_TO_END = "real-modular-3brokers"


def _agree_until_departure(audit: list[tuple[int, str, str]], what_if: list[tuple[int, str, str]]) -> None:
    """Up to the tick of the closed loop's first decision (from there on its ownership is its own), its UNLOAD /
    SPLIT decisions (tick, action, bundle) are the audit's, and there is at least one. A KEEP (the placement kept a
    planned bundle on its owner) changes no ownership."""
    what_if = [d for d in what_if if d[1] != "KEEP"]
    audit_acts = [d for d in audit if d[1] in SHED_OR_SPLIT]
    assert audit_acts, "the audit makes no decision"
    assert what_if, "the closed loop makes no decision"
    first = what_if[0][0]
    mine = [d for d in what_if if d[0] <= first and d[1] in SHED_OR_SPLIT]
    assert mine and mine == [d for d in audit_acts if d[0] <= first]


@pytest.mark.parametrize("sample", MODULAR, ids=[f"{p.parent.name}/{p.name}" for p in MODULAR])
def test_closed_loop_decides_as_the_audit_until_it_departs_from_the_recording(sample: Path) -> None:
    """The engine over the recording's tick stream (no Spark: tests/replay/recording.py), both modes: the closed
    loop starts from the recorded state and makes the audit's first decisions, at the same ticks; before it took
    its bundles from the first tick only (none: the brokers had not reported yet) and made no decision at all."""
    from tests.replay.recording import replay_recording

    def keys(decisions: list[Any]) -> list[tuple[int, str, str]]:
        return sorted((d.tick, d.action, d.bundle) for d in decisions)

    _agree_until_departure(keys(replay_recording(sample, "observed")), keys(replay_recording(sample, "closed-loop")))


def _decisions(spark: Any, lake: str, run_id: str) -> list[tuple[int, str, str]]:
    from pyspark.sql import functions as F

    rows = spark.read.format("delta").load(f"{lake}/decisions").where(F.col("run_id") == run_id) \
        .select("tick", "action", "bundle").collect()
    return sorted((int(r[0]), r[1], r[2]) for r in rows)


@pytest.mark.spark
def test_the_closed_loop_of_an_ingested_recording_carries_its_traffic(spark: Any, lake: str) -> None:
    """``ingest`` -> ``validate`` -> ``replay`` both modes under the recording's broker.conf: the closed loop's
    brokers hold the recorded bundles and their traffic (not 0 msg/s with 0 bundles at every tick), it decides as
    the audit until it departs, and its calibration error is the fit's on real cpu readings (not ~1.2e7 from the
    ~1e-7 % cpu of each broker's first report)."""
    from pyspark.sql import functions as F

    audit, what_if = _audit_and_what_if(spark, lake, END_TO_END, "closed-loop-real")
    _agree_until_departure(_decisions(spark, lake, audit), _decisions(spark, lake, what_if))
    ticks = spark.read.format("delta").load(f"{lake}/broker_ticks").where(F.col("run_id") == what_if) \
        .agg(F.max("msg_rate"), F.max("num_bundles")).first()
    assert ticks[0] > 100 and ticks[1] >= 5
    mape = spark.read.format("delta").load(f"{lake}/run_metrics") \
        .where((F.col("run_id") == what_if) & (F.col("metric") == "calibration_mape")).first()
    assert mape is not None and 0 < mape["value"] < MAX_CALIBRATION_MAPE


@pytest.mark.spark
def test_the_closed_loop_of_an_extensible_recording_transfers_as_its_audit(spark: Any, lake: str) -> None:
    """real-extensible-transfer under its broker.conf, both modes: the closed loop publishes the recorded
    BrokerLoadData (moved by the modelled change) and top bundles lists, so its first TransferShedder run makes the
    audit's 7 transfers (before: 7 transfers at tick 29 where the leader made none, on load data it computed)."""
    audit, what_if = _audit_and_what_if(spark, lake, "real-extensible-transfer", "closed-loop-ext")
    mine = _decisions(spark, lake, what_if)
    _agree_until_departure(_decisions(spark, lake, audit), mine)
    assert [d[1] for d in mine if d[0] == mine[0][0]] == ["TRANSFER"] * 7


def _audit_and_what_if(spark: Any, lake: str, sample_name: str, cluster: str) -> tuple[str, str]:
    """Ingest and validate a committed sample as ``cluster``, replay it in both modes under its broker.conf; the
    two run ids (audit, what-if)."""
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.validation import validate
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.replay.spark_replay import execute

    sample = next(p for p in SAMPLES if p.name == sample_name)
    ingest(spark, lake, sample, cluster)
    assert validate(spark, lake, cluster).passed
    pulsar, options = resolve_run_config(None, str(sample / "broker.conf"), [])
    audit, what_if = f"{cluster}-audit", f"{cluster}-what-if"
    execute(spark, lake, cluster, [(pulsar, {**options, "mode": "observed"}), (pulsar, {**options, "mode": "closed-loop"})],
            run_ids=[audit, what_if], quiet=True)
    return audit, what_if


def _manifest(**fields: Any) -> StreamManifest:
    base: dict[str, Any] = {"broker_ids": ["a:8080"], "namespaces": ["t/ns"], "cpu_base": [1.0],
                            "cpu_per_msg": [0.01], "topics": False, "stream": "s", "calibration_mape": 0.2,
                            "recorded_traffic": True}
    return StreamManifest(**{**base, **fields})


def test_a_closed_loop_refuses_what_it_cannot_replay() -> None:
    """Exit 3, one line naming the table: no bundle loads, no cpu reading to calibrate on, a calibration error at
    or above the bound."""
    require_closed_loop_inputs(_manifest(), "c1")
    for fields, words in (({"namespaces": []}, "table=bundle_load: no rows"),
                          ({"calibration_mape": None}, "column=cpu_usage"),
                          ({"calibration_mape": MAX_CALIBRATION_MAPE}, "calibration error")):
        with pytest.raises(InvalidInputError, match=words) as err:
            require_closed_loop_inputs(_manifest(**fields), "c1")
        assert err.value.exit_code == 3 and "\n" not in str(err.value)


def test_a_closed_loop_without_traffic_is_never_written() -> None:
    """A closed loop whose ticks all carried zero traffic while bundle_load has traffic is refused (exit 1); an
    audit's slices, a run with traffic in any slice, or a recording without traffic pass."""
    rows = [("w", ticks_payload(10, False)), ("a", ticks_payload(5, False)), ("a", ticks_payload(5, True))]
    with pytest.raises(LbReplayError, match="run w .*no traffic") as err:
        require_traffic(_manifest(), "c1", {"w"}, rows)
    assert err.value.exit_code == 1
    require_traffic(_manifest(), "c1", {"a"}, rows)
    require_traffic(_manifest(recorded_traffic=False), "c1", {"w"}, rows)
    assert json.loads(ticks_payload(3, True)) == [3, True]
