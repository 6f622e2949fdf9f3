"""Exit codes of the CLI contract (DESIGN.md §3) and the exceptions that carry them."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3


class LbReplayError(Exception):
    """Base error; `exit_code` is what the CLI exits with."""

    exit_code: int = EXIT_FAILURE


class UsageError(LbReplayError):
    """Bad flags, unknown config key, malformed request (exit 2)."""

    exit_code = EXIT_USAGE


class InvalidInputError(LbReplayError):
    """Input data or a request value failed validation (exit 3)."""

    exit_code = EXIT_INVALID_INPUT


def one_line_reason(exc: BaseException) -> str:
    """``Type: first line of the message`` (Spark/Java errors carry pages of JVM stack; keep the first line)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if len(first) > 300:
        first = first[:297] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
