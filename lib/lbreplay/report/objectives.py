"""Objectives as data (``conf/objectives/<name>.yaml``) and limits (``KPI<=value``) over the KPI registry."""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from lbreplay.errors import UsageError
from lbreplay.paths import CONF_DIR
from lbreplay.report.kpis import Kpi, Metrics, format_number, kpi

OBJECTIVES_DIR = CONF_DIR / "objectives"
DEFAULT_OBJECTIVE = "balance"

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}
_LIMIT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|<|>)\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$")


@dataclass(frozen=True)
class Limit:
    kpi: Kpi
    op: str
    bound: float  # in the KPI's displayed unit

    @property
    def text(self) -> str:
        return f"{self.kpi.metric}{self.op}{self.bound:g}"

    def check(self, metrics: Metrics) -> str | None:
        """None when ``metrics`` keep the limit, else one line saying which and by how much."""
        shown = self.kpi.display(self.kpi.value(metrics))
        if shown is None:
            if self.kpi.never == "never":  # e.g. never balanced: no finite time keeps an upper bound
                return f"{self.text} broken: {self.kpi.metric} is never"
            return None
        if OPS[self.op](shown, self.bound):
            return None
        by = format_number(self.kpi, abs(shown - self.bound))
        return f"{self.text} broken: {self.kpi.metric}={format_number(self.kpi, shown)} ({by} beyond the limit)"


def parse_limit(text: str, where: str = "--limit") -> Limit:
    """``unloads_per_hour<=30`` -> Limit; a usage error naming the expression (unknown KPI: did you mean)."""
    m = _LIMIT.match(text)
    if not m:
        raise UsageError(f"{where} {text!r}: expected KPI<=number (operators <=, >=, <, >, ==)")
    return Limit(kpi(m.group(1), f"{where} {text!r}"), m.group(2), float(m.group(3)))


@dataclass(frozen=True)
class Term:
    kpi: Kpi
    weight: float
    per: float  # displayed units per score point


@dataclass(frozen=True)
class Objective:
    name: str
    description: str
    terms: tuple[Term, ...]
    limits: tuple[Limit, ...]
    show: tuple[Kpi, ...]

    def score(self, metrics: Metrics) -> float | None:
        """Sum of weight x displayed KPI / per (lower is better); None when a term has no value."""
        total = 0.0
        for t in self.terms:
            v = t.kpi.display(t.kpi.value(metrics))
            if v is None:
                return None
            total += t.weight * v / t.per
        return total

    def formula(self) -> str:
        parts = [f"{t.weight:g} × {t.kpi.label.lower()} / {format_number(t.kpi, t.per)}" for t in self.terms]
        return "score = " + " + ".join(parts) + " (lower is better)"

    def with_limits(self, extra: list[Limit]) -> Objective:
        return Objective(self.name, self.description, self.terms, self.limits + tuple(extra), self.show)


def _path(name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    p = OBJECTIVES_DIR / f"{name}.yaml"
    if not p.is_file():
        known = sorted(f.stem for f in OBJECTIVES_DIR.glob("*.yaml"))
        raise UsageError(f"--objective {name!r}: no such objective (known: {', '.join(known)})")
    return p


def load_objective(name: str = DEFAULT_OBJECTIVE) -> Objective:
    """The objective ``name`` (under conf/objectives/) or a YAML file; every key checked against the registry."""
    path = _path(name)
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    terms = []
    for i, t in enumerate(doc.get("score") or []):
        where = f"{path.name}: score[{i}]"
        try:
            weight, per = float(t.get("weight", 1.0)), float(t["per"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise UsageError(f"{where}: expected {{kpi: NAME, weight: number, per: number > 0}}") from None
        if not per > 0 or not math.isfinite(weight):
            raise UsageError(f"{where}.per: expected a number > 0")
        terms.append(Term(kpi(str(t.get("kpi")), f"{where}.kpi"), weight, per))
    if not terms:
        raise UsageError(f"{path.name}: score: expected a non-empty list of {{kpi, weight, per}}")
    limits = tuple(parse_limit(str(s), f"{path.name}: limits") for s in doc.get("limits") or [])
    show = tuple(kpi(str(s), f"{path.name}: show") for s in doc.get("show") or [t.kpi.metric for t in terms])
    return Objective(str(doc.get("name") or path.stem), " ".join(str(doc.get("description", "")).split()),
                     tuple(terms), limits, show)
