"""Typed readers of JSON documents with JSON-path error messages (``$.a.b[2]``): the layer every Pulsar object of
:mod:`lbreplay.kernel.pulsar_json` and ``decide``'s request is read through. Bad JSON types are usage errors
(exit 2), bad values invalid-input errors (exit 3). :class:`JsonObject` reads the objects of a dump file for
``ingest``: errors name the file and the JSON path, numbers are kept as written."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from lbreplay.errors import InvalidInputError, UsageError
from lbreplay.kernel.naming import split_bundle_name

# ----------------------------------------------------------------------------------------------------------
# JSON paths and typed readers
# ----------------------------------------------------------------------------------------------------------
_RANGE = re.compile(r"0x([0-9a-f]{8})_0x([0-9a-f]{8})\Z")
_MAX_HASH = 0xFFFFFFFF
UNKNOWN_LIMIT = -1.0  # ResourceUsage limit Pulsar writes when it cannot measure it (e.g. NIC speed)


def child(path: str, key: str | int) -> str:
    """JSON path of ``key`` under ``path``: ``$.a.b``, ``$.brokers["b1:8080"]``, ``$.list[3]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isascii() and key.isidentifier():  # [A-Za-z_][A-Za-z0-9_]*
        return f"{path}.{key}"
    return f'{path}["{_escape(key)}"]'


def _escape(key: str) -> str:
    return key.replace("\\", "\\\\").replace('"', '\\"')


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def as_object(value: Any, path: str, *, allow_null: bool = True) -> dict[str, Any]:
    """A JSON object (``null`` reads as empty, as Jackson leaves the field at its default)."""
    if value is None and allow_null:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{path}: expected an object, got {json_type(value)}")
    return value


def as_array(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{path}: expected an array, got {json_type(value)}")
    return value


def as_string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{path}: expected a string, got {json_type(value)}")
    return value


def as_number(value: Any, path: str, *, minimum: float | None = None) -> float:
    """A finite JSON number (``bool`` is not a number); ``minimum`` is inclusive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{path}: expected a number, got {json_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{path}: must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{path}: must be >= {format_number(minimum)}, got {format_number(value)}")
    return float(value)


def as_int(value: Any, path: str, *, minimum: int | None = None) -> int:
    """A JSON integer (an integral float such as ``3.0`` is accepted, as Jackson's int coercion does)."""
    num = as_number(value, path)
    if not num.is_integer():
        raise UsageError(f"{path}: expected an integer, got {value}")
    if minimum is not None and num < minimum:
        raise InvalidInputError(f"{path}: must be >= {minimum}, got {format_number(value)}")
    return int(value)


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{path}: expected a boolean, got {json_type(value)}")
    return value


def format_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def get_number(obj: Mapping[str, Any], key: str, path: str, default: float = 0.0, *,
               minimum: float | None = None) -> float:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is float and math.isfinite(value) and (minimum is None or value >= minimum):
        return value  # the common case, without building the JSON path a message would need
    if type(value) is int and (minimum is None or value >= minimum):
        return float(value)
    return as_number(value, child(path, key), minimum=minimum)


def get_int(obj: Mapping[str, Any], key: str, path: str, default: int = 0, *, minimum: int | None = None) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is int and (minimum is None or value >= minimum):
        return value  # the common case, without building the JSON path a message would need
    return as_int(value, child(path, key), minimum=minimum)


def get_bool(obj: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    value = obj.get(key)
    return default if value is None else as_bool(value, child(path, key))


def get_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    return None if value is None else as_string(value, child(path, key))


def parse_bundle_name(name: Any, path: str) -> tuple[str, int, int]:
    """Validate a full bundle name ``tenant/ns/0x%08x_0x%08x`` (``NamespaceBundleFactory.getBundle``).

    The namespace is everything before the last ``/`` and must be ``tenant/ns`` (or V1
    ``tenant/cluster/ns``); the range is lower-case 8-digit hex, ``lower < upper <= 0xffffffff``.
    Returns (namespace, lower, upper).
    """
    if type(name) is str:
        known = _VALID_BUNDLE_NAMES.get(name)
        if known is not None:
            return known
    text = as_string(name, path)
    ns, rng = split_bundle_name(text)
    parts = ns.split("/")
    if len(parts) not in (2, 3) or any(not p or p != p.strip() for p in parts):
        raise InvalidInputError(f"{path}: malformed bundle name {text!r}: expected tenant/namespace/0x%08x_0x%08x")
    lower, upper = parse_bundle_range(rng, path, text)
    if len(_VALID_BUNDLE_NAMES) >= 65_536:
        _VALID_BUNDLE_NAMES.clear()
    _VALID_BUNDLE_NAMES[text] = (ns, lower, upper)
    return ns, lower, upper


# names already validated (bundle names repeat across brokers, ticks and requests; only valid ones are kept)
_VALID_BUNDLE_NAMES: dict[str, tuple[str, int, int]] = {}


def parse_bundle_range(rng: str, path: str, shown: str | None = None) -> tuple[int, int]:
    """Validate a bundle range ``0x%08x_0x%08x`` with ``lower < upper``."""
    m = _RANGE.match(rng)
    if not m:
        raise InvalidInputError(f"{path}: malformed bundle range {rng!r} in {shown or rng!r}: expected 0x%08x_0x%08x")
    lower, upper = int(m.group(1), 16), int(m.group(2), 16)
    if lower >= upper:
        raise InvalidInputError(f"{path}: malformed bundle range {rng!r}: lower bound must be below upper bound")
    return lower, upper


def parse_boundary(value: Any, path: str) -> int:
    """A hash boundary: a hex string ``0x…`` (``Long.decode``) or an integer, in ``[0, 0xffffffff]``."""
    if isinstance(value, str):
        text = value.strip()
        try:
            num = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
        except ValueError:
            raise InvalidInputError(f"{path}: malformed boundary {value!r}: expected 0x%08x") from None
    else:
        num = as_int(value, path)
    if not 0 <= num <= _MAX_HASH:
        raise InvalidInputError(f"{path}: boundary {value!r} outside [0x00000000, 0xffffffff]")
    return num


def check_keys(obj: Mapping[str, Any], known: tuple[str, ...], path: str) -> None:
    """Request-structure objects (not Pulsar's own, which ignore unknown fields) reject unknown keys (exit 2)."""
    for key in obj:
        if key not in known:
            raise UsageError(f"{child(path, key)}: unknown key; known: {', '.join(known)}")


def check_broker_id(name: str, path: str) -> str:
    if not name or name != name.strip():
        raise InvalidInputError(f"{path}: malformed broker id {name!r}")
    return name


def parse_timestamps(doc: Any, path: str, *, bundles: bool) -> dict[str, int]:
    """A ``name -> epoch ms`` map (``recentlyUnloadedBundles`` / ``recentlyUnloadedBrokers``)."""
    out: dict[str, int] = {}
    for name, ts in as_object(doc, path).items():
        p = child(path, name)
        if bundles:
            parse_bundle_name(name, p)
        else:
            check_broker_id(name, p)
        out[name] = as_int(ts, p, minimum=0)
    return out


# ----------------------------------------------------------------------------------------------------------
# Objects of a dump file, read faithfully (``lbreplay ingest``)
# ----------------------------------------------------------------------------------------------------------
#: Numbers Jackson writes as strings.
NON_NUMERIC = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}


def _shown(value: Any) -> str:
    return json.dumps(value)[:40]


class JsonObject:
    """A JSON object of dump ``file`` at JSON path ``path``, with typed getters of its fields.

    Strict about structure, faithful about content: a missing required field or a value of the wrong JSON type is
    an :class:`InvalidInputError` (exit 3) naming the file and the JSON path; numbers are taken as they are
    (negative, NaN, ±Infinity, also Jackson's ``"NaN"`` / ``"Infinity"`` strings), left to ``lbreplay validate``.
    """

    def __init__(self, value: dict[str, Any], file: str, path: str = "$") -> None:
        self.value = value
        self.file = file
        self.path = path

    def error(self, key: str | int | None, message: str) -> InvalidInputError:
        where = self.path if key is None else child(self.path, key)
        return InvalidInputError(f"{self.file}: {where}: {message}")

    def _field(self, key: str, required: bool, what: str) -> Any:
        """The value of ``key`` (None when absent or null, an error if ``required``)."""
        v = self.value.get(key)
        if v is None and required:
            raise self.error(key, f"required {what} is missing")
        return v

    def obj(self, key: str, required: bool = True) -> JsonObject | None:
        v = self._field(key, required, "object")
        return None if v is None else self._member(key, v)

    def _member(self, key: str, v: Any) -> JsonObject:
        if not isinstance(v, dict):
            raise self.error(key, f"expected an object, got {type(v).__name__}")
        return JsonObject(v, self.file, child(self.path, key))

    def items(self) -> Iterator[tuple[str, JsonObject]]:
        """The members, each an object, in key order."""
        for k in sorted(self.value):
            yield k, self._member(k, self.value[k])

    def objects(self, key: str) -> Iterator[JsonObject]:
        """The elements of the array ``key``, each an object (checked as it is reached)."""
        items = self.value.get(key)
        if not isinstance(items, list):
            raise self.error(key, "expected a list")
        array = JsonObject({}, self.file, child(self.path, key))
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise array.error(i, "expected an object")
            yield JsonObject(item, self.file, child(array.path, i))

    def num(self, key: str, required: bool = True, default: float | None = None) -> float | None:
        v = self._field(key, required, "number")
        if v is None:
            return default
        if isinstance(v, str) and v in NON_NUMERIC:
            return NON_NUMERIC[v]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(key, f"expected a number, got {_shown(v)}")
        return float(v)

    def int_(self, key: str, required: bool = True, default: int | None = None) -> int | None:
        v = self._field(key, required, "integer")
        if v is None:
            return default
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(key, f"expected an integer, got {_shown(v)}")
        return v

    def str_(self, key: str, required: bool = True) -> str | None:
        v = self._field(key, required, "string")
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.error(key, f"expected a string, got {_shown(v)}")
        return v

    def bool_(self, key: str, default: bool | None = None) -> bool | None:
        v = self._field(key, False, "boolean")
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.error(key, f"expected true/false, got {_shown(v)}")
        return v
