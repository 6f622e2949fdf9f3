"""Shared pieces of the oracle's random cases: constants and fast draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

IMPL = "org.apache.pulsar.broker.loadbalance.impl."
EXT = "org.apache.pulsar.broker.loadbalance.extensions."
NOW = 1_700_000_000_000
MB = 1024.0 * 1024.0
_T = TypeVar("_T")


def pick(rng: np.random.Generator, options: Sequence[_T]) -> _T:
    """``rng.choice(options)`` of a short list: the same draw (``rng.integers(0, len(options))``, checked on
    numpy's Generator) without building an array, ~5x faster."""
    return options[int(rng.integers(0, len(options)))]


def hex8(x: int) -> str:
    """A bundle boundary as Pulsar writes it: ``0x%08x``."""
    return f"0x{x:08x}"


def even_layout(n: int) -> list[int]:
    """``n`` equal bundles over the hash range (``PoliciesUtil.getBundles``)."""
    step = 0x100000000 // n
    return [i * step for i in range(n)] + [0xFFFFFFFF]
