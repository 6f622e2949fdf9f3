"""docs/reference.md stays current: its generated CLI and tables blocks equal what the code declares.

When a command, flag, help text, table or column changes, regenerate with
``python scripts/gen_cli_reference.py --write`` and commit docs/reference.md with the change.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gen_cli_reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


@pytest.mark.parametrize("name", sorted(GEN.BLOCKS))
def test_committed_block_is_current(name: str) -> None:
    """The block in docs/reference.md is exactly what the generator prints from the code today."""
    committed = GEN.current_block((REPO / "docs" / "reference.md").read_text(encoding="utf-8"), name)
    assert committed, f"docs/reference.md has no {name} block"
    assert committed == GEN.BLOCKS[name](), (
        f"docs/reference.md: the {name} block is out of date; run python scripts/gen_cli_reference.py --write")


def test_cli_block_lists_every_command_and_flag() -> None:
    """Each command of the typer app has its section and each of its options a row (a generator that dropped
    commands or flags would still match itself, so this checks the content against the app)."""
    import typer

    from lbreplay.cli import app

    block = GEN.render_cli()
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert len(commands) >= 11
    for name, cmd in commands.items():
        section = block.split(f"### lbreplay {name}\n", 1)[1].split("\n### ", 1)[0]
        for param in cmd.params:
            if param.param_type_name == "option":
                assert f"| `{param.opts[0]}`" in section, (name, param.opts)
    assert "| `--request` | text | required |" in block
    assert "| `--set` (repeatable) | text | - |" in block


def test_tables_block_lists_every_column() -> None:
    """Each registered table has its section with one row per column, in schema order."""
    block = GEN.render_tables()
    tables = GEN._registered_tables()
    assert {"broker_load", "bundle_load", "runs", "decisions", "run_metrics"} <= {t.name for t in tables}
    for table in tables:
        section = block.split(f"### {table.name}\n", 1)[1].split("\n### ", 1)[0]
        rows = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
        assert rows == table.column_names, table.name


def test_config_block_lists_every_key_with_its_default() -> None:
    """Each key of conf/pulsar/defaults.yaml has its row, with the default spelled as in broker.conf, and a key a
    line overrides names that line."""
    import yaml

    defaults = yaml.safe_load((REPO / "conf" / "pulsar" / "defaults.yaml").read_text(encoding="utf-8"))
    block = GEN.render_config()
    for key in defaults["keys"]:
        assert f"| `{key}` | " in block, key
    assert "| `loadBalancerSheddingEnabled` | `true` |" in block
    overridden = next((k, line) for line, over in defaults["versions"].items() if over for k in over)
    row = next(r for r in block.splitlines() if r.startswith(f"| `{overridden[0]}` | "))
    assert f"{overridden[1]}: " in row


def test_check_mode_fails_on_a_stale_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--check`` exits 0 on the committed reference and 1 on a copy with one flag's help changed; ``--write``
    repairs the copy."""
    assert GEN.main(["--check"]) == 0
    stale = tmp_path / "reference.md"
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    stale.write_text(text.replace("Request JSON file, or - for standard input.", "Request file."), encoding="utf-8")
    monkeypatch.setattr(GEN, "REFERENCE", stale)
    assert GEN.main(["--check"]) == 1
    assert "cli-reference" in capsys.readouterr().err
    assert GEN.main(["--write"]) == 0
    assert stale.read_text(encoding="utf-8") == text
