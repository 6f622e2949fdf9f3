"""The replay's Spark task: the stateful tick loop of each run spec it receives (``mapInPandas``), one run per
task, yielding the rows of the output tables (:mod:`lbreplay.replay.payload`). Never one Spark job per tick."""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pandas as pd

from lbreplay.kernel.policies import NamespacePolicies
from lbreplay.replay.engine import Replay
from lbreplay.replay.metrics import RunMetrics
from lbreplay.replay.payload import broker_tick_payloads, decision_payload, metric_payload, ownership_payload
from lbreplay.replay.recorded_start import ticks_payload
from lbreplay.replay.records import RunSpec, StaticInputs
from lbreplay.replay.stream_manifest import StreamManifest
from lbreplay.replay.tick_stream import stored_bundle_data, ticks_from_stream

PROGRESS_EVERY_TICKS = 25
ROWS_PER_BATCH = 20_000
TaskRow = tuple[str, str, str]  # (run_id, kind, payload)


def write_progress(directory: str | None, key: str, done: int) -> None:
    """Tasks report ticks replayed through a small file per run slice (local lakes only)."""
    if not directory:
        return
    tmp = os.path.join(directory, f".{key}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(done))
    os.replace(tmp, os.path.join(directory, key))


def namespace_policies(policies_json: dict[str, Any] | None) -> NamespacePolicies | None:
    """The ``NamespacePolicies`` of ``preparation.namespace_policies_json``'s form."""
    if not policies_json:
        return None
    return NamespacePolicies.from_json(
        policies_json["isolation"] or None,
        None,
        {ns: {"policies": {"namespaceAntiAffinityGroup": g}} for ns, g in policies_json["anti_affinity"].items()},
        shedding_excluded_namespaces=policies_json["excluded"],
    )


def replay_run(spec: RunSpec, static: StaticInputs, manifest: StreamManifest,
               progress_dir: str | None) -> Iterator[list[TaskRow]]:
    """One run (or audit slice) over the stream: its output rows, in batches."""
    replay = Replay(spec, static)
    metrics = RunMetrics(replay.conf["loadBalancerSheddingGracePeriodMinutes"])
    ids = static.broker_ids
    rows: list[TaskRow] = []
    ticks = 0
    carried = False  # any counted tick with traffic (a closed loop that carries none is refused: recorded_start)
    # a slice starts its warm-up ``warmup`` ticks early; the first, a window's lead-in (negative ticks; a closed loop
    # replays it as the audit, engine.Replay._warm_up)
    first = spec.tick_start - spec.warmup if spec.tick_start > 0 else None
    progress_key = f"{spec.run_id}-{spec.tick_start}"
    hold_ms = (int(replay.conf["loadBalancerReportUpdateMaxIntervalMinutes"]) + 1) * 60_000
    for obs in ticks_from_stream(manifest, hold_ms):
        if first is not None and obs.tick < first:
            continue
        if spec.tick_end is not None and obs.tick >= spec.tick_end:
            break
        res = replay.step(obs)
        if obs.tick < spec.tick_start:
            metrics.add(res, ids, {}, counting=False)  # warm-up: the state spanning ticks, nothing counted
            continue  # warm-up: rebuild the strategies' state, emit nothing
        ticks += 1
        carried = carried or bool(res.broker_tick.msg_rate.any() or res.broker_tick.msg_throughput.any())
        if ticks % PROGRESS_EVERY_TICKS == 0:
            write_progress(progress_dir, progress_key, ticks)
        throughput = {}
        if res.decisions:
            layout = replay.layout
            values = replay.bundle_values(obs, layout)
            throughput = {n: float(v[0] + v[1]) for n, v in zip(layout.names, values)}
        metrics.add(res, ids, throughput)
        rows += [(spec.run_id, "broker_ticks", p) for p in broker_tick_payloads(res.broker_tick, ids)]
        rows += [(spec.run_id, "decisions", decision_payload(d)) for d in res.decisions]
        if spec.mode != "observed":
            rows += [(spec.run_id, "ownership", ownership_payload(iv)) for iv in res.closed]
        if len(rows) >= ROWS_PER_BATCH:
            yield rows
            rows = []
    if spec.mode != "observed":
        rows += [(spec.run_id, "ownership", ownership_payload(iv)) for iv in replay.finish()]
    rows += [(spec.run_id, "run_metrics", metric_payload(name, value))
             for name, value in metrics.rows(run_end=spec.tick_end is None)]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # this worker's peak RSS
    rows.append((spec.run_id, "run_metrics", metric_payload("task_peak_rss_mb", peak_mb)))
    rows.append((spec.run_id, "ticks", ticks_payload(ticks, carried)))
    write_progress(progress_dir, progress_key, ticks)
    yield rows


def run_partition(manifest: StreamManifest, policies_json: dict[str, Any] | None,
                  progress_dir: str | None = None) -> Callable[[Iterable[pd.DataFrame]], Iterable[pd.DataFrame]]:
    """The ``mapInPandas`` function: replays each run spec it receives; yields (run_id, kind, payload JSON)."""

    def replay_specs(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        static = StaticInputs(manifest.broker_ids, manifest.namespaces, manifest.calibration(),
                              namespace_policies(policies_json), stored_bundle_data(manifest))
        for pdf in batches:
            for spec_json in pdf["spec"]:
                for rows in replay_run(RunSpec(**json.loads(spec_json)), static, manifest, progress_dir):
                    yield pd.DataFrame(rows, columns=["run_id", "kind", "payload"])

    return replay_specs
