"""``collect.audit_check``'s rendering of what Pulsar's debug lines print."""

from __future__ import annotations

from lbreplay.collect.audit_check import java_2f, load_stats


def test_load_stats_print_as_transfer_shedder_does() -> None:
    """``TransferShedder.LoadStats``: sum, sqSum, avg = sum / n, std = Math.sqrt(sqSum / n - avg * avg), each as
    ``%.2f``; brokers sorted by load. Three equal loads leave a variance that rounds below zero: Java's sqrt is NaN
    and ``String.format`` prints ``NaN``."""
    stats, order = load_stats({"b:1": 0.3908571, "a:1": 0.17473135, "c:1": 0.21947726})
    assert stats == {"sum": "0.79", "sqSum": "0.23", "avg": "0.26", "std": "0.09"}
    assert order == ["a:1", "c:1", "b:1"]
    assert load_stats({"a:1": 0.1, "b:1": 0.1, "c:1": 0.1})[0]["std"] == "NaN"
    assert load_stats({}) == ({"sum": "0.00", "sqSum": "0.00", "avg": "0.00", "std": "0.00"}, [])


def test_java_2f_rounds_the_shortest_decimal_half_up() -> None:
    """Java rounds the double's shortest decimal half up (0.125 -> 0.13, 2.675 -> 2.68), where Python's ``%.2f``
    rounds its binary value (0.12, 2.67); a negative value that rounds to zero keeps its sign."""
    assert "%.2f %.2f" % (0.125, 2.675) == "0.12 2.67"
    assert [java_2f(v) for v in (0.125, 0.005, 2.675, -0.004)] == ["0.13", "0.01", "2.68", "-0.00"]
