"""The recorder (``lbreplay.collect``) sits below ``lake``: it imports no layer above it, and the live audit's
comparison lives in ``lbreplay.live_audit`` (structure check ``lbreplay.devtools.imports``)."""

from __future__ import annotations

from pathlib import Path

from lbreplay.devtools import imports


def test_the_recorder_imports_nothing_above_it_and_lake_reads_it() -> None:
    modules = imports.load_modules()
    assert imports.recorder_violations(modules) == []
    assert "lbreplay.collect.leader_log" in modules["lbreplay.lake.dump_rows"].imports
    assert "lbreplay.live_audit.audit_check" in modules and "lbreplay.collect.audit_check" not in modules
    assert {"lbreplay.lake.ingest", "lbreplay.replay.spark_replay"} <= modules["lbreplay.live_audit.audit_check"].imports


def test_a_recorder_module_importing_lake_is_reported(tmp_path: Path) -> None:
    mods = {
        "lbreplay.collect.x": imports.Module("lbreplay.collect.x", tmp_path, 1, {"lbreplay.lake.tables", "lbreplay.errors"}),
        "lbreplay.collect": imports.Module("lbreplay.collect", tmp_path, 1, {"lbreplay.live_audit.comparison"}),
        "lbreplay.lake.y": imports.Module("lbreplay.lake.y", tmp_path, 1, {"lbreplay.replay.engine"}),
    }
    assert imports.recorder_violations(mods) == [
        "lbreplay.collect: the recorder imports lbreplay.live_audit.comparison",
        "lbreplay.collect.x: the recorder imports lbreplay.lake.tables",
    ]
