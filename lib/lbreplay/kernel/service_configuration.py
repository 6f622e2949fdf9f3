"""The broker.conf keys each Pulsar line knows: the ``@FieldContext`` fields of
``org.apache.pulsar.broker.ServiceConfiguration`` (what ``PulsarConfigurationLoader`` maps a key onto).

The lists are data, one file per line under ``conf/pulsar/service-configuration/`` generated from the line's
``pulsar-broker-common`` jar by ``scripts/pulsar/service_config_keys.sh``. Pulsar ignores a broker.conf key its
``ServiceConfiguration`` has no field for; lbreplay checks every key it is given against these lists so that a
misspelt key is never silently a default.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from lbreplay.kernel.version_profile import PROFILES, line_of
from lbreplay.paths import CONF_DIR

KEYS_DIR: Path = CONF_DIR / "pulsar" / "service-configuration"
# lbreplay's own keys (not broker.conf keys): the Pulsar line, and ThresholdShedder/OverloadShedder's
# atLeastOneBundleSelected switch (a constant true in released Pulsar, apache/pulsar#18472).
LBREPLAY_KEYS: frozenset[str] = frozenset({"pulsarVersion", "atLeastOneBundleSelected"})
# A broker.conf key this close (edit distance) to a known key is taken for a typo of it, not for a plugin's key.
TYPO_DISTANCE = 2


@lru_cache(maxsize=None)
def line_keys(version: str) -> frozenset[str]:
    """The ServiceConfiguration keys of the line ``version`` names (aliases such as ``4.x`` resolved)."""
    path = KEYS_DIR / f"{line_of(version)}.txt"
    with open(path, encoding="utf-8") as fh:
        return frozenset(s for s in (ln.strip() for ln in fh) if s and not s.startswith("#"))


@lru_cache(maxsize=1)
def any_line_keys() -> frozenset[str]:
    """The keys of every line lbreplay models (a key here is a real Pulsar key in some line)."""
    return frozenset().union(*(line_keys(line) for line in PROFILES))


def lines_with(key: str) -> list[str]:
    """The modelled lines whose ServiceConfiguration has ``key``, oldest first."""
    return sorted((line for line in PROFILES if key in line_keys(line)),
                  key=lambda v: tuple(int(x) for x in v.split(".")))


def closest(key: str, candidates: frozenset[str] | set[str], n: int = 3) -> list[str]:
    """The ``n`` candidates closest to ``key`` (difflib's ratio; case ignored), best first."""
    by_lower: dict[str, str] = {}
    for c in sorted(candidates):
        by_lower.setdefault(c.lower(), c)
    return [by_lower[m] for m in difflib.get_close_matches(key.lower(), list(by_lower), n=n, cutoff=0.6)]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions), case-sensitive."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def likely_typo(key: str, candidates: frozenset[str] | set[str]) -> str | None:
    """The known key ``key`` is most likely a misspelling of: one within :data:`TYPO_DISTANCE` edits (or equal
    ignoring case), else None (a key of some plugin or protocol handler, which Pulsar ignores)."""
    best: tuple[int, str] | None = None
    for cand in closest(key, candidates, n=5):
        d = 0 if cand.lower() == key.lower() else edit_distance(key, cand)
        if d <= TYPO_DISTANCE and (best is None or d < best[0]):
            best = (d, cand)
    return best[1] if best else None


def did_you_mean(key: str, candidates: frozenset[str] | set[str]) -> str:
    """``"; did you mean a, b?"`` or ``""`` when nothing is close."""
    near = closest(key, candidates)
    return f"; did you mean {', '.join(near)}?" if near else ""
