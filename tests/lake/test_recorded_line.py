"""The Pulsar line of a recording (lake/recorded_line.py): read from broker_load.broker_version, a release naming its
line, an upgrade in the window refused unless the line is explicit, the default where nothing says the line."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from lbreplay.errors import UsageError
from lbreplay.lake.recorded_line import VersionSeen, choose_line, recorded_versions, release_line
from lbreplay.lake.window import window_from_flags

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 11, 25, 20, 0)


def _seen(version: str, first_min: int, last_min: int, brokers: int = 3) -> VersionSeen:
    return VersionSeen(version, T0 + dt.timedelta(minutes=first_min), T0 + dt.timedelta(minutes=last_min), brokers)


@pytest.mark.parametrize(("version", "line"), [
    ("4.0.7", "4.0"), ("3.0.12", "3.0"), ("2.10.5", "2.10"), ("4.1.0-SNAPSHOT", "4.1"), ("5.0.0-M1", "5.0"),
    ("v3.3.6", "3.3"), ("unknown", None), ("", None), (None, None),
])
def test_release_line(version: str | None, line: str | None) -> None:
    assert release_line(version) == line


def test_the_recorded_line() -> None:
    choice = choose_line([_seen("4.0.7", 0, 30), _seen("4.0.6", 0, 10, 1)], None)
    assert (choice.line, choice.source, choice.warnings) == ("4.0", "recording", ())
    assert choice.message() == "Pulsar line 4.0 (from the recording: brokers report 4.0.6, 4.0.7)"


def test_mixed_lines_are_refused_with_versions_and_time_ranges() -> None:
    seen = [_seen("3.3.6", 0, 20, 3), _seen("4.0.7", 15, 40, 2)]
    with pytest.raises(UsageError, match=r"several Pulsar lines \(3\.3\.6 \(2026-11-25T20:00:00Z \.\. "
                                         r"2026-11-25T20:20:00Z, 3 brokers\), 4\.0\.7 \(2026-11-25T20:15:00Z \.\. "
                                         r"2026-11-25T20:40:00Z, 2 brokers\)\)") as exc:
        choose_line(seen, None)
    assert exc.value.exit_code == 2
    explicit = choose_line(seen, "4.0")
    assert (explicit.line, explicit.source) == ("4.0", "explicit")
    assert explicit.warnings == ("pulsarVersion 4.0 (explicit) differs from the recording: brokers report 3.3.6 "
                                 "(2026-11-25T20:00:00Z .. 2026-11-25T20:20:00Z, 3 brokers), 4.0.7 "
                                 "(2026-11-25T20:15:00Z .. 2026-11-25T20:40:00Z, 2 brokers)",)


def test_explicit_line_disagreeing_with_the_recording_warns_naming_both() -> None:
    choice = choose_line([_seen("4.0.7", 0, 30)], "3.3")
    assert choice.message() == "Pulsar line 3.3 (explicit)"
    assert choice.warnings == ("pulsarVersion 3.3 (explicit) differs from the recording: brokers report 4.0.7 "
                               "(2026-11-25T20:00:00Z .. 2026-11-25T20:30:00Z, 3 brokers)",)
    assert choose_line([_seen("4.0.7", 0, 30)], "4.0").warnings == ()


def test_default_where_nothing_says_the_line() -> None:
    """No version (a generated lake's brokers report none): the newest released line the oracle checks. Every
    release names its line, 4.0.4 too (once the generator's placeholder, now a cluster's real version)."""
    empty = choose_line([], None)
    assert (empty.line, empty.source, empty.message()) == ("4.2", "default",
                                                           "Pulsar line 4.2 (default: newest released line)")
    real = choose_line([_seen("4.0.4", 0, 30)], None)
    assert real.message() == "Pulsar line 4.0 (from the recording: brokers report 4.0.4)"
    assert real.warnings == ()


def test_a_generated_lake_names_no_line() -> None:
    """``lbreplay generate`` writes a null broker_version (``tests/lake/test_generator.py`` reads it back) unless the
    scenario sets ``broker.version``; null rows are not read as versions (``test_recorded_versions_of_an_upgrade``)."""
    from lbreplay.lake.scenario import resolve_scenario

    base = {"brokers": 2, "namespaces": 1, "bundles_per_namespace": 2, "topics": 4, "ticks": 2}
    assert resolve_scenario(base).broker.version is None
    assert resolve_scenario({**base, "broker": {"version": "3.3.6"}}).broker.version == "3.3.6"


def test_a_line_lbreplay_does_not_model_is_replayed_as_the_one_before_it_with_a_warning() -> None:
    choice = choose_line([_seen("3.1.0", 0, 3)], None)
    assert (choice.line, choice.source) == ("3.0", "recording")
    assert choice.warnings == ("brokers report 3.1.0 (line 3.1, not modelled): replaying as Pulsar 3.0; set "
                               "pulsarVersion to choose another line",)
    with pytest.raises(UsageError, match=r"line 1\.9, which lbreplay does not model"):
        choose_line([_seen("1.9.0", 0, 3)], None)


# ------------------------------------------------------------------------------------------------------ Spark
def test_recorded_versions_of_the_real_sample(spark: Any, tmp_path: Path) -> None:
    """The committed real recording (Pulsar 4.0.7 brokers): two reports per broker read as ingest reads them,
    written to broker_load, the line read back."""
    from pyspark.sql import functions as F

    from lbreplay.lake import tables
    from lbreplay.lake.ingest import read_dumps, rows_frame

    src = REPO / "data" / "samples" / "real-modular-3brokers" / "loadbalance" / "brokers"
    for broker in sorted(src.iterdir()):
        dst = tmp_path / "dump" / "loadbalance" / "brokers" / broker.name
        dst.mkdir(parents=True)
        for report in sorted(broker.iterdir())[:2]:
            shutil.copy(report, dst / report.name)
    rows = read_dumps(tmp_path / "dump", "rl_real").rows[tables.BROKER_LOAD.name]
    lake = str(tmp_path / "lake")
    rows_frame(spark, tables.BROKER_LOAD, rows).withColumn("date", F.to_date("ts")) \
        .write.format("delta").save(f"{lake}/broker_load")
    seen = recorded_versions(spark, lake, "rl_real")
    assert [(v.version, v.brokers) for v in seen] == [("4.0.7", 3)]
    assert choose_line(seen, None).message() == "Pulsar line 4.0 (from the recording: brokers report 4.0.7)"
    assert recorded_versions(spark, lake, "rl_real", window_from_flags("2030-01-01", None)) == []


def test_recorded_versions_of_an_upgrade(spark: Any, tmp_path: Path) -> None:
    """A rolling upgrade 3.3.6 -> 4.0.7: both versions with their time ranges, per window."""
    from pyspark.sql import functions as F

    rows = [("up", T0 + dt.timedelta(minutes=m), f"b{b}:8080", v)
            for m, b, v in [(0, 1, "3.3.6"), (0, 2, "3.3.6"), (10, 1, "4.0.7"), (10, 2, "3.3.6"), (20, 2, "4.0.7"),
                            (20, 1, "4.0.7"), (20, 3, None)]]
    lake = str(tmp_path / "lake")
    (spark.createDataFrame(rows, "cluster STRING, ts TIMESTAMP, broker STRING, broker_version STRING")
     .withColumn("date", F.to_date("ts")).write.format("delta").save(f"{lake}/broker_load"))
    seen = recorded_versions(spark, lake, "up")
    assert [(v.version, v.first.minute, v.last.minute, v.brokers) for v in seen] == [("3.3.6", 0, 10, 2),
                                                                                     ("4.0.7", 10, 20, 2)]
    with pytest.raises(UsageError, match=r"several Pulsar lines"):
        choose_line(seen, None)
    after = recorded_versions(spark, lake, "up", window_from_flags("2026-11-25T20:15:00Z", None))
    assert choose_line(after, None).line == "4.0"



def test_replay_refuses_the_upgrade_unless_the_line_is_explicit(spark: Any, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """What ``replay`` / ``sweep`` do with the session they opened (spark_replay.with_lines): refuse the upgrade
    (exit 2), or with an explicit line warn and record it; the line stated on stderr."""
    from pyspark.sql import functions as F

    from lbreplay.replay.run_config import read_run_config
    from lbreplay.replay.spark_replay import with_lines

    rows = [("mix", T0 + dt.timedelta(minutes=m), "b1:8080", v) for m, v in [(0, "3.3.6"), (10, "4.0.7")]]
    lake = str(tmp_path / "lake")
    (spark.createDataFrame(rows, "cluster STRING, ts TIMESTAMP, broker STRING, broker_version STRING")
     .withColumn("date", F.to_date("ts")).write.format("delta").save(f"{lake}/broker_load"))
    with pytest.raises(UsageError, match=r"several Pulsar lines \(3\.3\.6 .*, 4\.0\.7 "):
        with_lines(spark, lake, "mix", None, [read_run_config(None)], quiet=False)
    [(pulsar, replay)] = with_lines(spark, lake, "mix", None, [read_run_config(None, sets=["pulsarVersion=4.0"])],
                                    quiet=False)
    assert pulsar == {"pulsarVersion": "4.0"}
    assert replay["pulsarLine"] == {"line": "4.0", "source": "explicit", "detail": "explicit"}
    err = capsys.readouterr().err
    assert "warning: pulsarVersion 4.0 (explicit) differs from the recording: brokers report 3.3.6" in err
    assert "Pulsar line 4.0 (explicit)" in err
