"""Replay configuration files (DESIGN.md §6): ``pulsar:`` broker.conf keys, ``replay:`` options, ``grid:``, ``name:``.

Precedence: Pulsar defaults of ``pulsarVersion`` < ``--broker-conf`` < the YAML's ``pulsar:`` < a sweep's grid point
< ``--set``. Every key is checked against the chosen line's ``ServiceConfiguration`` keys
(:mod:`lbreplay.kernel.service_configuration`): an unknown key in YAML / ``--set`` is a usage error naming the closest
keys; in a real broker.conf a likely typo is one (file:line), other unknown keys are a warning kept with the run.
The line itself is chosen once the lake is open (:mod:`lbreplay.lake.recorded_line`); :func:`finish` applies it.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from lbreplay.errors import UsageError
from lbreplay.kernel.config import PulsarConfig, broker_conf_entries, canonical_key, known_keys, short_class, typed_overrides
from lbreplay.kernel.service_configuration import LBREPLAY_KEYS, any_line_keys, did_you_mean, likely_typo, line_keys, lines_with
from lbreplay.kernel.version_profile import PROFILES, line_of
from lbreplay.lake.recorded_line import LineChoice
from lbreplay.paths import CONF_DIR

ConfigSpec = tuple[dict[str, Any], dict[str, Any]]  # (pulsar keys, replay options)

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


@dataclass
class RunIntake:
    """A run's configuration as read, before its Pulsar line is known (:func:`finish` applies the line).

    ``pulsar``: the keys given, typed; ``from_broker_conf``: the keys whose value is the broker.conf's (key -> line
    number); ``unknown_keys``: broker.conf keys no Pulsar line knows (kept with the run); ``warnings``: printed once by
    the command; ``label``: a sweep point's ``key=value`` of the grid keys that vary."""

    pulsar: dict[str, Any]
    replay: dict[str, Any]
    name: str | None = None
    broker_conf: str | None = None
    from_broker_conf: dict[str, int] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    label: str | None = None

    @property
    def explicit_version(self) -> str | None:
        """``pulsarVersion`` as the user gave it (YAML, ``--set``, a grid point), or None."""
        value = self.pulsar.get("pulsarVersion")
        return None if value is None else str(value)


def _check_key(key: str, where: str, line: str | None, warnings: list[str]) -> bool:
    """Whether ``key`` (YAML ``pulsar:``, ``--set``, ``grid:``) is one the replay uses. A ServiceConfiguration key the
    replay does not use is a warning (False); a key of no Pulsar line (of ``line`` if given) is a UsageError with the
    closest keys."""
    canon = canonical_key(key)
    if canon in known_keys():
        return True
    if key in (line_keys(line) if line else any_line_keys()):
        warnings.append(f"{where} is a Pulsar broker.conf key the replay does not use; ignored")
        return False
    scope = f"of Pulsar {line}" if line else "of any Pulsar line"
    candidates = (line_keys(line) if line else any_line_keys()) | LBREPLAY_KEYS
    raise UsageError(f"{where}: unknown config key (not a ServiceConfiguration key {scope})"
                     f"{did_you_mean(key, candidates)}")


def read_broker_conf(path: str, allow_unknown_keys: bool = False) -> tuple[dict[str, str], dict[str, int], list[str],
                                                                            list[str]]:
    """A real ``broker.conf``: (the load-balancer keys lbreplay models, as strings; their line numbers; the keys no
    Pulsar line knows; warnings). ServiceConfiguration keys the replay does not use are skipped silently, as a
    broker's other keys; an unknown key within a few edits of a known one is a typo: a UsageError naming the file,
    line and the key meant (a warning with ``allow_unknown_keys``); other unknown keys (plugins, protocol handlers:
    Pulsar ignores them) are one warning and kept with the run."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--broker-conf: file not found: {path}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--broker-conf {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    unknown: list[str] = []
    warnings: list[str] = []
    known = known_keys()
    for number, raw, value in broker_conf_entries(text):
        key = canonical_key(raw)
        if key in known:
            if value != "":
                values[key], lines[key] = value, number
            continue
        if raw in any_line_keys():
            continue
        meant = likely_typo(raw, any_line_keys() | set(known))
        if meant is not None:
            msg = f"{path}:{number}: unknown key {raw!r}; did you mean {meant}?"
            if not allow_unknown_keys:
                raise UsageError(msg + " (--allow-unknown-keys to replay with it ignored)")
            warnings.append(msg + " (ignored: --allow-unknown-keys)")
        if raw not in unknown:
            unknown.append(raw)
    far = [k for k in unknown if not any(k in w for w in warnings)]
    if far:
        warnings.append(f"{path}: {len(far)} key(s) no Pulsar line knows, ignored as Pulsar ignores them "
                        f"(stored with the run): {', '.join(far)}")
    return values, lines, unknown, warnings


def _replay_options(doc: dict[str, Any], sets: dict[str, str]) -> dict[str, Any]:
    replay = dict(REPLAY_KEYS)
    for key, value in (doc.get("replay") or {}).items():
        if key not in REPLAY_KEYS:
            raise UsageError(f"replay.{key}: unknown replay option (known: {', '.join(REPLAY_KEYS)})")
        replay[key] = value
    for key, value in sets.items():
        if key.startswith("replay."):
            sub = key.removeprefix("replay.")
            if sub not in REPLAY_KEYS:
                raise UsageError(f"--set {key}: unknown replay option")
            replay[sub] = _typed_replay_option(sub, value, f"--set {key}")
    if replay["mode"] not in ("closed-loop", "observed"):
        raise UsageError(f"replay.mode: expected closed-loop or observed, got {replay['mode']!r}")
    return replay


BrokerConfPart = tuple[dict[str, str], dict[str, int], list[str], list[str]]  # read_broker_conf's answer


def read_run_config(config: str | None, broker_conf: str | None = None, sets: list[str] | None = None,
                    allow_unknown_keys: bool = False) -> RunIntake:
    """Pulsar defaults < ``broker_conf`` < the YAML's ``pulsar:`` < ``--set``. Every key is checked against the
    ServiceConfiguration keys of the line given (``pulsarVersion``) or of any line."""
    doc = _read_yaml(config) if config else {}
    part = read_broker_conf(broker_conf, allow_unknown_keys) if broker_conf else None
    return _intake(doc, config, broker_conf, part, sets or [])


def _intake(doc: dict[str, Any], config: str | None, broker_conf: str | None, part: BrokerConfPart | None,
            sets: list[str], grid: dict[str, Any] | None = None) -> RunIntake:
    """One run's intake: ``doc`` (the YAML read), the broker.conf ``part`` read, ``grid`` (one sweep point), ``sets``."""
    name = doc.get("name")
    if name is not None and not isinstance(name, (str, int, float)):
        raise UsageError(f"{config}: name: expected a string, got {type(name).__name__}")
    set_map = parse_set(sets)
    given: list[tuple[str, Any, str]] = [(k, v, f"{config}: pulsar.{k}") for k, v in (doc.get("pulsar") or {}).items()]
    given += [(k, v, f"grid.{k}") for k, v in (grid or {}).items() if not k.startswith("replay.")]
    given += [(k, v, f"pulsar.{k}") for k, v in set_map.items() if not k.startswith("replay.")]
    explicit = next((str(v) for k, v, _ in reversed(given) if k == "pulsarVersion"), None)
    line = explicit if explicit is not None and line_of(explicit) in PROFILES else None
    intake = RunIntake({}, _replay_options(doc, set_map), None if name is None else str(name), broker_conf)
    if part is not None:
        values, lines, unknown, warnings = part
        values = {k: v for k, v in values.items() if k != "pulsarVersion"}  # lbreplay's key, not a broker's
        intake.pulsar.update(typed_overrides(values, path=f"--broker-conf {broker_conf}"))
        intake.from_broker_conf, intake.unknown_keys, intake.warnings = dict(lines), list(unknown), list(warnings)
    for key, value, where in given:
        if _check_key(key, where, line, intake.warnings):
            intake.pulsar[key] = value
            intake.from_broker_conf.pop(canonical_key(key), None)
    for key, value in (grid or {}).items():
        if key.startswith("replay."):
            intake.replay[key.removeprefix("replay.")] = value
    for key, value in set_map.items():  # --set wins over the grid
        if key.startswith("replay."):
            intake.replay[key.removeprefix("replay.")] = _typed_replay_option(key.removeprefix("replay."), value,
                                                                              f"--set {key}")
    check_strategies(PulsarConfig.resolve(intake.pulsar, path="pulsar"), "pulsar")  # bad values / classes
    intake.pulsar = typed_overrides(intake.pulsar, path="pulsar")  # broker.conf / --set strings as the defaults' types
    if line is not None:  # refuse keys of other lines before Spark starts
        finish(replace(intake, warnings=[], unknown_keys=list(intake.unknown_keys)), LineChoice(line, "explicit", ""))
    return intake


def resolve_run_config(
    config: str | None, broker_conf: str | None = None, sets: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pulsar keys as given, replay options) of :func:`read_run_config`, for callers that pick no line."""
    intake = read_run_config(config, broker_conf, sets)
    return intake.pulsar, intake.replay


def finish(intake: RunIntake, choice: LineChoice) -> ConfigSpec:
    """The run's (pulsar keys, replay options) on the line ``choice`` names: keys that line's ServiceConfiguration
    lacks are a UsageError when the user gave them and are dropped with a warning when they come from the
    broker.conf (Pulsar ignores them there); ``pulsarVersion`` is the line, and the replay options carry the run's
    ``name``, ``pulsarLine`` (line, source, detail) and the broker.conf's ``unknownKeys``."""
    have = line_keys(choice.line) | LBREPLAY_KEYS
    pulsar = dict(intake.pulsar)
    for key in sorted(pulsar):
        canon = canonical_key(key)
        if canon in have or key in have:
            continue
        where = lines_with(canon)
        if canon in intake.from_broker_conf:
            intake.warnings.append(f"{intake.broker_conf}:{intake.from_broker_conf[canon]}: {key} is not a key of "
                                   f"Pulsar {choice.line}; ignored, as Pulsar {choice.line} ignores it")
            del pulsar[key]
            if key not in intake.unknown_keys:
                intake.unknown_keys.append(key)
            continue
        raise UsageError(f"pulsar.{key}: not a ServiceConfiguration key of Pulsar {choice.line} (Pulsar "
                         f"{choice.line} ignores it; lines with it: {', '.join(where)})" if where else
                         f"pulsar.{key}: not a ServiceConfiguration key of Pulsar {choice.line}{did_you_mean(key, have)}")
    pulsar.setdefault("pulsarVersion", choice.line)
    replay = dict(intake.replay)
    replay["pulsarLine"] = choice.to_json()
    name = intake.name or intake.label
    if name:
        replay["name"] = name
    if intake.label:
        replay["label"] = intake.label
    if intake.unknown_keys:
        replay["unknownKeys"] = sorted(intake.unknown_keys)
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


def point_label(point: dict[str, Any], keys: list[str]) -> str:
    """A sweep point's human name: ``key=value`` of ``keys`` (the grid keys that vary), e.g.
    ``loadBalancerBrokerThresholdShedderPercentage=5``; strategy classes by their short name."""
    def text(value: Any) -> str:
        if isinstance(value, str):
            return short_class(value) if value.startswith("org.apache.") else value
        return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return ", ".join(f"{k}={text(point[k])}" for k in keys)


def grid_points(grid_file: str, broker_conf: str | None = None, sets: list[str] | None = None,
                allow_unknown_keys: bool = False) -> list[RunIntake]:
    """A sweep: one intake per point of the cartesian product of the ``grid:`` lists, in grid order (keys sorted).
    Precedence: Pulsar defaults < ``broker_conf`` < the YAML's ``pulsar:`` < the grid point < ``--set``; each point's
    ``label`` names the grid keys that vary (all grid keys when none does)."""
    doc = _read_yaml(grid_file)
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
    part = read_broker_conf(broker_conf, allow_unknown_keys) if broker_conf else None
    varying = [k for k in keys if len(grid[k]) > 1] or keys
    out = []
    for values in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, values))
        intake = _intake(doc, grid_file, broker_conf, part, sets or [], grid=point)
        intake.label = point_label(point, varying)
        out.append(intake)
    return out


def expand_grid(grid_file: str, broker_conf: str | None = None, sets: list[str] | None = None,
                allow_unknown_keys: bool = False) -> list[ConfigSpec]:
    """:func:`grid_points` as (pulsar keys, replay options) pairs, the point's ``label`` in the replay options."""
    return [(p.pulsar, {**p.replay, "label": p.label})
            for p in grid_points(grid_file, broker_conf, sets, allow_unknown_keys)]
