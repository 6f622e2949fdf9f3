"""Statements of ``lbreplay sql``: a text split on semicolons outside quotes and comments, and the interactive
shell (statements read from standard input, ``;``-terminated; ``.quit`` or end of input leaves).

Spark SQL's lexical rules that matter for the split: string literals in ``'…'`` or ``"…"`` (a backslash escapes
the next character), identifiers in backticks (a doubled backtick is one), ``--`` line comments and ``/* … */``
block comments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TextIO

PROMPT = "lbreplay> "
CONTINUATION = "      -> "
QUIT_COMMANDS = (".quit", ".exit", "quit", "exit")


def split_statements(text: str) -> tuple[list[str], str]:
    """``(complete statements, unterminated rest)``: each statement stripped, without its ``;``; empty ones
    (``;;``, comments only) dropped. The rest is what follows the last ``;`` outside quotes and comments."""
    done: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            i = _end_of_quoted(text, i)
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == ";":
            done.append(text[start:i])
            start = i = i + 1
        else:
            i += 1
    return [s.strip() for s in done if _has_code(s)], text[start:]


def _end_of_quoted(text: str, i: int) -> int:
    """Index just past the quoted literal or identifier opening at ``i`` (the text's end if unterminated)."""
    quote, j, n = text[i], i + 1, len(text)
    while j < n:
        if text[j] == "\\" and quote != "`":
            j += 2
            continue
        if text[j] == quote:
            if quote == "`" and text.startswith("``", j):
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _has_code(statement: str) -> bool:
    """Whether ``statement`` has anything besides whitespace and comments."""
    text = statement
    while True:
        text = text.strip()
        if text.startswith("--"):
            j = text.find("\n")
            text = "" if j < 0 else text[j + 1:]
        elif text.startswith("/*"):
            j = text.find("*/")
            text = "" if j < 0 else text[j + 2:]
        else:
            return bool(text)


def statements_of(text: str) -> list[str]:
    """Every statement of ``text``; a last one without ``;`` counts too."""
    done, rest = split_statements(text)
    return done + ([rest.strip()] if _has_code(rest) else [])


def shell(run: Callable[[str], bool], lines: Iterable[str], out: TextIO, interactive: bool) -> bool:
    """Read ``;``-terminated statements from ``lines`` and hand each to ``run`` (which prints the result or the
    error, and returns whether it succeeded); prompts on ``out`` when ``interactive``. ``.quit`` / ``.exit`` on a
    line of their own, or the end of input, leave (an unterminated last statement is run). True if every
    statement succeeded."""
    ok, buffer = True, ""
    prompt = PROMPT
    it = iter(lines)
    while True:
        if interactive:
            out.write(prompt)
            out.flush()
        line = next(it, None)
        if line is None:
            if interactive:
                out.write("\n")
            break
        if not buffer.strip() and line.strip().rstrip(";").lower() in QUIT_COMMANDS:
            break
        done, buffer = split_statements(buffer + line)
        for statement in done:
            ok = run(statement) and ok
        prompt = CONTINUATION if _has_code(buffer) else PROMPT
    if _has_code(buffer):
        ok = run(buffer.strip()) and ok
    return ok
