"""``--help`` of the root and of every registered command exits 0 and shows every flag the command declares.

The commands are read from the typer app (a command added later is covered without editing this file); help texts
are printed as written (``rich_markup_mode=None``), so Pulsar spellings with brackets such as
``zk:host:2181[,host:2181][/chroot]`` are neither parsed as Rich markup (``collect --help`` exited 1 with
``MarkupError: closing tag '[/chroot]'``) nor dropped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from lbreplay.cli import app

GROUP: Any = get_command(app)
COMMANDS = sorted(GROUP.commands)


def _flags(command: Any) -> list[str]:
    """Every visible option name the command declares (``--lake``, ``--set``, ``--no-x``)."""
    return [name for p in command.params if p.param_type_name == "option" and not getattr(p, "hidden", False)
            for name in (*p.opts, *p.secondary_opts)]


def test_every_registered_command_is_checked() -> None:
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    assert names == set(COMMANDS) and {"collect", "ingest", "replay", "report"} <= names


@pytest.mark.parametrize("name", COMMANDS)
def test_help_of_every_command(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"], prog_name="lbreplay", env={"COLUMNS": "200"})
    assert result.exit_code == 0, f"{name} --help: {result.exception!r}\n{result.output}"
    assert result.output.startswith(f"Usage: lbreplay {name} ")
    missing = [f for f in _flags(GROUP.commands[name]) if f not in result.output]
    assert missing == [], f"{name} --help does not show {missing}"


def test_root_help_lists_every_command_and_the_root_flag() -> None:
    result = CliRunner().invoke(app, ["--help"], prog_name="lbreplay", env={"COLUMNS": "200"})
    assert result.exit_code == 0, repr(result.exception)
    assert [n for n in COMMANDS if n not in result.output] == []
    assert "--verbose" in result.output


def test_collect_help_through_the_console_entry_point_prints_the_brackets_as_written() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "lbreplay.cli", "collect", "--help"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "zk:host:2181[,host:2181][/chroot]" in proc.stdout
    assert "--leader-log-dir" in proc.stdout and "--check" in proc.stdout
    assert proc.stderr == ""
