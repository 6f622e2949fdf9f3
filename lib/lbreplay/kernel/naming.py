"""Topic -> bundle mapping and bundle range strings (NamespaceBundleFactory, NamespaceBundles, NamespaceBundle)."""

from __future__ import annotations

FIRST_BOUNDARY = 0x00000000
LAST_BOUNDARY = 0xFFFFFFFF


def format_range(lower: int, upper: int) -> str:
    """``String.format("0x%08x_0x%08x", lower, upper)``."""
    return f"0x{lower:08x}_0x{upper:08x}"


def parse_range(text: str) -> tuple[int, int]:
    """Parse ``0x%08x_0x%08x`` (``Long.decode`` of each side)."""
    lo, sep, hi = text.partition("_")
    if not sep:
        raise ValueError(f"malformed bundle range {text!r}")
    return int(lo, 16) if lo.lower().startswith("0x") else int(lo), int(hi, 16) if hi.lower().startswith("0x") else int(hi)
