"""The floor benchmark's closed loop (``bench/floor.py``) decides exactly what the kernel's replay decides.

The floor re-implements the leader loop of the modular load manager's defaults (``ThresholdShedder`` +
``LeastLongTermMessageRate`` + ``ModularLoadManagerImpl#checkNamespaceBundleSplit``) as whole-array NumPy, to
measure how far the kernel loop is from its floor; these tests run both over one prepared tick stream of a small
scenario (heterogeneous brokers and a hot bundle, so the stream holds unloads, splits and the placement of the
split children) and require equal decisions at every tick.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCENARIO = {
    "name": "floor-small",
    "brokers": 6,
    "namespaces": 2,
    "bundles_per_namespace": 8,
    "topics": 400,
    "ticks": 90,
    "broker": {"capacity_factors": [1.0, 0.5, 2.0]},
    "traffic": {"target_utilization": 0.4,
                "hot_bundle": {"namespace": 0, "bundle": 3, "threshold_factor": 6.0, "ramp": [0.05, 0.3]}},
}


def _floor_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_floor", REPO / "bench" / "floor.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def stream(spark, lake) -> Any:  # type: ignore[no-untyped-def]
    from lbreplay.lake.generator import generate
    from lbreplay.replay import preparation as R

    generate(spark, lake, SCENARIO, "floor", seed=3)
    _, meta = R.prepare(spark, lake, "floor", R.input_versions(spark, lake, "floor"))
    return meta


def _ticks(meta: Any) -> Iterator[Any]:
    from lbreplay.replay.tick_stream import ticks_from_stream

    return ticks_from_stream(meta)


def test_floor_and_kernel_agree_on_every_decision(stream) -> None:  # type: ignore[no-untyped-def]
    from lbreplay.replay.run_config import resolve_run_config

    floor = _floor_module()
    pulsar, replay = resolve_run_config("threshold-lltmr")
    result = floor.compare(stream, pulsar, replay, _ticks(stream))  # raises at the first disagreeing tick
    assert result["ticks"] == SCENARIO["ticks"]
    # the stream exercises every path of the floor: shedding, splits of the hot bundle, placement of children
    assert result["decisions"].get("UNLOAD", 0) > 0
    assert result["decisions"].get("SPLIT", 0) >= 2
    assert result["decisions"].get("ASSIGN", 0) >= 2 * result["decisions"]["SPLIT"]
    assert result["kernel_s"] > 0 and result["floor_s"] > 0


def test_the_agreement_check_catches_a_different_leader(stream) -> None:  # type: ignore[no-untyped-def]
    from lbreplay.replay.run_config import resolve_run_config

    floor = _floor_module()
    pulsar, replay = resolve_run_config("threshold-lltmr")
    other = {**pulsar, "loadBalancerBrokerThresholdShedderPercentage": 5}
    with pytest.raises(AssertionError, match="floor and kernel disagree"):
        floor.compare(stream, pulsar, replay, _ticks(stream), floor_pulsar=other)


def test_the_floor_refuses_what_it_does_not_implement() -> None:
    floor = _floor_module()
    with pytest.raises(floor.FloorUnsupported, match="ThresholdShedder"):
        floor.Floor(["b-1:8080"], ["t/ns"], [0.0], [0.0],
                    {"loadBalancerLoadSheddingStrategy":
                     "org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder"})
