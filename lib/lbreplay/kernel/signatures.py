"""Thin entry points that take another kernel function's parameters.

Where Pulsar offers one operation in two shapes (``selectBroker`` / ``selectBrokerForAssignment``, a split
reason as a code or as a name), the kernel writes the parameter list once, on the main function, and derives
the other entry point from it with :func:`same_parameters`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def same_parameters(template: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Decorate a ``(*args, **kwargs)`` wrapper so that type checkers and ``help()`` see ``template``'s parameters
    (its own return type and docstring are kept)."""

    def wrap(fn: Callable[..., R]) -> Callable[P, R]:
        ret = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.signature(template).replace(return_annotation=ret)  # type: ignore[attr-defined]
        return fn

    return wrap
