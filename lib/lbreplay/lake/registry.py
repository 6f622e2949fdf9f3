"""The lake's one registry of tables (DESIGN.md §4): every Delta table directory lbreplay writes under a lake.

Each entry is a :class:`~lbreplay.lake.tables.Table`, declared once where its schema is (:mod:`lbreplay.lake.tables`,
:mod:`lbreplay.lake.dump_tables`): its columns and types, key, partitioning, and its spec (role, validated, read by
the replay, the dump sources ``ingest`` fills it from, written by ``generate``, read by the SQL views, present in
every lake from the start). ``ingest``, ``validate``, the views and table creation iterate the selections below;
none of them lists a table name.

=========================  ==============================================================================
selection                  tables
=========================  ==============================================================================
:data:`REGISTRY`           all, inputs first, then the derived (validation) tables, then the outputs
:data:`INPUTS`             role input: read by ``validate`` and (when ``replayed``) the replay
:data:`VALIDATED`          inputs with an expectation suite (``lake.expectations.SUITES``), in this order
:data:`INGESTED`           inputs ``lbreplay ingest`` replaces per cluster, in this order
:data:`REPLAYED`           inputs the replay pins at a Delta version (``runs.input_versions``)
:data:`GENERATED`          inputs ``lbreplay generate`` writes
:data:`VIEWED`             tables the SQL views read (registered before the views)
:data:`EAGER`              tables every lake has from the start (``tables.ensure_tables``)
=========================  ==============================================================================
"""

from __future__ import annotations

from lbreplay.lake import dump_tables, tables
from lbreplay.lake.tables import DERIVED, INPUT, OUTPUT, ROLES, Table

#: Every table, inputs first, then derived, then outputs (declaration order within a role).
REGISTRY: tuple[Table, ...] = tuple(
    sorted((*tables.TABLES, *dump_tables.TABLES), key=lambda t: ROLES.index(t.role))
)
BY_NAME: dict[str, Table] = {t.name: t for t in REGISTRY}

INPUTS: tuple[Table, ...] = tuple(t for t in REGISTRY if t.role == INPUT)
DERIVED_TABLES: tuple[Table, ...] = tuple(t for t in REGISTRY if t.role == DERIVED)
OUTPUTS: tuple[Table, ...] = tuple(t for t in REGISTRY if t.role == OUTPUT)
VALIDATED: tuple[Table, ...] = tuple(t for t in INPUTS if t.validated)
INGESTED: tuple[Table, ...] = tuple(t for t in INPUTS if t.ingested)
REPLAYED: tuple[Table, ...] = tuple(t for t in INPUTS if t.replayed)
GENERATED: tuple[Table, ...] = tuple(t for t in INPUTS if t.generated)
VIEWED: tuple[Table, ...] = tuple(t for t in REGISTRY if t.viewed)
EAGER: tuple[Table, ...] = tuple(t for t in REGISTRY if t.eager)


def table_named(name: str) -> Table:
    """The registered table ``name``; a KeyError naming the registered tables otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"table {name!r} is not in the lake's registry (known: {', '.join(BY_NAME)})") from None


def ingested_from(kind: str) -> tuple[Table, ...]:
    """The tables ``ingest`` fills from dump source ``kind`` (``lake.dump_tree.DUMP_SOURCES``)."""
    return tuple(t for t in INGESTED if kind in t.dump_kinds)


def by_name(selection: tuple[Table, ...]) -> dict[str, Table]:
    """``selection`` as a name -> table dict (what ``tables.ensure_tables`` takes)."""
    return {t.name: t for t in selection}
