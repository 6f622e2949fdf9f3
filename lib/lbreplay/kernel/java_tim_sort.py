"""``java.util.TimSort`` (JDK 8-25, unchanged), step by step, for comparators that are not a total order.

Pulsar 4.0.x's ``AvgShedder.calculateScoresAndSort`` sorts with ``(a, b) -> (int) (a - b)``: scores less than 1
apart compare equal, which is not transitive. The order Java produces then depends on TimSort's exact steps (run
detection, binary insertion, merge order, galloping), and TimSort may throw
``IllegalArgumentException("Comparison method violates its general contract!")`` while merging. This module
reproduces those steps so the kernel gives the jar's order (and raises :class:`ComparisonContractViolation`
where Java throws). Checked against the 4.0.7 jar by the differential oracle (tests/pulsar_oracle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
MIN_MERGE = 32
MIN_GALLOP = 7


class ComparisonContractViolation(ValueError):
    """Java's ``IllegalArgumentException: Comparison method violates its general contract!``."""


def tim_sort(items: list[T], cmp: Callable[[T, T], int]) -> list[T]:
    """A new list: ``items`` sorted as ``Arrays.sort(array, comparator)`` sorts them."""
    a = list(items)
    n = len(a)
    if n < 2:
        return a
    if n < MIN_MERGE:
        init = _count_run_and_make_ascending(a, 0, n, cmp)
        _binary_sort(a, 0, n, init, cmp)
        return a
    _TimSort(a, cmp).sort()
    return a


def _count_run_and_make_ascending(a: list[T], lo: int, hi: int, cmp: Callable[[T, T], int]) -> int:
    run_hi = lo + 1
    if run_hi == hi:
        return 1
    if cmp(a[run_hi], a[lo]) < 0:
        run_hi += 1
        while run_hi < hi and cmp(a[run_hi], a[run_hi - 1]) < 0:
            run_hi += 1
        a[lo:run_hi] = a[lo:run_hi][::-1]
    else:
        run_hi += 1
        while run_hi < hi and cmp(a[run_hi], a[run_hi - 1]) >= 0:
            run_hi += 1
    return run_hi - lo


def _binary_sort(a: list[T], lo: int, hi: int, start: int, cmp: Callable[[T, T], int]) -> None:
    if start == lo:
        start += 1
    while start < hi:
        pivot = a[start]
        left, right = lo, start
        while left < right:
            mid = (left + right) >> 1
            if cmp(pivot, a[mid]) < 0:
                right = mid
            else:
                left = mid + 1
        a[left + 1:start + 1] = a[left:start]
        a[left] = pivot
        start += 1


def _min_run_length(n: int) -> int:
    r = 0
    while n >= MIN_MERGE:
        r |= n & 1
        n >>= 1
    return n + r


def _gallop_left(key: T, a: list[T], base: int, length: int, hint: int, cmp: Callable[[T, T], int]) -> int:
    last_ofs, ofs = 0, 1
    if cmp(key, a[base + hint]) > 0:
        max_ofs = length - hint
        while ofs < max_ofs and cmp(key, a[base + hint + ofs]) > 0:
            last_ofs = ofs
            ofs = (ofs << 1) + 1
        ofs = min(ofs, max_ofs)
        last_ofs += hint
        ofs += hint
    else:
        max_ofs = hint + 1
        while ofs < max_ofs and cmp(key, a[base + hint - ofs]) <= 0:
            last_ofs = ofs
            ofs = (ofs << 1) + 1
        ofs = min(ofs, max_ofs)
        last_ofs, ofs = hint - ofs, hint - last_ofs
    last_ofs += 1
    while last_ofs < ofs:
        m = last_ofs + ((ofs - last_ofs) >> 1)
        if cmp(key, a[base + m]) > 0:
            last_ofs = m + 1
        else:
            ofs = m
    return ofs


def _gallop_right(key: T, a: list[T], base: int, length: int, hint: int, cmp: Callable[[T, T], int]) -> int:
    ofs, last_ofs = 1, 0
    if cmp(key, a[base + hint]) < 0:
        max_ofs = hint + 1
        while ofs < max_ofs and cmp(key, a[base + hint - ofs]) < 0:
            last_ofs = ofs
            ofs = (ofs << 1) + 1
        ofs = min(ofs, max_ofs)
        last_ofs, ofs = hint - ofs, hint - last_ofs
    else:
        max_ofs = length - hint
        while ofs < max_ofs and cmp(key, a[base + hint + ofs]) >= 0:
            last_ofs = ofs
            ofs = (ofs << 1) + 1
        ofs = min(ofs, max_ofs)
        last_ofs += hint
        ofs += hint
    last_ofs += 1
    while last_ofs < ofs:
        m = last_ofs + ((ofs - last_ofs) >> 1)
        if cmp(key, a[base + m]) < 0:
            ofs = m
        else:
            last_ofs = m + 1
    return ofs


class _TimSort:
    def __init__(self, a: list, cmp: Callable) -> None:
        self.a = a
        self.cmp = cmp
        self.min_gallop = MIN_GALLOP
        self.run_base: list[int] = []
        self.run_len: list[int] = []

    def sort(self) -> None:
        a, cmp = self.a, self.cmp
        lo, remaining = 0, len(a)
        min_run = _min_run_length(remaining)
        hi = len(a)
        while True:
            run_len = _count_run_and_make_ascending(a, lo, hi, cmp)
            if run_len < min_run:
                force = min(remaining, min_run)
                _binary_sort(a, lo, lo + force, lo + run_len, cmp)
                run_len = force
            self.run_base.append(lo)
            self.run_len.append(run_len)
            self._merge_collapse()
            lo += run_len
            remaining -= run_len
            if remaining == 0:
                break
        self._merge_force_collapse()

    def _merge_collapse(self) -> None:
        rl = self.run_len
        while len(rl) > 1:
            n = len(rl) - 2
            if (n > 0 and rl[n - 1] <= rl[n] + rl[n + 1]) or (n > 1 and rl[n - 2] <= rl[n] + rl[n - 1]):
                if rl[n - 1] < rl[n + 1]:
                    n -= 1
            elif n < 0 or rl[n] > rl[n + 1]:
                break
            self._merge_at(n)

    def _merge_force_collapse(self) -> None:
        rl = self.run_len
        while len(rl) > 1:
            n = len(rl) - 2
            if n > 0 and rl[n - 1] < rl[n + 1]:
                n -= 1
            self._merge_at(n)

    def _merge_at(self, i: int) -> None:
        a, cmp = self.a, self.cmp
        base1, len1 = self.run_base[i], self.run_len[i]
        base2, len2 = self.run_base[i + 1], self.run_len[i + 1]
        self.run_len[i] = len1 + len2
        del self.run_base[i + 1]
        del self.run_len[i + 1]
        k = _gallop_right(a[base2], a, base1, len1, 0, cmp)
        base1 += k
        len1 -= k
        if len1 == 0:
            return
        len2 = _gallop_left(a[base1 + len1 - 1], a, base2, len2, len2 - 1, cmp)
        if len2 == 0:
            return
        if len1 <= len2:
            self._merge_lo(base1, len1, base2, len2)
        else:
            self._merge_hi(base1, len1, base2, len2)

    def _merge_lo(self, base1: int, len1: int, base2: int, len2: int) -> None:
        a, cmp = self.a, self.cmp
        tmp = a[base1:base1 + len1]
        c1, c2, dest = 0, base2, base1
        a[dest] = a[c2]
        dest += 1
        c2 += 1
        len2 -= 1
        if len2 == 0:
            a[dest:dest + len1] = tmp[c1:c1 + len1]
            return
        if len1 == 1:
            a[dest:dest + len2] = a[c2:c2 + len2]
            a[dest + len2] = tmp[c1]
            return
        min_gallop = self.min_gallop
        done = False
        while not done:
            count1 = count2 = 0
            while True:
                if cmp(a[c2], tmp[c1]) < 0:
                    a[dest] = a[c2]
                    dest += 1
                    c2 += 1
                    count2 += 1
                    count1 = 0
                    len2 -= 1
                    if len2 == 0:
                        done = True
                        break
                else:
                    a[dest] = tmp[c1]
                    dest += 1
                    c1 += 1
                    count1 += 1
                    count2 = 0
                    len1 -= 1
                    if len1 == 1:
                        done = True
                        break
                if (count1 | count2) >= min_gallop:
                    break
            if done:
                break
            while True:
                count1 = _gallop_right(a[c2], tmp, c1, len1, 0, cmp)
                if count1 != 0:
                    a[dest:dest + count1] = tmp[c1:c1 + count1]
                    dest += count1
                    c1 += count1
                    len1 -= count1
                    if len1 <= 1:
                        done = True
                        break
                a[dest] = a[c2]
                dest += 1
                c2 += 1
                len2 -= 1
                if len2 == 0:
                    done = True
                    break
                count2 = _gallop_left(tmp[c1], a, c2, len2, 0, cmp)
                if count2 != 0:
                    a[dest:dest + count2] = a[c2:c2 + count2]
                    dest += count2
                    c2 += count2
                    len2 -= count2
                    if len2 == 0:
                        done = True
                        break
                a[dest] = tmp[c1]
                dest += 1
                c1 += 1
                len1 -= 1
                if len1 == 1:
                    done = True
                    break
                min_gallop -= 1
                if not (count1 >= MIN_GALLOP or count2 >= MIN_GALLOP):
                    break
            if done:
                break
            min_gallop = max(min_gallop, 0)
            min_gallop += 2
        self.min_gallop = max(min_gallop, 1)
        if len1 == 1:
            a[dest:dest + len2] = a[c2:c2 + len2]
            a[dest + len2] = tmp[c1]
        elif len1 == 0:
            raise ComparisonContractViolation("Comparison method violates its general contract!")
        else:
            a[dest:dest + len1] = tmp[c1:c1 + len1]

    def _merge_hi(self, base1: int, len1: int, base2: int, len2: int) -> None:
        a, cmp = self.a, self.cmp
        tmp = a[base2:base2 + len2]
        c1, c2, dest = base1 + len1 - 1, len2 - 1, base2 + len2 - 1
        a[dest] = a[c1]
        dest -= 1
        c1 -= 1
        len1 -= 1
        if len1 == 0:
            a[dest - (len2 - 1):dest + 1] = tmp[0:len2]
            return
        if len2 == 1:
            dest -= len1
            c1 -= len1
            a[dest + 1:dest + 1 + len1] = a[c1 + 1:c1 + 1 + len1]
            a[dest] = tmp[c2]
            return
        min_gallop = self.min_gallop
        done = False
        while not done:
            count1 = count2 = 0
            while True:
                if cmp(tmp[c2], a[c1]) < 0:
                    a[dest] = a[c1]
                    dest -= 1
                    c1 -= 1
                    count1 += 1
                    count2 = 0
                    len1 -= 1
                    if len1 == 0:
                        done = True
                        break
                else:
                    a[dest] = tmp[c2]
                    dest -= 1
                    c2 -= 1
                    count2 += 1
                    count1 = 0
                    len2 -= 1
                    if len2 == 1:
                        done = True
                        break
                if (count1 | count2) >= min_gallop:
                    break
            if done:
                break
            while True:
                count1 = len1 - _gallop_right(tmp[c2], a, base1, len1, len1 - 1, cmp)
                if count1 != 0:
                    dest -= count1
                    c1 -= count1
                    len1 -= count1
                    a[dest + 1:dest + 1 + count1] = a[c1 + 1:c1 + 1 + count1]
                    if len1 == 0:
                        done = True
                        break
                a[dest] = tmp[c2]
                dest -= 1
                c2 -= 1
                len2 -= 1
                if len2 == 1:
                    done = True
                    break
                count2 = len2 - _gallop_left(a[c1], tmp, 0, len2, len2 - 1, cmp)
                if count2 != 0:
                    dest -= count2
                    c2 -= count2
                    len2 -= count2
                    a[dest + 1:dest + 1 + count2] = tmp[c2 + 1:c2 + 1 + count2]
                    if len2 <= 1:
                        done = True
                        break
                a[dest] = a[c1]
                dest -= 1
                c1 -= 1
                len1 -= 1
                if len1 == 0:
                    done = True
                    break
                min_gallop -= 1
                if not (count1 >= MIN_GALLOP or count2 >= MIN_GALLOP):
                    break
            if done:
                break
            min_gallop = max(min_gallop, 0)
            min_gallop += 2
        self.min_gallop = max(min_gallop, 1)
        if len2 == 1:
            dest -= len1
            c1 -= len1
            a[dest + 1:dest + 1 + len1] = a[c1 + 1:c1 + 1 + len1]
            a[dest] = tmp[c2]
        elif len2 == 0:
            raise ComparisonContractViolation("Comparison method violates its general contract!")
        else:
            a[dest - (len2 - 1):dest + 1] = tmp[0:len2]
