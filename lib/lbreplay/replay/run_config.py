"""Replay configuration files (DESIGN.md §6): ``pulsar:`` broker.conf keys, ``replay:`` options, ``grid:``.

Precedence: Pulsar defaults of ``pulsarVersion`` < ``--broker-conf`` < the YAML's ``pulsar:`` < ``--set``.
Unknown keys are an error naming the key.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig, parse_broker_conf
from lbreplay.paths import CONF_DIR

REPLAY_KEYS: dict[str, Any] = {
    "mode": "closed-loop",  # closed-loop | observed
    "seed": 0,
    "loadModel": "calibrated",  # the per-broker least-squares model of lbreplay.replay.load_model
    "reportStaleness": "pulsar",  # Pulsar's 10 % / 15 min report write rule
    "warmupTicks": 120,  # audit mode: ticks replayed before each parallel slice to rebuild strategy state
}
TOP_KEYS = {"pulsar", "replay", "grid", "name", "description"}


def _read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        alt = CONF_DIR / "strategies" / f"{path}.yaml"
        if alt.is_file():
            p = alt
        else:
            raise UsageError(f"config file not found: {path}")
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    if not isinstance(doc, dict):
        raise UsageError(f"{p}: expected a mapping with pulsar:/replay: keys")
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise UsageError(f"{p}: unknown top-level key {sorted(unknown)[0]!r} (known: {', '.join(sorted(TOP_KEYS))})")
    return doc


def parse_set(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def resolve_run_config(
    config: str | None, broker_conf: str | None = None, sets: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pulsar keys as given, replay options). Validates every key by resolving once."""
    doc = _read_yaml(config) if config else {}
    pulsar: dict[str, Any] = {}
    if broker_conf:
        p = Path(broker_conf)
        if not p.is_file():
            raise UsageError(f"--broker-conf: file not found: {broker_conf}")
        pulsar.update(parse_broker_conf(p.read_text(encoding="utf-8")))
    pulsar.update(doc.get("pulsar") or {})
    replay = dict(REPLAY_KEYS)
    for key, value in (doc.get("replay") or {}).items():
        if key not in REPLAY_KEYS:
            raise UsageError(f"replay.{key}: unknown replay option (known: {', '.join(REPLAY_KEYS)})")
        replay[key] = value
    for key, value in parse_set(sets or []).items():
        if key.startswith("replay."):
            sub = key.removeprefix("replay.")
            if sub not in REPLAY_KEYS:
                raise UsageError(f"--set {key}: unknown replay option")
            replay[sub] = value
        else:
            pulsar[key] = value
    PulsarConfig.resolve(pulsar, path="pulsar")  # raises on unknown keys / bad values
    if replay["mode"] not in ("closed-loop", "observed"):
        raise UsageError(f"replay.mode: expected closed-loop or observed, got {replay['mode']!r}")
    return pulsar, replay


def expand_grid(grid_file: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A sweep grid: the base ``pulsar:``/``replay:`` plus the cartesian product of ``grid:`` lists."""
    doc = _read_yaml(grid_file)
    base_pulsar, base_replay = resolve_run_config(grid_file)
    grid = doc.get("grid") or {}
    if not isinstance(grid, dict) or not grid:
        raise UsageError(f"{grid_file}: a sweep needs a non-empty grid: mapping of keys to lists")
    keys = sorted(grid)
    for k in keys:
        if not isinstance(grid[k], list) or not grid[k]:
            raise UsageError(f"grid.{k}: expected a non-empty list of values")
    out = []
    for values in itertools.product(*(grid[k] for k in keys)):
        pulsar = dict(base_pulsar)
        replay = dict(base_replay)
        for k, v in zip(keys, values):
            if k.startswith("replay."):
                replay[k.removeprefix("replay.")] = v
            else:
                pulsar[k] = v
        PulsarConfig.resolve(pulsar, path="grid")
        out.append((pulsar, replay))
    return out
