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
from dataclasses import dataclass
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


@dataclass
class _Cursors:
    """A merge in progress (``mergeLo`` / ``mergeHi``'s locals): the read positions in run 1 (``c1``) and run 2
    (``c2``; the shorter run is read from ``tmp``), the write position, the elements left in each run."""

    c1: int
    c2: int
    dest: int
    len1: int
    len2: int
    base1: int = 0  # run 1's start (mergeHi gallops over it)


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
        """``mergeLo``: merge the shorter run ``base1`` (copied to ``tmp``) with ``base2``, left to right."""
        a = self.a
        tmp = a[base1:base1 + len1]
        m = _Cursors(c1=0, c2=base2, dest=base1, len1=len1, len2=len2)
        a[m.dest] = a[m.c2]
        m.dest += 1
        m.c2 += 1
        m.len2 -= 1
        if m.len2 == 0:
            a[m.dest:m.dest + m.len1] = tmp[m.c1:m.c1 + m.len1]
            return
        if m.len1 == 1:
            a[m.dest:m.dest + m.len2] = a[m.c2:m.c2 + m.len2]
            a[m.dest + m.len2] = tmp[m.c1]
            return
        min_gallop = self.min_gallop
        while True:
            if self._lo_one_at_a_time(tmp, m, min_gallop):
                break
            done, min_gallop = self._lo_galloping(tmp, m, min_gallop)
            if done:
                break
            min_gallop = max(min_gallop, 0) + 2  # penalty for leaving gallop mode
        self.min_gallop = max(min_gallop, 1)
        if m.len1 == 1:
            a[m.dest:m.dest + m.len2] = a[m.c2:m.c2 + m.len2]
            a[m.dest + m.len2] = tmp[m.c1]
        elif m.len1 == 0:
            raise ComparisonContractViolation("Comparison method violates its general contract!")
        else:
            a[m.dest:m.dest + m.len1] = tmp[m.c1:m.c1 + m.len1]

    def _lo_one_at_a_time(self, tmp: list, m: _Cursors, min_gallop: int) -> bool:
        """``mergeLo``'s straight merge until one run wins ``min_gallop`` times in a row; True when a run ran out."""
        a, cmp = self.a, self.cmp
        count1 = count2 = 0  # times in a row run 1 (tmp) / run 2 won
        while True:
            if cmp(a[m.c2], tmp[m.c1]) < 0:
                a[m.dest] = a[m.c2]
                m.dest += 1
                m.c2 += 1
                count2 += 1
                count1 = 0
                m.len2 -= 1
                if m.len2 == 0:
                    return True
            else:
                a[m.dest] = tmp[m.c1]
                m.dest += 1
                m.c1 += 1
                count1 += 1
                count2 = 0
                m.len1 -= 1
                if m.len1 == 1:
                    return True
            if (count1 | count2) >= min_gallop:
                return False

    def _lo_galloping(self, tmp: list, m: _Cursors, min_gallop: int) -> tuple[bool, int]:
        """``mergeLo``'s gallop mode while either run keeps winning ``MIN_GALLOP`` elements at a time:
        (a run ran out, the lowered ``min_gallop``)."""
        a, cmp = self.a, self.cmp
        while True:
            count1 = _gallop_right(a[m.c2], tmp, m.c1, m.len1, 0, cmp)
            if count1 != 0:
                a[m.dest:m.dest + count1] = tmp[m.c1:m.c1 + count1]
                m.dest += count1
                m.c1 += count1
                m.len1 -= count1
                if m.len1 <= 1:
                    return True, min_gallop
            a[m.dest] = a[m.c2]
            m.dest += 1
            m.c2 += 1
            m.len2 -= 1
            if m.len2 == 0:
                return True, min_gallop
            count2 = _gallop_left(tmp[m.c1], a, m.c2, m.len2, 0, cmp)
            if count2 != 0:
                a[m.dest:m.dest + count2] = a[m.c2:m.c2 + count2]
                m.dest += count2
                m.c2 += count2
                m.len2 -= count2
                if m.len2 == 0:
                    return True, min_gallop
            a[m.dest] = tmp[m.c1]
            m.dest += 1
            m.c1 += 1
            m.len1 -= 1
            if m.len1 == 1:
                return True, min_gallop
            min_gallop -= 1
            if not (count1 >= MIN_GALLOP or count2 >= MIN_GALLOP):
                return False, min_gallop

    def _merge_hi(self, base1: int, len1: int, base2: int, len2: int) -> None:
        """``mergeHi``: merge run ``base1`` with the shorter run ``base2`` (copied to ``tmp``), right to left."""
        a = self.a
        tmp = a[base2:base2 + len2]
        m = _Cursors(c1=base1 + len1 - 1, c2=len2 - 1, dest=base2 + len2 - 1, len1=len1, len2=len2, base1=base1)
        a[m.dest] = a[m.c1]
        m.dest -= 1
        m.c1 -= 1
        m.len1 -= 1
        if m.len1 == 0:
            a[m.dest - (m.len2 - 1):m.dest + 1] = tmp[0:m.len2]
            return
        if m.len2 == 1:
            self._hi_last_of_tmp(tmp, m)
            return
        min_gallop = self.min_gallop
        while True:
            if self._hi_one_at_a_time(tmp, m, min_gallop):
                break
            done, min_gallop = self._hi_galloping(tmp, m, min_gallop)
            if done:
                break
            min_gallop = max(min_gallop, 0) + 2  # penalty for leaving gallop mode
        self.min_gallop = max(min_gallop, 1)
        if m.len2 == 1:
            self._hi_last_of_tmp(tmp, m)
        elif m.len2 == 0:
            raise ComparisonContractViolation("Comparison method violates its general contract!")
        else:
            a[m.dest - (m.len2 - 1):m.dest + 1] = tmp[0:m.len2]

    def _hi_last_of_tmp(self, tmp: list, m: _Cursors) -> None:
        """``mergeHi`` with one element of run 2 left: the rest of run 1 moves up, that element goes first."""
        a = self.a
        m.dest -= m.len1
        m.c1 -= m.len1
        a[m.dest + 1:m.dest + 1 + m.len1] = a[m.c1 + 1:m.c1 + 1 + m.len1]
        a[m.dest] = tmp[m.c2]

    def _hi_one_at_a_time(self, tmp: list, m: _Cursors, min_gallop: int) -> bool:
        """``mergeHi``'s straight merge until one run wins ``min_gallop`` times in a row; True when a run ran out."""
        a, cmp = self.a, self.cmp
        count1 = count2 = 0  # times in a row run 1 / run 2 (tmp) won
        while True:
            if cmp(tmp[m.c2], a[m.c1]) < 0:
                a[m.dest] = a[m.c1]
                m.dest -= 1
                m.c1 -= 1
                count1 += 1
                count2 = 0
                m.len1 -= 1
                if m.len1 == 0:
                    return True
            else:
                a[m.dest] = tmp[m.c2]
                m.dest -= 1
                m.c2 -= 1
                count2 += 1
                count1 = 0
                m.len2 -= 1
                if m.len2 == 1:
                    return True
            if (count1 | count2) >= min_gallop:
                return False

    def _hi_galloping(self, tmp: list, m: _Cursors, min_gallop: int) -> tuple[bool, int]:
        """``mergeHi``'s gallop mode while either run keeps winning ``MIN_GALLOP`` elements at a time:
        (a run ran out, the lowered ``min_gallop``)."""
        a, cmp = self.a, self.cmp
        while True:
            count1 = m.len1 - _gallop_right(tmp[m.c2], a, m.base1, m.len1, m.len1 - 1, cmp)
            if count1 != 0:
                m.dest -= count1
                m.c1 -= count1
                m.len1 -= count1
                a[m.dest + 1:m.dest + 1 + count1] = a[m.c1 + 1:m.c1 + 1 + count1]
                if m.len1 == 0:
                    return True, min_gallop
            a[m.dest] = tmp[m.c2]
            m.dest -= 1
            m.c2 -= 1
            m.len2 -= 1
            if m.len2 == 1:
                return True, min_gallop
            count2 = m.len2 - _gallop_left(a[m.c1], tmp, 0, m.len2, m.len2 - 1, cmp)
            if count2 != 0:
                m.dest -= count2
                m.c2 -= count2
                m.len2 -= count2
                a[m.dest + 1:m.dest + 1 + count2] = tmp[m.c2 + 1:m.c2 + 1 + count2]
                if m.len2 <= 1:
                    return True, min_gallop
            a[m.dest] = a[m.c1]
            m.dest -= 1
            m.c1 -= 1
            m.len1 -= 1
            if m.len1 == 0:
                return True, min_gallop
            min_gallop -= 1
            if not (count1 >= MIN_GALLOP or count2 >= MIN_GALLOP):
                return False, min_gallop
