"""The structure check (``python -m lbreplay.devtools.imports``): the real tree passes its layering rules, and the
rules catch what they are for (a circle, a kernel import of the replay, a fat job)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lbreplay.devtools import imports


def test_the_tree_has_no_circle_and_a_self_contained_kernel() -> None:
    modules = imports.load_modules()
    assert "lbreplay.replay.engine" in modules and "lbreplay.kernel.modular_load_manager" in modules
    assert imports.import_cycles(modules) == []
    assert imports.kernel_violations(modules) == []
    assert imports.thin_violations(modules) == []
    # the replay drives the kernel's leader, never the other way round
    assert "lbreplay.kernel.modular_load_manager" in modules["lbreplay.replay.modular_leader"].imports
    assert not any(m.startswith("lbreplay.replay") for m in modules["lbreplay.kernel.modular_load_manager"].imports)


def test_long_functions_are_the_pulsar_methods_named_in_the_check() -> None:
    modules = imports.load_modules()
    long = dict(imports.long_functions(modules))
    assert set(long) <= set(imports.LONG_PULSAR_METHODS)
    assert len(long) <= imports.MAX_LONG_FUNCTIONS
    assert imports.size_violations(modules) == []


def test_a_big_module_and_a_long_function_are_reported(tmp_path: Path) -> None:
    """A module over 600 lines and a function over 80 lines that mirrors no Pulsar method both fail the check."""
    path = tmp_path / "big.py"
    path.write_text("def long():\n" + "    x = 1\n" * 90 + "\n" * 520, encoding="utf-8")
    lines = len(path.read_text(encoding="utf-8").splitlines())
    mods = {"lbreplay.lake.big": imports.Module("lbreplay.lake.big", path, lines)}
    assert imports.size_violations(mods) == [
        f"lbreplay.lake.big: {lines} lines (max 600)",
        "lbreplay.lake.big:long: 91 lines (max 80 unless it mirrors one Pulsar method)",
    ]


def test_a_circle_and_a_kernel_escape_are_reported(tmp_path: Path) -> None:
    """Tarjan finds the strongly connected component; the kernel rule names the offending import."""
    mods = {
        "lbreplay.replay.a": imports.Module("lbreplay.replay.a", tmp_path, 1, {"lbreplay.replay.b"}),
        "lbreplay.replay.b": imports.Module("lbreplay.replay.b", tmp_path, 1, {"lbreplay.replay.c"}),
        "lbreplay.replay.c": imports.Module("lbreplay.replay.c", tmp_path, 1, {"lbreplay.replay.a"}),
        "lbreplay.kernel.k": imports.Module("lbreplay.kernel.k", tmp_path, 1, {"lbreplay.replay.a"}, {"pyspark"}),
    }
    assert imports.import_cycles(mods) == [["lbreplay.replay.a", "lbreplay.replay.b", "lbreplay.replay.c"]]
    assert imports.kernel_violations(mods) == [
        "lbreplay.kernel.k: the kernel imports lbreplay.replay.a",
        "lbreplay.kernel.k: the kernel imports the third-party package pyspark",
    ]


def test_the_command_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "lbreplay.devtools.imports"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert not [ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL ")]
    assert "OK: kernel self-contained, no import circle, jobs and cli thin, sizes within limits" in proc.stdout
    assert proc.stdout.splitlines()[0].endswith("internal imports")
    strict = subprocess.run([sys.executable, "-m", "lbreplay.devtools.imports", "--strict"], capture_output=True,
                            text=True, timeout=120)
    assert strict.returncode == 0 and strict.stdout == proc.stdout
