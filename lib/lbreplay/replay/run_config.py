"""Replay configuration files (DESIGN.md §6): ``pulsar:`` broker.conf keys, ``replay:`` options, ``grid:``.

Precedence: Pulsar defaults of ``pulsarVersion`` < ``--broker-conf`` < the YAML's ``pulsar:`` < ``--set``.
Unknown keys are an error naming the key.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import yaml

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig, parse_broker_conf, typed_overrides
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
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{p}:{where}: not valid YAML ({problem})") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{p}: expected a mapping with pulsar:/replay: keys")
    for section in ("pulsar", "replay", "grid"):
        if doc.get(section) is not None and not isinstance(doc[section], dict):
            raise UsageError(f"{p}: {section}: expected a mapping of keys to values, got {type(doc[section]).__name__}")
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


def _typed_replay_option(key: str, value: Any, where: str) -> Any:
    """A ``replay.<key>`` value from the command line typed like its default (``--set replay.seed=5`` -> 5)."""
    default = REPLAY_KEYS[key]
    if isinstance(default, int) and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise UsageError(f"{where}: expected an integer, got {value!r}") from None
    return value


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
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--broker-conf {broker_conf}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        pulsar.update(typed_overrides(parse_broker_conf(text), path=f"--broker-conf {broker_conf}"))
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
            replay[sub] = _typed_replay_option(sub, value, f"--set {key}")
        else:
            pulsar[key] = value
    check_strategies(PulsarConfig.resolve(pulsar, path="pulsar"), "pulsar")  # unknown keys / bad values / classes
    pulsar = typed_overrides(pulsar, path="pulsar")  # broker.conf / --set strings as the defaults' types
    if replay["mode"] not in ("closed-loop", "observed"):
        raise UsageError(f"replay.mode: expected closed-loop or observed, got {replay['mode']!r}")
    return pulsar, replay


MAX_GRID_POINTS = 1000  # runs of one sweep: each is a Spark task holding a full replay state


def check_strategies(config: PulsarConfig, path: str) -> None:
    """The shedding and placement classes must be ones lbreplay implements (``kernel.strategy``): an unknown class
    is a usage error naming the key, not a failure inside a Spark task."""
    from lbreplay.kernel.strategy import PLACEMENT_STRATEGIES, SHEDDING_STRATEGIES

    for key, table in (("loadBalancerLoadSheddingStrategy", SHEDDING_STRATEGIES),
                       ("loadBalancerLoadPlacementStrategy", PLACEMENT_STRATEGIES)):
        name = str(config[key])
        if name.rsplit(".", 1)[-1] not in table:
            raise UsageError(f"{path}.{key}: unsupported strategy {name!r}; supported: {', '.join(table)}")


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
    points = math.prod(len(grid[k]) for k in keys)
    if points > MAX_GRID_POINTS:
        sizes = " x ".join(f"{k}={len(grid[k])}" for k in keys)
        raise UsageError(f"{grid_file}: grid: {points} points ({sizes}) exceed the limit of {MAX_GRID_POINTS} runs "
                         "per sweep; split the grid into several sweeps")
    out = []
    for values in itertools.product(*(grid[k] for k in keys)):
        pulsar = dict(base_pulsar)
        replay = dict(base_replay)
        for k, v in zip(keys, values):
            if k.startswith("replay."):
                replay[k.removeprefix("replay.")] = v
            else:
                pulsar[k] = v
        check_strategies(PulsarConfig.resolve(pulsar, path="grid"), "grid")
        out.append((pulsar, replay))
    return out
