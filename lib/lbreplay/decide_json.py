"""``decide``'s request and response JSON besides Pulsar's own objects (:mod:`lbreplay.kernel.pulsar_json`):
the request document, its actions, namespace layouts and topic records, and the plain-JSON response values.

Every bad request is a usage error (exit 2: malformed JSON, wrong JSON type, unknown key or action) or an invalid
value (exit 3), with a one-line message naming the JSON path of the offending field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lbreplay.errors import InvalidInputError, LbReplayError, UsageError
from lbreplay.kernel.json_readers import (
    as_array,
    as_number,
    as_object,
    as_string,
    check_keys,
    child,
    parse_boundary,
    parse_bundle_name,
)
from lbreplay.kernel.naming import FIRST_BOUNDARY, LAST_BOUNDARY, namespace_of_topic, topic_hash_of

SIMPLE_ACTIONS = ("shed", "split")
OBJECT_ACTIONS = ("splitBundle", "assign", "lookup")


def parse_request_text(text: str) -> dict[str, Any]:
    """Decode the request JSON; malformed JSON is a usage error (exit 2) with line and column."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"$: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return as_object(doc, "$", allow_null=False)


def parse_actions(doc: Any) -> list[tuple[str, str, Any]]:
    """``actions``: ``"shed"``, ``"split"``, ``{"splitBundle": {...}}``, ``{"assign": [...]}``, ``{"lookup": [...]}``."""
    out: list[tuple[str, str, Any]] = []
    for i, a in enumerate(as_array(doc, "$.actions")):
        p = child("$.actions", i)
        if isinstance(a, str):
            if a not in SIMPLE_ACTIONS:
                raise UsageError(f"{p}: unknown action {a!r}; known: shed, split, splitBundle, assign, lookup")
            out.append((p, a, None))
            continue
        o = as_object(a, p, allow_null=False)
        if len(o) != 1:
            raise UsageError(f"{p}: an action object has exactly one key (splitBundle, assign or lookup)")
        (kind, arg), = o.items()
        if kind not in OBJECT_ACTIONS:
            raise UsageError(f"{child(p, kind)}: unknown action {kind!r}; known: shed, split, splitBundle, assign, lookup")
        ap = child(p, kind)
        if kind == "splitBundle":
            out.append((ap, kind, as_object(arg, ap, allow_null=False)))
        else:
            items = [as_string(v, child(ap, j)) for j, v in enumerate(as_array(arg, ap))]
            if kind == "assign":
                for j, name in enumerate(items):
                    parse_bundle_name(name, child(ap, j))
            out.append((ap, kind, items))
    return out


def plain_json(value: Any) -> Any:
    """Plain JSON: NumPy scalars/arrays to Python, non-finite floats to null, tuples/sets to lists."""
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [plain_json(v) for v in sorted(value)]
    if isinstance(value, np.ndarray):
        return plain_json(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    return value


def parse_namespaces(doc: Any, path: str = "$.namespaces") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``namespaces``: per namespace an explicit bundle layout (``boundaries``) and local ``policies``.

    A layout is the sorted boundary list of ``NamespaceBundles``: at least two hex values, strictly increasing,
    from ``0x00000000`` to ``0xffffffff``. Returns (layouts, the raw block for ``NamespacePolicies.from_json``).
    """

    layouts: dict[str, np.ndarray] = {}
    o = as_object(doc, path)
    for ns, entry in o.items():
        p = child(path, ns)
        parts = ns.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise InvalidInputError(f"{p}: malformed namespace name {ns!r}: expected tenant/namespace")
        e = as_object(entry, p)
        check_keys(e, ("boundaries", "policies"), p)
        as_object(e.get("policies"), child(p, "policies"))
        if e.get("boundaries") is None:
            continue
        bp = child(p, "boundaries")
        vals = [parse_boundary(v, child(bp, i)) for i, v in enumerate(as_array(e["boundaries"], bp))]
        if len(vals) < 2 or vals[0] != FIRST_BOUNDARY or vals[-1] != LAST_BOUNDARY:
            raise InvalidInputError(f"{bp}: a bundle layout runs from 0x00000000 to 0xffffffff with >= 2 boundaries")
        for i in range(1, len(vals)):
            if vals[i] <= vals[i - 1]:
                raise InvalidInputError(f"{child(bp, i)}: boundaries must be strictly increasing")
        layouts[ns] = np.asarray(vals, dtype=np.int64)
    return layouts, o


def parse_topics(doc: Any, path: str = "$.topics") -> dict[str, list[dict[str, Any]]]:
    """``topics``: per bundle, its topics' stats (``TopicStats`` of the topic-aware split algorithms).

    Each topic must be a valid topic name of the bundle's namespace whose CRC-32 lies in the bundle's range.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for bundle, records in as_object(doc, path).items():
        bpath = child(path, bundle)
        ns, lower, upper = parse_bundle_name(bundle, bpath)
        recs: list[dict[str, Any]] = []
        for i, rec in enumerate(as_array(records, bpath)):
            rp = child(bpath, i)
            r = as_object(rec, rp, allow_null=False)
            if r.get("topic") is None:
                raise UsageError(f"{child(rp, 'topic')}: missing")
            topic = as_string(r["topic"], child(rp, "topic"))
            try:
                tns = namespace_of_topic(topic)
                h = topic_hash_of(topic)
            except ValueError as exc:
                raise InvalidInputError(f"{child(rp, 'topic')}: {exc}") from None
            if tns != ns:
                raise InvalidInputError(f"{child(rp, 'topic')}: topic of namespace {tns!r}, not of bundle {bundle!r}")
            if not (lower <= h < upper or (h == upper == 0xFFFFFFFF)):
                raise InvalidInputError(f"{child(rp, 'topic')}: topic hash 0x{h:08x} is outside bundle {bundle!r}")
            clean: dict[str, Any] = {"topic": topic}
            for key in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
                if r.get(key) is not None:
                    clean[key] = as_number(r[key], child(rp, key), minimum=0.0)
            recs.append(clean)
        out[bundle] = recs
    return out


def with_request_root(exc: LbReplayError) -> LbReplayError:
    """Re-raise a kernel parser's error with the request's ``$.`` root on its path."""
    msg = str(exc)
    if not msg.startswith("$"):
        msg = "$." + msg
    return type(exc)(msg)


def hex_boundary(x: int) -> str:
    return f"0x{int(x):08x}"


def drawn_entry(entry: dict[str, Any], drawn_among: Sequence[str] | None) -> dict[str, Any]:
    """A response entry with ``drawnAmong`` (the brokers Pulsar's placement drew its broker from at random,
    ``ThreadLocalRandom``) when it was drawn; unchanged otherwise."""
    if drawn_among is not None:
        entry["drawnAmong"] = list(drawn_among)
    return entry
