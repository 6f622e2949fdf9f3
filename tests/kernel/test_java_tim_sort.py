"""java.util.TimSort as ported in lbreplay.kernel.java_tim_sort, on a comparator that is not a total order.

AvgShedder.calculateScoresAndSort in Pulsar 4.0.x sorts broker scores with ``(a, b) -> (int) (a - b)``. The expected
outcomes below were produced by Java 17's ``Stream.sorted`` with that comparator (the same call Pulsar makes) on these
inputs; the differential oracle checks the same path end to end through AvgShedder on the 4.0.7 jar.
"""

from __future__ import annotations

import pytest
from lbreplay.kernel.avg_shedder import java_sort_int_difference
from lbreplay.kernel.java_tim_sort import ComparisonContractViolation, tim_sort

# 33 scores: TimSort's run/merge path (>= 32 elements); Java's resulting index order.
MERGED = [656.782, 276.398, 127.677, 626.237, 562.877, 422.513, 273.261, 746.559, 976.651, 300.263, 479.675, 966.285, 522.874, 884.359, 275.542, 363.54, 456.667, 227.792, 110.934, 900.146, 200.868, 370.501, 171.958, 910.208, 816.518, 377.637, 197.665, 236.82, 60.655, 329.798, 658.414, 286.6, 439.926]
MERGED_ORDER = [28, 18, 2, 22, 26, 20, 17, 27, 6, 1, 14, 31, 9, 29, 15, 21, 25, 5, 32, 16, 10, 12, 4, 3, 0, 30, 7, 24, 13, 19, 23, 11, 8]
# 64 scores on which Java's TimSort throws "Comparison method violates its general contract!".
THROWS = [4.525, 1.741, 4.876, 3.097, 0.034, 4.487, 3.9, 4.429, 0.824, 2.085, 1.777, 1.353, 2.273, 4.033, 4.806, 1.78, 4.338, 1.862, 1.061, 2.679, 2.414, 2.317, 4.157, 0.826, 1.247, 3.17, 1.671, 4.023, 0.688, 4.527, 0.831, 3.002, 3.487, 4.444, 3.768, 3.151, 0.071, 0.217, 3.96, 2.392, 2.132, 3.482, 4.606, 0.76, 2.612, 4.923, 4.456, 1.774, 3.461, 4.585, 1.606, 1.855, 4.608, 0.798, 3.645, 1.956, 4.744, 2.933, 3.825, 0.863, 0.176, 1.745, 4.709, 0.913]


def test_merge_path_matches_java_order() -> None:
    assert java_sort_int_difference(MERGED) == MERGED_ORDER
    assert MERGED_ORDER != sorted(range(len(MERGED)), key=lambda i: MERGED[i])  # the comparator matters


def test_contract_violation_is_raised_where_java_throws() -> None:
    with pytest.raises(ComparisonContractViolation, match="general contract"):
        java_sort_int_difference(THROWS)


def test_total_order_gives_the_stable_sort() -> None:
    values = [(i * 7919) % 101 for i in range(300)]
    order = tim_sort(list(range(300)), lambda a, b: (values[a] > values[b]) - (values[a] < values[b]))
    assert order == sorted(range(300), key=lambda i: values[i])
