"""ModularLoadManagerImpl.needBrokerDataUpdate: the 10 % / 15 min report write rule (PULSAR-LB-SPEC.md §1.7)."""

import numpy as np

from lbreplay.kernel.broker_report import need_broker_data_update, percent_change
from lbreplay.kernel.config import PulsarConfig


def test_percent_change_edges() -> None:
    """pctChange: both zero -> 0; old zero -> +inf; else relative change in percent."""
    out = percent_change(np.array([0.0, 0.0, 200.0]), np.array([0.0, 5.0, 150.0]))
    assert out[0] == 0.0 and np.isinf(out[1]) and out[2] == 25.0


def test_write_rule_threshold_and_max_interval() -> None:
    """A 10 % change is not enough (strict >), 10.5 % is; 15 min + 1 ms forces a write; never written -> write."""
    conf = PulsarConfig.resolve({})
    now = 1_000_000_000
    last_written = np.array([now - 60_000, now - 60_000, now - 15 * 60_000 - 1, -1, now - 60_000])
    last_rate = np.array([1000.0, 1000.0, 1000.0, 1000.0, 1000.0])
    rate = np.array([1100.0, 1105.0, 1000.0, 1000.0, 1000.0])
    ones = np.ones(5)
    usage_last = np.array([0.5, 0.5, 0.5, 0.5, 0.5])
    usage_now = np.array([0.5, 0.5, 0.5, 0.5, 0.61])  # 11 points of max usage -> write
    mask = need_broker_data_update(last_written, now, last_rate, rate, ones, ones, ones, ones, usage_last, usage_now, conf)
    assert mask.tolist() == [False, True, True, True, True]
