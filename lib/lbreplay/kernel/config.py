"""Pulsar ``broker.conf`` load-balancer keys with per-version defaults (ServiceConfiguration).

Configuration is data: defaults live in ``conf/pulsar/defaults.yaml``; a config is those defaults,
overridden by the chosen ``pulsarVersion`` profile, overridden by the user's keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.version_profile import ALIASES, line_of, profile_for
from lbreplay.paths import CONF_DIR

DEFAULTS_FILE: Path = CONF_DIR / "pulsar" / "defaults.yaml"
PACKAGE = "org.apache.pulsar.broker.loadbalance.impl."
EXT_PACKAGE = "org.apache.pulsar.broker.loadbalance.extensions."


@lru_cache(maxsize=1)
def _defaults_doc() -> dict[str, Any]:
    with open(DEFAULTS_FILE, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def known_keys() -> dict[str, Any]:
    """All known keys with their 4.x defaults."""
    return dict(_defaults_doc()["keys"])


def versions() -> list[str]:
    """The accepted ``pulsarVersion`` values: the released lines, then the aliases (``4.x``, ``3.x``)."""
    return list(_defaults_doc()["versions"].keys()) + list(ALIASES)


def _coerce(key: str, value: Any, default: Any, path: str) -> Any:
    """Coerce ``value`` to the type of ``default`` (broker.conf values arrive as strings)."""
    where = f"{path}.{key}" if path else key
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise UsageError(f"{where}: expected a boolean, got {value!r}")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, bool):
            raise UsageError(f"{where}: expected a number, got {value!r}")
        try:
            num = float(value) if isinstance(value, str) else value
        except ValueError:
            raise UsageError(f"{where}: expected a number, got {value!r}") from None
        if not isinstance(num, (int, float)):
            raise UsageError(f"{where}: expected a number, got {type(value).__name__}")
        if isinstance(num, float) and not math.isfinite(num):
            raise InvalidInputError(f"{where}: must be finite, got {value!r}")
        if isinstance(default, int) and float(num).is_integer():
            return int(num)
        return float(num)
    if isinstance(default, list):
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                value = json.loads(text)
            else:
                value = [v.strip() for v in text.split(",") if v.strip()]
        if not isinstance(value, list):
            raise UsageError(f"{where}: expected a list, got {type(value).__name__}")
        return list(value)
    if default is None:
        if value is None or value == "":
            return None
        return value
    if not isinstance(value, str):
        raise UsageError(f"{where}: expected a string, got {type(value).__name__}")
    return value


class PulsarConfig(Mapping[str, Any]):
    """A resolved, immutable set of load-balancer keys (``ServiceConfiguration``)."""

    def __init__(self, values: dict[str, Any]):
        self._values = values

    @classmethod
    def resolve(cls, overrides: Mapping[str, Any] | None = None, *, path: str = "config") -> "PulsarConfig":
        """Defaults of the selected ``pulsarVersion`` overridden by ``overrides``; unknown keys are an error."""
        doc = _defaults_doc()
        keys: dict[str, Any] = dict(doc["keys"])
        aliases: dict[str, str] = doc.get("aliases", {})
        given: dict[str, Any] = {}
        for raw_key, value in (overrides or {}).items():
            key = aliases.get(raw_key, raw_key)
            if key not in keys:
                raise UsageError(f"{path}.{raw_key}: unknown config key")
            given[key] = value
        version = str(given.get("pulsarVersion", keys["pulsarVersion"]))
        if line_of(version) not in doc["versions"]:
            raise UsageError(f"{path}.pulsarVersion: unknown version {version!r}; known: {', '.join(versions())}")
        values = dict(keys)
        values.update(doc["versions"][line_of(version)] or {})
        for key, value in given.items():
            values[key] = _coerce(key, value, keys[key], path)
        values["pulsarVersion"] = version
        for name in ("loadBalancerLoadSheddingStrategy", "loadBalancerLoadPlacementStrategy"):
            values[name] = qualify_class(values[name])
        return cls(values)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"unknown Pulsar config key {key!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def replace(self, **changes: Any) -> "PulsarConfig":
        merged = dict(self._values)
        merged.update(changes)
        return PulsarConfig.resolve(merged)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    # --- derived values used by several strategies -------------------------------------------
    @property
    def history_percentage(self) -> float:
        """``loadBalancerHistoryResourcePercentage`` (the EWMA weight of history)."""
        return float(self._values["loadBalancerHistoryResourcePercentage"])

    @property
    def overload_threshold(self) -> float:
        """``loadBalancerBrokerOverloadedThresholdPercentage / 100``."""
        return self._values["loadBalancerBrokerOverloadedThresholdPercentage"] / 100.0

    def bandwidth_in_weight(self) -> float:
        """``ServiceConfiguration.getLoadBalancerBandwidthInResourceWeight``: new key if != 1.0, else the old spelling
        (PIP-357, 4.0); before 4.0 only ``getLoadBalancerBandwithInResourceWeight`` (the old spelling) exists."""
        return self._bandwidth_weight("In")

    def bandwidth_out_weight(self) -> float:
        return self._bandwidth_weight("Out")

    def _bandwidth_weight(self, side: str) -> float:
        old = float(self._values[f"loadBalancerBandwith{side}ResourceWeight"])
        if not profile_for(str(self._values["pulsarVersion"])).bandwidth_weight_keys_pip357:
            return old
        new = float(self._values[f"loadBalancerBandwidth{side}ResourceWeight"])
        return new if new != 1.0 else (old if old != 1.0 else 1.0)

    def resource_weights(self) -> tuple[float, float, float, float, float]:
        """Weights in resource order (cpu, memory, directMemory, bandwidthIn, bandwidthOut)."""
        return (
            float(self._values["loadBalancerCPUResourceWeight"]),
            float(self._values["loadBalancerMemoryResourceWeight"]),
            float(self._values["loadBalancerDirectMemoryResourceWeight"]),
            self.bandwidth_in_weight(),
            self.bandwidth_out_weight(),
        )


def qualify_class(name: str) -> str:
    """Accept a short strategy name (``ThresholdShedder``) and return Pulsar's full class name."""
    if "." in name:
        return name
    if name == "TransferShedder":
        return EXT_PACKAGE + "scheduler.TransferShedder"
    return PACKAGE + name


def short_class(name: str) -> str:
    return name.rsplit(".", 1)[-1]


EXTENSIBLE_LOAD_MANAGER = "ExtensibleLoadManagerImpl"


def is_extensible(conf: Mapping[str, Any]) -> bool:
    """The extensible load manager (PIP-192) decides: ``loadManagerClassName`` is ``ExtensibleLoadManagerImpl``
    or the shedding strategy is ``TransferShedder`` (the extensible manager falls back to it anyway)."""
    return (short_class(conf["loadManagerClassName"]) == EXTENSIBLE_LOAD_MANAGER
            or short_class(conf["loadBalancerLoadSheddingStrategy"]) == "TransferShedder")


def typed_overrides(overrides: Mapping[str, Any], *, path: str = "config") -> dict[str, Any]:
    """``overrides`` with each value coerced to the type of its key's default (``"5"`` -> ``5``, ``"true"`` ->
    ``True``), keys kept as given; what a run records (``runs.config``) after broker.conf / ``--set`` strings."""
    doc = _defaults_doc()
    keys: dict[str, Any] = doc["keys"]
    aliases: dict[str, str] = doc.get("aliases", {})
    out: dict[str, Any] = {}
    for raw_key, value in overrides.items():
        key = aliases.get(raw_key, raw_key)
        if key not in keys:
            raise UsageError(f"{path}.{raw_key}: unknown config key")
        out[raw_key] = value if key == "pulsarVersion" else _coerce(raw_key, value, keys[key], path)
    return out


def broker_conf_entries(text: str) -> list[tuple[int, str, str]]:
    """Every ``(line number, key, value)`` of a ``broker.conf`` (Java properties: ``#``/``!`` comments, ``=``/``:``
    separators), in file order; the caller applies ``java.util.Properties.load``'s last-one-wins."""
    out: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            continue
        out.append((number, line[:sep].strip(), line[sep + 1 :].strip()))
    return out


def canonical_key(key: str) -> str:
    """``key`` with an older spelling mapped to the current one (``aliases`` in ``conf/pulsar/defaults.yaml``)."""
    return str(_defaults_doc().get("aliases", {}).get(key, key))


def parse_broker_conf(text: str) -> dict[str, str]:
    """Read a ``broker.conf`` (the last of duplicate keys wins as in ``java.util.Properties.load``) and keep the
    load-balancer keys lbreplay knows, as strings (:func:`typed_overrides` types them)."""
    known = known_keys()
    out: dict[str, str] = {}
    for _, key, value in broker_conf_entries(text):
        key = canonical_key(key)
        if key in known and value != "":
            out[key] = value
    return out
