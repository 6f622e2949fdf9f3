"""The example ``decide`` snapshots of data/samples/decide/, each run through the CLI as the README shows it.

Every sample is the request of a conformance case (tests/conformance/cases/), i.e. of a ported Pulsar unit test,
so the outcome asserted here is the one the Pulsar test asserts (or its formula evaluated on the inputs):

* threshold-shedder.json   ThresholdShedderTest#testBrokerWithMultipleBundles
* avg-shedder.json         AvgShedderTest#testSheddingMultiplePairs
* transfer-shedder-extensible.json   TransferShedderTest#testLoadMoreThan100
* split.json               TopicCountEquallyDivideBundleSplitAlgorithmTest#testAlgorithmReturnCorrectResult and
                           RangeEquallyDivideBundleSplitAlgorithmTest#testGetSplitBoundaryMethodReturnCorrectResult
* split-check.json         BundleSplitterTaskTest#testLoadBalancerNamespaceMaximumBundles
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

SAMPLES = REPO / "data" / "samples" / "decide"
CASES = REPO / "tests" / "conformance" / "cases"
LBREPLAY = str(Path(sys.executable).with_name("lbreplay"))


def run_decide(request: str | Path, stdin: str | None = None) -> dict[str, Any]:
    """``lbreplay decide --request <request>`` as a user runs it; the parsed JSON of stdout."""
    proc = subprocess.run([LBREPLAY, "decide", "--request", str(request)], input=stdin, capture_output=True,
                          text=True, cwd=REPO, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


def test_every_sample_is_tested() -> None:
    """Each sample file has a test below (a new sample without one fails here)."""
    assert sorted(p.name for p in SAMPLES.glob("*.json")) == [
        "avg-shedder.json", "split-check.json", "split.json", "threshold-shedder.json",
        "transfer-shedder-extensible.json",
    ]


def test_threshold_shedder_unloads_the_three_largest_bundles() -> None:
    """ThresholdShedderTest#testBrokerWithMultipleBundles: broker-1 (99.9 % bandwidth) sheds bundle-10, -9, -8
    (the largest first) until its excess over the average + 10 % threshold is covered; broker2 gets them."""
    out = run_decide("data/samples/decide/threshold-shedder.json")
    assert [(u["broker"], u["bundle"]) for u in out["unload"]] == [
        ("broker-1:8080", "t/ns/0x90000000_0xa0000000"),
        ("broker-1:8080", "t/ns/0x80000000_0x90000000"),
        ("broker-1:8080", "t/ns/0x70000000_0x80000000"),
    ]
    assert {u["destination"] for u in out["unload"]} == {"broker2:8080"}
    assert out["skip"] is None and out["split"] == []


def test_avg_shedder_unloads_twenty_bundles_on_the_second_run() -> None:
    """AvgShedderTest#testSheddingMultiplePairs: hit count threshold 2, so the first shedding run decides nothing;
    the second moves 10 bundles broker1 -> broker2 and 10 broker3 -> broker4 (the pairs 80/30 % and 75/35 %)."""
    out = run_decide("data/samples/decide/avg-shedder.json")
    moves = [(u["broker"], u["destination"]) for u in out["unload"]]
    assert len(moves) == 20
    assert moves.count(("broker1:8080", "broker2:8080")) == 10
    assert moves.count(("broker3:8080", "broker4:8080")) == 10


def test_avg_shedder_across_two_calls_with_strategy_state() -> None:
    """The same two runs as two ``decide`` calls: the first answers skip HitCount, and its strategyState passed
    back makes the second call unload the 20 bundles (one strategy instance over successive calls)."""
    request = json.loads((SAMPLES / "avg-shedder.json").read_text(encoding="utf-8"))
    request["actions"] = ["shed"]
    first = run_decide("-", json.dumps(request))
    assert first["unload"] == [] and first["skip"] == "HitCount"
    second = run_decide("-", json.dumps({**request, "strategyState": first["strategyState"]}))
    assert len(second["unload"]) == 20
    assert {u["bundle"].split("/")[1] for u in second["unload"]} == {"b1", "b3"}


def test_transfer_shedder_transfers_from_the_two_overloaded_brokers() -> None:
    """TransferShedderTest#testLoadMoreThan100: broker5 and broker4 (1000 % / 200 % cpu) each transfer their
    largest bundle to the least loaded brokers; Pulsar's figures: avg 2.424, std 3.8633, after shedding 2.7816."""
    out = run_decide("data/samples/decide/transfer-shedder-extensible.json")
    assert sorted((u["broker"], u["bundle"], u["destination"], u["reason"]) for u in out["unload"]) == [
        ("broker4:8080", "my-tenant/my-namespaceD/0x00000000_0x0fffffff", "broker2:8080", "Overloaded"),
        ("broker5:8080", "my-tenant/my-namespaceE/0x00000000_0x0fffffff", "broker1:8080", "Overloaded"),
    ]
    stats = out["stats"]
    for key, value in (("loadAvg", 2.4240000000000004), ("loadStd", 3.8633332758124816),
                       ("loadStdAfterShedding", 2.781643776903451)):
        assert math.isclose(stats[key], value, rel_tol=1e-9), key


def test_operator_splits_find_the_documented_boundaries() -> None:
    """Two operator splits (`pulsar-admin namespaces split-bundle`): topic_count_equally_divide of t/tc with
    topics a, b, c -> 0x445b9f54 (midway between the 1st and 2nd sorted topic hashes); range_equally_divide of
    [0x0000000a, 0xffffffff] -> lower + (upper - lower) / 2 = 0x80000004."""
    out = run_decide("data/samples/decide/split.json")
    assert [(s["bundle"], s["boundaries"], s["algorithm"]) for s in out["split"]] == [
        ("t/tc/0x00000000_0xffffffff", ["0x445b9f54"], "topic_count_equally_divide"),
        ("pulsar/system/0x0000000a_0xffffffff", ["0x80000004"], "range_equally_divide"),
    ]
    assert 0x0000000A + (0xFFFFFFFF - 0x0000000A) // 2 == 0x80000004


def test_split_check_stops_at_the_namespace_maximum() -> None:
    """BundleSplitterTaskTest#testLoadBalancerNamespaceMaximumBundles: three bundles over the msg-rate limit, 4
    bundles in the namespace and a maximum of 6, so 2 splits (planned splits count against the cap), each at
    the range midpoint (range_equally_divide, the default algorithm)."""
    out = run_decide("data/samples/decide/split-check.json")
    assert len(out["split"]) == 2
    hot = {"ten/ns/0x00000000_0x20000000": "0x10000000", "ten/ns/0x20000000_0x40000000": "0x30000000",
           "ten/ns/0x40000000_0x60000000": "0x50000000"}
    for s in out["split"]:
        assert s["broker"] == "broker" and s["boundaries"] == [hot[s["bundle"]]]


@pytest.mark.parametrize("sample, case", [
    ("threshold-shedder.json", "threshold_shedder_multiple_bundles"),
    ("transfer-shedder-extensible.json", "transfer_shedder_load_more_than_100"),
    ("split-check.json", "bundle_splitter_namespace_maximum_bundles"),
])
def test_sample_is_its_conformance_case(sample: str, case: str) -> None:
    """A sample stays the request of the conformance case it was taken from (so their outcomes stay Pulsar's)."""
    sample_request = json.loads((SAMPLES / sample).read_text(encoding="utf-8"))
    case_request = json.loads((CASES / f"{case}.json").read_text(encoding="utf-8"))["request"]
    assert sample_request == case_request
