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
