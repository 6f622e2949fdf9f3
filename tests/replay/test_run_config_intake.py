"""Config intake that never guesses silently (replay/run_config.py): every key checked against the chosen Pulsar
line's ServiceConfiguration keys, broker.conf typos refused with file:line, plugin keys warned about and kept with
the run, the line applied by ``finish``, sweep precedence and point labels. The CLI cases are refused before Spark
starts (no lake needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lbreplay.errors import UsageError
from lbreplay.lake.recorded_line import LineChoice
from lbreplay.replay.run_config import finish, grid_points, read_broker_conf, read_run_config
from tests.hostile.harness import cli


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _refused(argv: list[str], pattern: str) -> str:
    res = cli(None, *argv)
    assert res.code == 2, (res.code, res.err[-2000:])
    assert re.search(pattern, res.err), res.err
    return res.err


# ---------------------------------------------------------------------------------------------- YAML and --set
def test_unknown_yaml_key_exits_2_with_the_closest_keys(tmp_path: Path) -> None:
    conf = _file(tmp_path, "typo.yaml", "pulsar:\n  loadBalancerBrokerThresholdShederPercentage: 5\n")
    err = _refused(["replay", "--cluster", "c", "--config", conf, "--lake", str(tmp_path / "l")],
                   r"typo\.yaml: pulsar\.loadBalancerBrokerThresholdShederPercentage: unknown config key .*"
                   r"did you mean loadBalancerBrokerThresholdShedderPercentage")
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1
    assert not (tmp_path / "l").exists()


def test_unknown_set_key_exits_2_with_the_closest_keys(tmp_path: Path) -> None:
    _refused(["replay", "--cluster", "c", "--set", "loadBalancerShedingGracePeriodMinutes=30", "--lake",
              str(tmp_path / "l")],
             r"pulsar\.loadBalancerShedingGracePeriodMinutes: unknown config key .*did you mean "
             r"loadBalancerSheddingGracePeriodMinutes")


def test_key_of_another_line_is_refused_on_an_explicit_line(tmp_path: Path) -> None:
    """loadBalancerSheddingExcludedNamespaces is first in 4.1 (PIP-380): on 4.0 it is not a key; on 4.2 it is."""
    _refused(["replay", "--cluster", "c", "--set", "pulsarVersion=4.0", "--set",
              "loadBalancerSheddingExcludedNamespaces=a/b", "--lake", str(tmp_path / "l")],
             r"pulsar\.loadBalancerSheddingExcludedNamespaces: not a ServiceConfiguration key of Pulsar 4\.0 .*"
             r"lines with it: 4\.2, 5\.0")
    intake = read_run_config(None, sets=["pulsarVersion=4.2", "loadBalancerSheddingExcludedNamespaces=a/b"])
    assert intake.pulsar["loadBalancerSheddingExcludedNamespaces"] == ["a/b"]


def test_a_pulsar_key_the_replay_does_not_use_is_a_warning(tmp_path: Path) -> None:
    conf = _file(tmp_path, "other.yaml", "pulsar:\n  brokerServicePort: 6650\n  loadBalancerSheddingEnabled: false\n")
    intake = read_run_config(conf)
    assert intake.pulsar == {"loadBalancerSheddingEnabled": False}
    assert intake.warnings == [f"{conf}: pulsar.brokerServicePort is a Pulsar broker.conf key the replay does not "
                               "use; ignored"]


def test_name_is_accepted_and_stored_with_the_line(tmp_path: Path) -> None:
    conf = _file(tmp_path, "named.yaml", "name: cautious shedding\npulsar:\n  loadBalancerSheddingEnabled: false\n")
    intake = read_run_config(conf)
    assert intake.name == "cautious shedding" and intake.explicit_version is None
    pulsar, replay = finish(intake, LineChoice("4.0", "recording", "from the recording: brokers report 4.0.7"))
    assert pulsar == {"loadBalancerSheddingEnabled": False, "pulsarVersion": "4.0"}
    assert replay["name"] == "cautious shedding"
    assert replay["pulsarLine"] == {"line": "4.0", "source": "recording",
                                    "detail": "from the recording: brokers report 4.0.7"}
    assert "unknownKeys" not in replay


def test_explicit_version_is_kept_as_given() -> None:
    intake = read_run_config(None, sets=["pulsarVersion=4.x"])
    assert intake.explicit_version == "4.x"
    pulsar, replay = finish(intake, LineChoice("4.x", "explicit", "explicit"))
    assert pulsar == {"pulsarVersion": "4.x"} and replay["pulsarLine"]["source"] == "explicit"


# ---------------------------------------------------------------------------------------------- broker.conf
def test_broker_conf_typo_exits_2_with_file_line_and_suggestion(tmp_path: Path) -> None:
    conf = _file(tmp_path, "broker.conf", "clusterName=prod\n# a comment\nloadBalancerShedingGracePeriodMinutes=30\n")
    _refused(["replay", "--cluster", "c", "--broker-conf", conf, "--lake", str(tmp_path / "l")],
             re.escape(conf) + r":3: unknown key 'loadBalancerShedingGracePeriodMinutes'; did you mean "
             r"loadBalancerSheddingGracePeriodMinutes\?")
    grid = _file(tmp_path, "grid.yaml", "grid:\n  loadBalancerBrokerThresholdShedderPercentage: [5, 10]\n")
    _refused(["sweep", "--cluster", "c", "--grid", grid, "--broker-conf", conf, "--lake", str(tmp_path / "l")],
             re.escape(conf) + r":3: unknown key")


def test_allow_unknown_keys_turns_the_typo_into_a_warning(tmp_path: Path) -> None:
    conf = _file(tmp_path, "broker.conf", "loadBalancerShedingGracePeriodMinutes=30\nloadBalancerSheddingEnabled=false\n")
    values, lines, unknown, warnings = read_broker_conf(conf, allow_unknown_keys=True)
    assert values == {"loadBalancerSheddingEnabled": "false"} and lines == {"loadBalancerSheddingEnabled": 2}
    assert unknown == ["loadBalancerShedingGracePeriodMinutes"]
    assert warnings == [f"{conf}:1: unknown key 'loadBalancerShedingGracePeriodMinutes'; did you mean "
                        "loadBalancerSheddingGracePeriodMinutes? (ignored: --allow-unknown-keys)"]
    with pytest.raises(UsageError, match=r"--allow-unknown-keys to replay with it ignored"):
        read_broker_conf(conf)


def test_plugin_keys_warn_once_and_are_kept_with_the_run(tmp_path: Path) -> None:
    """Keys far from any Pulsar key (a protocol handler's) are ignored as Pulsar ignores them: one warning, and the
    run's replay options list them. Non-load-balancer Pulsar keys neither warn nor error."""
    conf = _file(tmp_path, "broker.conf", "kafkaListeners=PLAINTEXT://0.0.0.0:9092\nmessagingProtocols=kafka\n"
                 "brokerServicePort=6650\nkopSchemaRegistryEnable=true\nloadBalancerBrokerThresholdShedderPercentage=5\n")
    intake = read_run_config(None, conf)
    assert intake.pulsar == {"loadBalancerBrokerThresholdShedderPercentage": 5}
    assert intake.warnings == [f"{conf}: 2 key(s) no Pulsar line knows, ignored as Pulsar ignores them (stored with "
                               "the run): kafkaListeners, kopSchemaRegistryEnable"]
    _, replay = finish(intake, LineChoice("4.0", "default", "default: newest released line"))
    assert replay["unknownKeys"] == ["kafkaListeners", "kopSchemaRegistryEnable"]


def test_broker_conf_key_of_a_newer_line_is_dropped_on_the_recorded_line(tmp_path: Path) -> None:
    """A 4.0 broker.conf carrying loadBalancerSheddingExcludedNamespaces: Pulsar 4.0 ignores it, so does the replay
    (with a warning naming file and line); on 4.2 it is used."""
    conf = _file(tmp_path, "broker.conf", "loadBalancerSheddingExcludedNamespaces=t/ns\nminUnloadMessage=5\n")
    intake = read_run_config(None, conf)
    pulsar, replay = finish(intake, LineChoice("4.0", "recording", "from the recording: brokers report 4.0.7"))
    assert pulsar == {"minUnloadMessage": 5, "pulsarVersion": "4.0"}
    assert replay["unknownKeys"] == ["loadBalancerSheddingExcludedNamespaces"]
    assert intake.warnings[-1] == (f"{conf}:1: loadBalancerSheddingExcludedNamespaces is not a key of Pulsar 4.0; "
                                   "ignored, as Pulsar 4.0 ignores it")
    pulsar42, _ = finish(read_run_config(None, conf), LineChoice("4.2", "default", "default"))
    assert pulsar42["loadBalancerSheddingExcludedNamespaces"] == ["t/ns"]


def test_the_real_samples_broker_conf_is_read_without_warnings() -> None:
    conf = Path(__file__).resolve().parents[2] / "data" / "samples" / "real-modular-3brokers" / "broker.conf"
    intake = read_run_config(None, str(conf))
    assert intake.warnings == [] and intake.unknown_keys == []
    assert intake.pulsar  # the sample sets load-balancer keys


# ---------------------------------------------------------------------------------------------- sweep
def test_sweep_precedence_and_point_labels(tmp_path: Path) -> None:
    """Pulsar defaults < broker.conf < YAML pulsar: < grid point < --set; each point is named by the grid key that
    varies, and the YAML's name: (when given) is the run's name."""
    conf = _file(tmp_path, "broker.conf", "loadBalancerBrokerThresholdShedderPercentage=1\nminUnloadMessage=11\n"
                 "maxUnloadPercentage=0.3\nloadBalancerHistoryResourcePercentage=0.5\n")
    grid = _file(tmp_path, "grid.yaml", "pulsar:\n  minUnloadMessage: 22\n  maxUnloadPercentage: 0.4\n"
                 "grid:\n  loadBalancerBrokerThresholdShedderPercentage: [5, 10]\n  maxUnloadPercentage: [0.5]\n"
                 "  loadBalancerHistoryResourcePercentage: [0.6]\n")
    points = grid_points(grid, conf, ["loadBalancerHistoryResourcePercentage=0.7"])
    assert [p.pulsar for p in points] == [
        {"loadBalancerBrokerThresholdShedderPercentage": t, "minUnloadMessage": 22, "maxUnloadPercentage": 0.5,
         "loadBalancerHistoryResourcePercentage": 0.7} for t in (5, 10)]
    assert [p.label for p in points] == ["loadBalancerBrokerThresholdShedderPercentage=5",
                                         "loadBalancerBrokerThresholdShedderPercentage=10"]
    _, replay = finish(points[1], LineChoice("4.2", "default", "default"))
    assert replay["name"] == replay["label"] == "loadBalancerBrokerThresholdShedderPercentage=10"
    named = _file(tmp_path, "named.yaml", "name: thresholds\ngrid:\n  loadBalancerLoadPlacementStrategy: "
                  "[LeastLongTermMessageRate, LeastResourceUsageWithWeight]\n")
    _, replay = finish(grid_points(named)[1], LineChoice("4.2", "default", "default"))
    assert (replay["name"], replay["label"]) == ("thresholds", "loadBalancerLoadPlacementStrategy="
                                                 "LeastResourceUsageWithWeight")


def test_unknown_grid_key_exits_2(tmp_path: Path) -> None:
    grid = _file(tmp_path, "grid.yaml", "grid:\n  loadBalancerBrokerThresholdShedderPercentag: [5, 10]\n")
    _refused(["sweep", "--cluster", "c", "--grid", grid, "--lake", str(tmp_path / "l")],
             r"grid\.loadBalancerBrokerThresholdShedderPercentag: unknown config key .*did you mean "
             r"loadBalancerBrokerThresholdShedderPercentage")
