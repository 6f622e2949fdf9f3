"""The per-line ServiceConfiguration key lists (conf/pulsar/service-configuration/, generated from the jars) and
the typo / suggestion rules built on them (lbreplay.kernel.service_configuration)."""

from __future__ import annotations

import pytest

from lbreplay.kernel import service_configuration as sc
from lbreplay.kernel.config import PulsarConfig, known_keys
from lbreplay.kernel.version_profile import PROFILES
from lbreplay.verify import PULSAR_LINES


def test_every_modelled_line_has_its_jars_key_list() -> None:
    """One list per line lbreplay models, generated from the jar the oracle checks (the header names it)."""
    assert sorted(p.stem for p in sc.KEYS_DIR.glob("*.txt")) == sorted(PROFILES)
    for line, (jar, _, _) in PULSAR_LINES.items():
        header = (sc.KEYS_DIR / f"{line}.txt").read_text(encoding="utf-8").splitlines()[1]
        assert f"pulsar-broker-common {jar} " in header, (line, header)


def test_keys_appear_in_the_lines_that_introduced_them() -> None:
    """PIP-357 (4.0) added loadBalancerBandwidthInResourceWeight; PIP-380 (4.1) loadBalancerSheddingExcludedNamespaces;
    AvgShedder's keys are in 3.0.7 (not in 2.11); the misspelt loadBalancerBandwith* stays in every line."""
    assert "loadBalancerBandwidthInResourceWeight" in sc.line_keys("4.0")
    assert "loadBalancerBandwidthInResourceWeight" not in sc.line_keys("3.3")
    assert "loadBalancerSheddingExcludedNamespaces" in sc.line_keys("4.2")
    assert "loadBalancerSheddingExcludedNamespaces" not in sc.line_keys("4.0")
    assert "loadBalancerAvgShedderLowThreshold" in sc.line_keys("3.0")  # the keys in 3.0.7, the class from 3.3
    assert "loadBalancerAvgShedderLowThreshold" not in sc.line_keys("2.11")
    assert all("loadBalancerBandwithInResourceWeight" in sc.line_keys(line) for line in PROFILES)
    assert sc.line_keys("4.x") == sc.line_keys("4.2")  # aliases resolved
    assert sc.lines_with("loadBalancerSheddingExcludedNamespaces") == ["4.2", "5.0"]


def test_every_modelled_key_is_a_pulsar_key_or_lbreplays_own() -> None:
    """The keys of conf/pulsar/defaults.yaml are ServiceConfiguration keys of some line, except lbreplay's own two."""
    assert set(known_keys()) - sc.any_line_keys() == set(sc.LBREPLAY_KEYS)


def test_default_line_is_the_newest_released_line_the_oracle_checks() -> None:
    """DESIGN.md section 6: never a milestone (5.0 is checked on 5.0.0-M1)."""
    released = [line for line, (jar, _, _) in PULSAR_LINES.items() if "-" not in jar]
    newest = max(released, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert newest == "4.2"
    assert PulsarConfig.resolve({})["pulsarVersion"] == newest


@pytest.mark.parametrize(("key", "meant"), [
    ("loadBalancerShedingGracePeriodMinutes", "loadBalancerSheddingGracePeriodMinutes"),  # one letter dropped
    ("loadbalancerSheddingEnabled", "loadBalancerSheddingEnabled"),  # case only
    ("loadBalancerBrokerOverloadThresholdPercentage", "loadBalancerBrokerOverloadedThresholdPercentage"),
    ("kafkaListeners", None),  # a protocol handler's key
    ("messagingProtocols", "messagingProtocols"),  # a real key is its own closest
    ("mqttProxyEnabled", None),
])
def test_likely_typo(key: str, meant: str | None) -> None:
    assert sc.likely_typo(key, sc.any_line_keys()) == meant


def test_edit_distance() -> None:
    assert sc.edit_distance("kitten", "sitting") == 3
    assert sc.edit_distance("", "abc") == 3 and sc.edit_distance("same", "same") == 0


def test_did_you_mean_names_the_closest_keys_first() -> None:
    text = sc.did_you_mean("loadBalancerBrokerThresholdShederPercentage", sc.line_keys("4.0"))
    assert text.startswith("; did you mean loadBalancerBrokerThresholdShedderPercentage")
    assert sc.did_you_mean("zzzzzz", sc.line_keys("4.0")) == ""
