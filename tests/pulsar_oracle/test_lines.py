"""Each released Pulsar line that ``pulsarVersion`` names, checked against that line's newest jar (issue 16).

The 4.0 line runs 500 cases per strategy in ``test_differential.py``; every other line runs ``CASES`` seeded cases
per strategy here (``lbreplay.verify.verify``: the same generator and comparison as ``lbreplay verify``). A line
whose jar or dependency tree Maven cannot resolve is skipped (the reason names the line); a strategy the line's
jar does not have is reported "not in this line" and not compared.
"""

from __future__ import annotations

import pytest
from lbreplay.kernel.config import PulsarConfig
from lbreplay.verify import NOT_IN_LINE, PULSAR_LINES, STRATEGIES, Oracle, OracleError, line_strategies, verify

CASES = 30
LINES = [line for line in PULSAR_LINES if line != "4.0"]


def _oracle_or_skip(line: str) -> Oracle:
    jar, _, java = PULSAR_LINES[line]
    try:
        return Oracle(jar, java, extensible="TransferShedder" in line_strategies(line))
    except OracleError as e:
        if "resolve" in str(e):
            pytest.skip(f"Pulsar {line}: the jar {jar} or its dependencies do not resolve from Maven Central: {e}")
        raise


@pytest.mark.parametrize("line", LINES)
def test_line_agrees_with_its_jar(line: str) -> None:
    """``CASES`` random snapshots / sequences per strategy agree exactly with the line's jar; the strategies the
    jar lacks are reported as such."""
    _oracle_or_skip(line).close()
    results = verify(line, CASES, seed=11)
    assert [r["strategy"] for r in results] == list(STRATEGIES)
    missing = [r["strategy"] for r in results if r.get("status") == NOT_IN_LINE]
    assert missing == [s for s in STRATEGIES if s not in line_strategies(line)]
    bad = [(r["strategy"], r["agree"], r["examples"][:1]) for r in results
           if r.get("status") != NOT_IN_LINE and r["agree"] != r["cases"]]
    assert not bad, f"Pulsar {line} ({PULSAR_LINES[line][0]}) disagrees: {bad}"


@pytest.mark.parametrize("line", list(PULSAR_LINES))
def test_config_defaults_are_the_jars(line: str) -> None:
    """``conf/pulsar/defaults.yaml`` for the line equals the line's ``ServiceConfiguration`` defaults for every key
    the jar has (keys the jar lacks are lbreplay's or a later line's)."""
    jar, profile, _ = PULSAR_LINES[line]
    with _oracle_or_skip(line) as oracle:
        defaults = oracle.ask({"configDefaults": True})["oracle"]["configDefaults"]
        assert oracle.ask({"pulsarVersionCheck": True})["oracle"]["implementationVersion"] == jar
    conf = PulsarConfig.resolve({"pulsarVersion": profile})
    diffs = []
    for key in conf:
        if key == "pulsarVersion" or key not in defaults:
            continue
        ours, theirs = conf[key], defaults[key]
        if isinstance(ours, (int, float)) and not isinstance(ours, bool) and isinstance(theirs, (int, float)):
            same = float(ours) == float(theirs)
        else:
            same = ours == theirs
        if not same:
            diffs.append((key, ours, theirs))
    assert not diffs, f"defaults.yaml {line} vs {jar}'s ServiceConfiguration: {diffs}"
    assert "loadBalancerLoadSheddingStrategy" in defaults
