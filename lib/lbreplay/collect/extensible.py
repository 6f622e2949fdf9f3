"""The extensible load manager's state (``ExtensibleLoadManagerImpl``), read from its system topics.

``BrokerLoadData`` and ``TopBundlesLoadData`` are table views on non-persistent topics (keyed by broker id), the
service-unit states a table view on a persistent topic (keyed by bundle). A reader on each writes every message
it receives: ``extensible/broker-load-data/<host_port>/<publish ms>.json``,
``extensible/top-bundles-load-data/<host_port>/<publish ms>.json`` (both read by ``ingest``), an empty
``<publish ms>.tombstone`` for a tombstone (the broker removed its entry: it cleared its load data when a bundle
left or reached it, ``BrokerLoadDataReporter.handleEvent``) and one line per state change in
``collect/extensible/service-unit-state.jsonl``. Non-persistent topics keep no history: the
recording starts when ``collect`` starts.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from lbreplay.collect.auth import ClientAuth
from lbreplay.collect.layout import JsonLines, atomic_write, safe_part

BROKER_LOAD_DATA_TOPIC = "non-persistent://pulsar/system/loadbalancer-broker-load-data"
TOP_BUNDLES_TOPIC = "non-persistent://pulsar/system/loadbalancer-top-bundles-load-data"
SERVICE_UNIT_STATE_TOPIC = "persistent://pulsar/system/loadbalancer-service-unit-state"


class ExtensibleRecorder:
    """Readers on the three system topics (``pulsar-client``), each in its own thread until :meth:`stop`."""

    def __init__(self, service_url: str, out: Path, log: JsonLines, auth: ClientAuth) -> None:
        import pulsar

        self.out = out
        self.log = log
        self.client = pulsar.Client(service_url, operation_timeout_seconds=30,
                                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **auth.pulsar_client_kwargs())
        self.units = JsonLines(out / "collect" / "extensible" / "service-unit-state.jsonl")
        self.counts = {"broker-load-data": 0, "top-bundles-load-data": 0, "service-unit-state": 0}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for topic, kind in ((BROKER_LOAD_DATA_TOPIC, "broker-load-data"), (TOP_BUNDLES_TOPIC, "top-bundles-load-data"),
                            (SERVICE_UNIT_STATE_TOPIC, "service-unit-state")):
            t = threading.Thread(target=self._read, args=(topic, kind), name=f"lbreplay-collect-{kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def _read(self, topic: str, kind: str) -> None:
        import pulsar

        try:
            reader = self.client.create_reader(topic, pulsar.MessageId.earliest)
        except Exception as exc:  # noqa: BLE001 -- a missing topic (modular cluster) is logged, not fatal
            self.log.write({"event": "error", "topic": topic, "error": f"{type(exc).__name__}: {exc}"})
            return
        while not self._stop.is_set():
            try:
                msg = reader.read_next(timeout_millis=1000)
            except pulsar.Timeout:
                continue
            except Exception as exc:  # noqa: BLE001
                self.log.write({"event": "error", "topic": topic, "error": f"{type(exc).__name__}: {exc}"})
                self._stop.wait(5)
                continue
            self._write(kind, msg.partition_key(), msg.publish_timestamp(), msg.data())
        reader.close()

    def _write(self, kind: str, key: str, publish_ms: int, data: bytes) -> None:
        if kind == "service-unit-state":
            try:
                value: Any = json.loads(data.decode("utf-8")) if data else None
            except (UnicodeDecodeError, json.JSONDecodeError):
                value = {"bytes": len(data)}
            self.units.write({"service_unit": key, "publish_ms": publish_ms, "value": value})
        else:  # an empty value is the broker's tombstone (BrokerLoadDataReporter / TopBundleLoadDataReporter)
            path = self.out / "extensible" / kind / safe_part(key) / f"{publish_ms:013d}.{'json' if data else 'tombstone'}"
            if not path.exists():
                atomic_write(path, data)
        self.counts[kind] += 1

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.units.close()
        self.client.close()
