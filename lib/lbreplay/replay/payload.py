"""The rows a replay task yields: ``(run_id, kind, payload)``, the payload a JSON array of an output table's
columns in the table's order (``lake.tables``: the schema is declared there once), timestamps as epoch ms."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from lbreplay.lake import tables
from lbreplay.replay.records import BrokerTick, Decision, OwnershipInterval

TASK_ROW_SCHEMA = "run_id STRING, kind STRING, payload STRING"
NOT_IN_PAYLOAD = ("run_id", "cluster")  # added on the driver
TIMESTAMP = "TIMESTAMP"


def payload_fields(table: tables.Table) -> list[tuple[str, str]]:
    """(name, Spark SQL type) of the payload of ``table``'s rows: its columns but run id and cluster, each
    timestamp ``<name>`` as ``<name>_ms`` BIGINT."""
    return [(f"{c.name}_ms", "BIGINT") if c.type == TIMESTAMP else (c.name, c.type)
            for c in table.columns if c.name not in NOT_IN_PAYLOAD]


DECISION_FIELDS = [name for name, _ in payload_fields(tables.DECISIONS)]
OWNERSHIP_FIELDS = [name for name, _ in payload_fields(tables.OWNERSHIP)]


def finite(v: float) -> float | None:
    """A JSON number (NaN and infinities become null)."""
    v = float(v)
    return v if np.isfinite(v) else None


def decision_payload(d: Decision) -> str:
    row = [getattr(d, name) for name in DECISION_FIELDS]
    row[DECISION_FIELDS.index("details")] = {k: finite(v) for k, v in d.details.items()}
    return json.dumps(row)


def ownership_payload(iv: OwnershipInterval) -> str:
    return json.dumps([getattr(iv, name) for name in OWNERSHIP_FIELDS])


def broker_tick_payloads(bt: BrokerTick, broker_ids: list[str]) -> list[str]:
    """One payload per alive broker, in the ``broker_ticks`` column order."""
    return [json.dumps([
        bt.tick, bt.ts_ms, broker_ids[i], *bt.pct[i].tolist(), float(bt.max_usage[i]),
        float(bt.weighted_max_usage[i]), finite(bt.score[i]), float(bt.msg_rate[i]), float(bt.msg_throughput[i]),
        int(bt.num_bundles[i]), int(bt.num_topics[i]), True]) for i in np.flatnonzero(bt.alive)]


def metric_payload(name: str, value: Any) -> str:
    return json.dumps([name, finite(value)])
