"""The lake's registry of tables (lbreplay.lake.registry): each table declared once, every consumer's selection taken
from it, every input validated or declared not, every table directory the code writes registered."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import lbreplay
from lbreplay.lake import dump_rows, dump_tables, dump_tree, registry, tables
from lbreplay.lake.expectations import SUITES, VALIDATED_TABLES
from lbreplay.lake.tables import INPUT, Table

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data" / "samples"

# What each consumer iterated before the registry (the lists it spelled out), in their order: no behaviour change.
VALIDATED_ORDER = ("broker_load", "bundle_load", "topic_load", "namespace_policy", "bundle_data", "broker_time_average",
                   "broker_load_data_ext", "top_bundles_load_data", "top_bundles_publication", "leader_election",
                   "shedding_run", "broker_departure", "leader_placement")
INGESTED_ORDER = ("broker_load", "bundle_load", "topic_load", "bundle_data", "broker_time_average",
                  "broker_load_data_ext", "top_bundles_load_data", "top_bundles_publication", "leader_election",
                  "shedding_run", "broker_departure", "leader_placement")
DESIGN_INPUTS = ("broker_load", "bundle_load", "topic_load", "namespace_policy")
OUTPUTS = ("runs", "ownership", "decisions", "broker_ticks", "run_metrics")


def _names(selection: Any) -> tuple[str, ...]:
    return tuple(t.name for t in (selection.values() if isinstance(selection, dict) else selection))


def test_each_table_is_registered_once_inputs_then_derived_then_outputs() -> None:
    names = _names(registry.REGISTRY)
    assert len(names) == len(set(names)) == 20
    assert registry.REGISTRY == (*registry.INPUTS, *registry.DERIVED_TABLES, *registry.OUTPUTS)
    assert _names(registry.DERIVED_TABLES) == ("quarantine", "validation_runs")
    assert _names(registry.OUTPUTS) == OUTPUTS
    assert all(registry.table_named(n) is t for n, t in zip(names, registry.REGISTRY))
    with pytest.raises(KeyError, match=r"table 'nope' is not in the lake's registry \(known: broker_load, "):
        registry.table_named("nope")


def test_consumers_iterate_the_registry_with_the_tables_they_listed_before() -> None:
    """validate, ingest, the views, table creation and the replay's pinned inputs: the same tables, same order."""
    from lbreplay.lake.ingest import INGEST_TABLES
    from lbreplay.lake.views import VIEW_TABLES

    assert _names(VALIDATED_TABLES) == _names(registry.VALIDATED) == VALIDATED_ORDER
    assert _names(INGEST_TABLES) == _names(registry.INGESTED) == INGESTED_ORDER
    assert set(VIEW_TABLES) == {"runs", "decisions", "bundle_load", "broker_ticks", "run_metrics"}
    assert _names(tables.INPUT_TABLES) == _names(registry.GENERATED) == DESIGN_INPUTS
    assert _names(tables.OUTPUT_TABLES) == OUTPUTS
    assert _names(tables.ALL_TABLES) == _names(registry.EAGER) == (*DESIGN_INPUTS, "quarantine", *OUTPUTS)
    assert _names(dump_tables.DUMP_TABLES) == INGESTED_ORDER[3:]
    assert set(_names(registry.REPLAYED)) == set(VALIDATED_ORDER) - {"broker_time_average"}
    assert {t.role for t in registry.VALIDATED + registry.INGESTED + registry.REPLAYED + registry.GENERATED} == {INPUT}


def test_every_input_has_its_suite_or_is_declared_not_validated() -> None:
    """An input says validated=True (then its suite is in lake.expectations, over its own columns and key) or
    validated=False; undeclared, or a validated non-input, is refused when the table is declared."""
    assert all(isinstance(t.validated, bool) for t in registry.INPUTS)
    assert set(SUITES) == {t.name for t in registry.VALIDATED}
    for table in registry.VALIDATED:
        rules = SUITES[table.name]
        columns = set(table.column_names)
        assert {c for r in rules for c in r.columns} <= columns, table.name
        assert {c for r in rules if r.name == "key_not_null" for c in r.columns} == set(table.key), table.name
        assert [r.columns for r in rules if r.name == "unique_key"] == [table.key], table.name
    with pytest.raises(ValueError, match="table new_input: an input table declares validated=True"):
        Table("new_input", (), ("cluster",), ("cluster",), "a new input")
    with pytest.raises(ValueError, match="table runs: only an input table is validated"):
        replace(tables.RUNS, validated=True)
    with pytest.raises(ValueError, match="table x: role 'other' is not one of input, derived, output"):
        Table("x", (), (), (), "", role="other")


def test_every_table_object_in_lbreplay_is_the_registered_one() -> None:
    """No module declares a Table of its own: every Table any lbreplay module holds (alone, or in a module-level
    tuple, list or dict) is the registry's entry of that name."""
    seen: dict[str, set[str]] = {}
    for info in pkgutil.walk_packages(lbreplay.__path__, "lbreplay."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else [value]
            for item in items:
                if isinstance(item, Table):
                    assert registry.BY_NAME.get(item.name) is item, f"{info.name}: table {item.name} not registered"
                    seen.setdefault(item.name, set()).add(info.name)
    assert set(seen) == set(registry.BY_NAME)


def _tables_with_rows(out: dump_rows.DumpRows) -> set[str]:
    return {name for name, rows in out.rows.items() if rows}


def _absent(root: Path) -> Path:
    """A collect record with one broker znode deleted (``absent``)."""
    (root / "collect").mkdir(parents=True, exist_ok=True)
    (root / "collect" / "metadata-versions.jsonl").write_text(
        '{"at": 1795639344717, "broker": "b:8080", "event": "absent", "path": "/loadbalance/brokers/b:8080"}\n')
    return root


T_TOPICS = 1795772492742  # real-extensible-transfer: a tick after its first topics polls listing topics


def test_each_dump_source_fills_exactly_the_tables_declaring_it(tmp_path: Path) -> None:
    """Every parser writes only to the tables whose ``dump_kinds`` name its source, and each source fills them all:
    the JSON kinds file by file over the samples, then collect's record, the leader log and the tombstones."""
    assert {k for t in registry.INGESTED for k in t.dump_kinds} == set(dump_tree.DUMP_SOURCES)
    filled: dict[str, set[str]] = {}
    for sample in ("modular-3brokers", "extensible-3brokers"):
        root = SAMPLES / sample
        for path in dump_tree.dump_files(root):
            kind = dump_tree.detect_kind(dump_tree.load_json(path, str(path)))
            assert kind is not None, path
            out = dump_rows.DumpRows()
            dump_rows.parse_file(path, root, "c", out)
            filled.setdefault(kind, set()).update(_tables_with_rows(out))
    real = SAMPLES / "real-extensible-transfer"
    for kind, read in (
        (dump_tree.METADATA_VERSIONS_KIND, lambda out: (dump_rows.leader_elections(real, "c", out),
                                                        dump_rows.broker_departures(_absent(tmp_path), "c", out))),
        (dump_tree.LEADER_LOG_KIND, lambda out: (dump_rows.shedding_run_rows(dump_rows.logged_runs(real), "c", out),
                                                 dump_rows.leader_placement_rows(dump_rows.leader_log_lines(
                                                     SAMPLES / "real-modular-round-robin-3.0"), "c", out))),
        (dump_tree.TOMBSTONE_KIND, lambda out: dump_rows.load_data_tombstones(real, "c", out)),
        (dump_tree.TOP_BUNDLES_TOMBSTONE_KIND, lambda out: dump_rows.top_bundles_tombstones(real, "c", out)),
        (dump_tree.TOPIC_STATS_KIND, lambda out: dump_rows.topic_stats_rows(real, "c", out, [dump_tree.tick_of(T_TOPICS)])),
    ):
        out = dump_rows.DumpRows()
        read(out)
        filled[kind] = _tables_with_rows(out)
    assert filled == {kind: set(_names(registry.ingested_from(kind))) for kind in dump_tree.DUMP_SOURCES}
    assert filled[dump_tree.LOCAL_BROKER_DATA] == {"broker_load", "bundle_load"}


def test_generate_writes_exactly_the_generated_tables() -> None:
    """The generator's writes (``out.write(tables.X, ...)`` in lake/generator.py) are the registry's generated."""
    import ast

    from lbreplay.lake import generator

    written = {
        getattr(tables, node.args[0].attr).name
        for node in ast.walk(ast.parse(Path(generator.__file__).read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write"
        and node.args and isinstance(node.args[0], ast.Attribute) and isinstance(node.args[0].value, ast.Name)
        and node.args[0].value.id == "tables"
    }
    assert written == {t.name for t in registry.GENERATED} == set(DESIGN_INPUTS)


def test_views_read_exactly_the_viewed_tables() -> None:
    from lbreplay.lake.views import VIEW_NAMES, view_sql

    read = {m for name in VIEW_NAMES for m in re.findall(r"\bdb\.(\w+)", view_sql(name, "db"))}
    assert read == {t.name for t in registry.VIEWED}


@pytest.mark.spark
def test_every_table_directory_written_is_registered(spark: Any, lake: str) -> None:
    """After a generated history is validated and replayed (the session's shared runs), a dump ingested and every
    lake table ensured, the lake's Delta table directories are exactly the registry's tables."""
    from lbreplay.lake.ingest import ingest
    from tests.report_runs import replayed_runs

    replayed_runs(spark, lake)
    ingest(spark, lake, SAMPLES / "extensible-3brokers", "registry_ext")
    tables.ensure_tables(spark, lake)
    written = {p.name for p in Path(lake).iterdir() if (p / "_delta_log").is_dir()}
    assert written == set(registry.BY_NAME)
