"""What a closed loop (what-if) needs of the lake, checked before and after it runs: never a silent empty what-if.

A closed loop replays the recorded bundle loads (``bundle_load``; spread over their ranges as their topics are where
``topic_load`` has rows: a split divides a bundle by its topics' hashes) under
its own ownership, starting from the recorded state (the engine's first tick follows the observed layout, and a
recording's bundles join as its brokers first report them: ``Ownership.adopt``), and models each broker's usage
from the traffic it holds (``load_model``, calibrated on ``broker_load``). Before it runs, it refuses (exit 3) a
stream without bundles, without a cpu reading to calibrate on, or whose calibration error reaches
``MAX_CALIBRATION_MAPE``; after, a run that carried no traffic at any tick while the recorded bundle loads have
some is a replay bug (exit 1), not a result. An extensible recording's closed loop publishes each broker's
recorded BrokerLoadData moved by the modelled change of its load, and its recorded top bundles list until a
decision moves one of its bundles (``ExtensibleLeader``)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from lbreplay.errors import InvalidInputError, LbReplayError
from lbreplay.replay.load_model import MAX_CALIBRATION_MAPE, MIN_MEASURED_CPU
from lbreplay.replay.stream_manifest import StreamManifest


def require_closed_loop_inputs(manifest: StreamManifest, cluster: str) -> None:
    """Refuse (``InvalidInputError``, exit 3, one line) a closed loop the stream cannot drive."""
    if not manifest.namespaces:
        raise InvalidInputError(f"table=bundle_load: no rows for cluster {cluster!r}: a closed loop replays the "
                                "recorded bundle loads (audit with --mode observed)")
    if manifest.calibration_mape is None:
        raise InvalidInputError(f"table=broker_load column=cpu_usage: no reading >= {MIN_MEASURED_CPU} % for cluster "
                                f"{cluster!r}: a closed loop's load model is calibrated on the brokers' usage")
    if manifest.calibration_mape >= MAX_CALIBRATION_MAPE:
        raise InvalidInputError(
            f"table=broker_load: the load model's cpu calibration error for cluster {cluster!r} is "
            f"{manifest.calibration_mape:.0%} (MAPE), at or above the bound {MAX_CALIBRATION_MAPE:.0%} "
            "(load_model.MAX_CALIBRATION_MAPE): a closed loop would replay usage the recording does not support "
            "(audit it with --mode observed)")


def ticks_payload(ticks: int, carried_traffic: bool) -> str:
    """A task's ``ticks`` row: the ticks it replayed and whether any carried traffic."""
    return json.dumps([ticks, carried_traffic])


def require_traffic(manifest: StreamManifest, cluster: str, closed_loops: set[str],
                    ticks_rows: Iterable[tuple[str, str]]) -> None:
    """After the tasks: a closed loop (run id in ``closed_loops``) whose ticks all carried zero traffic while the
    recorded bundle loads have traffic is a bug of the replay; refuse to write it (``LbReplayError``, exit 1)."""
    if not manifest.recorded_traffic:
        return
    carried: dict[str, bool] = {}
    for run_id, payload in ticks_rows:
        row = json.loads(payload)
        carried[run_id] = carried.get(run_id, False) or (len(row) > 1 and bool(row[1]))
    empty = sorted(r for r in closed_loops if r in carried and not carried[r])
    if empty:
        raise LbReplayError(f"run {empty[0]} (cluster {cluster!r}): the closed loop carried no traffic at any tick "
                            "while table=bundle_load has traffic; nothing written (a replay bug: please report it)")
