"""``lbreplay collect``'s metadata-store recorder against a real ZooKeeper: every version of the load reports the
leader reads (``ModularLoadManagerImpl`` znodes under ``/loadbalance``), in the files ``ingest`` reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lbreplay.collect.layout import JsonLines, read_json_lines
from lbreplay.collect.metadata_store import (
    MetadataStoreRecorder,
    classify,
    is_load_report,
    output_path,
    zk_hosts,
)
from lbreplay.errors import UsageError
from lbreplay.lake.ingest import read_dumps
from tests.collect.admin_server import admin_server

REPO = Path(__file__).resolve().parents[2]
BROKER = "127.0.0.1:18081"
HEARTBEAT = f"pulsar/lbreplay-live/{BROKER}/0x00000000_0xffffffff"


def local_broker_data(last_update: int, cpu: float, bundles: dict[str, float]) -> bytes:
    """A LocalBrokerData as the broker writes it (the fields ingest reads)."""
    res = {k: {"usage": v, "limit": lim} for k, v, lim in (
        ("cpu", cpu, 50.0), ("memory", 100.0, 512.0), ("directMemory", 0.0, 256.0),
        ("bandwidthIn", 1.0, 1e5), ("bandwidthOut", 0.0, 1e5))}
    stats = {b: {"msgRateIn": r, "msgRateOut": 0.0, "msgThroughputIn": r * 512, "msgThroughputOut": 0.0,
                 "topics": 2, "consumerCount": 0, "producerCount": 2, "cacheSize": 0} for b, r in bundles.items()}
    return json.dumps({"webServiceUrl": f"http://{BROKER}", "lastUpdate": last_update, "lastStats": stats,
                       "loadReportType": "LocalBrokerData", **res}).encode()


def bundle_data(rate: float) -> bytes:
    tamd = {"maxSamples": 10, "numSamples": 1, "msgRateIn": rate, "msgRateOut": 0.0,
            "msgThroughputIn": rate * 512, "msgThroughputOut": 0.0}
    return json.dumps({"shortTermData": tamd, "longTermData": {**tamd, "maxSamples": 1000}, "topics": 2}).encode()


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "timed out"
        time.sleep(0.1)


def test_zk_hosts_and_classify() -> None:
    assert zk_hosts("zk:a:2181,b:2181/chroot") == "a:2181,b:2181/chroot"
    with pytest.raises(UsageError, match="only ZooKeeper"):
        zk_hosts("etcd:http://x:2379")
    assert classify(f"/loadbalance/brokers/{BROKER}") == ("brokers", BROKER)
    assert classify(f"/loadbalance/bundle-data/{HEARTBEAT}") == ("bundle-data", HEARTBEAT)
    assert classify("/loadbalance/bundle-data/lb/hot") is None  # a namespace level, not a bundle
    assert classify("/loadbalance/leader") is None
    assert is_load_report(local_broker_data(1, 1.0, {}))
    # ExtensibleLoadManagerImpl's BrokerLookupData at the same path (Pulsar 4.0.7, as recorded from a live broker)
    assert not is_load_report(b'{"webServiceUrl":"http://127.0.0.1:18181","pulsarServiceUrl":"pulsar://127.0.0.1:16751",'
                              b'"loadManagerClassName":"org.apache.pulsar.broker.loadbalance.extensions.'
                              b'ExtensibleLoadManagerImpl","startTimestamp":1795641667196,"brokerVersion":"4.0.7"}')
    p = output_path(Path("o"), "bundle-data", HEARTBEAT, 1795638120415, 3)
    assert p.as_posix() == "o/loadbalance/bundle-data/pulsar/lbreplay-live/127.0.0.1_18081/0x00000000_0xffffffff/1795638120415-v3.json"


def test_every_version_recorded_and_ingestible(kazoo, zookeeper: str, tmp_path: Path) -> None:
    path = f"/loadbalance/brokers/{BROKER}"
    kazoo.create(path, local_broker_data(1_000, 1.0, {"lb/hot/0x00000000_0x80000000": 10.0}), makepath=True,
                 ephemeral=True)
    kazoo.create(f"/loadbalance/bundle-data/{HEARTBEAT}", bundle_data(0.0), makepath=True)
    events = JsonLines(tmp_path / "collect" / "metadata-versions.jsonl")
    rec = MetadataStoreRecorder(zookeeper, tmp_path, events)
    rec.start()
    try:
        wait_for(lambda: rec.counts.versions["brokers"] == 1 and rec.counts.versions["bundle-data"] == 1)
        for i, cpu in enumerate((5.0, 9.0), start=1):  # two more versions, each read before the next
            kazoo.set(path, local_broker_data(1_000 + 60_000 * i, cpu, {"lb/hot/0x00000000_0x80000000": 10.0 * i}))
            wait_for(lambda i=i: rec.counts.versions["brokers"] == 1 + i)
        kazoo.create("/loadbalance/bundle-data/lb/hot/0x00000000_0x80000000", bundle_data(20.0), makepath=True)
        wait_for(lambda: rec.counts.versions["bundle-data"] == 2)  # a child created after the start
        kazoo.delete(path)  # the broker goes away: absent, not a crash
        wait_for(lambda: rec.counts.absent == 1)
    finally:
        rec.stop()
        events.close()
    files = sorted((tmp_path / "loadbalance" / "brokers" / "127.0.0.1_18081").glob("*.json"))
    assert [f.name.split("-v")[1] for f in files] == ["0.json", "1.json", "2.json"]
    assert json.loads(files[2].read_bytes())["cpu"]["usage"] == 9.0
    log = read_json_lines(tmp_path / "collect" / "metadata-versions.jsonl")
    versions = [r for r in log if r["event"] == "version" and r["path"] == path]
    assert [r["version"] for r in versions] == [0, 1, 2]
    assert all(r["file"].endswith(f"{r['mtime']:013d}-v{r['version']}.json") for r in versions)
    assert [r["broker"] for r in log if r["event"] == "absent"] == [BROKER]
    assert not list(tmp_path.rglob(".*.tmp"))  # atomic writes leave no temporary file
    dump = read_dumps(tmp_path, "c1")  # what `lbreplay ingest --source` reads
    assert [r["cpu_usage"] for r in dump.rows["broker_load"]] == [1.0, 5.0, 9.0]
    assert sorted(r["bundle"] for r in dump.rows["bundle_data"]) == sorted(
        ["lb/hot/0x00000000_0x80000000", HEARTBEAT])


def test_collect_stops_cleanly_on_sigterm(kazoo, zookeeper: str, tmp_path: Path) -> None:
    kazoo.create(f"/loadbalance/brokers/{BROKER}", local_broker_data(5_000, 2.0, {}), makepath=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib")}
    with admin_server({}) as admin:  # reachable, refuses every request (401)
        proc = subprocess.Popen([sys.executable, "-m", "lbreplay.cli", "collect", "--out", str(tmp_path / "out"),
                                 "--metadata-store", zookeeper, "--admin-url", admin, "--interval", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: list((tmp_path / "out" / "loadbalance" / "brokers").rglob("*.json")), timeout=60)
            wait_for(lambda: list((tmp_path / "out" / "collect" / "admin").glob("*.jsonl")), timeout=30)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    session = read_json_lines(tmp_path / "out" / "collect" / "session.jsonl")
    assert [s["event"] for s in session] == ["start", "stop"]
    assert session[1]["signal"] is True and session[1]["brokers_versions"] == 1
    assert session[1]["admin_answered"] == 0  # the refusing admin URL is recorded, not fatal: the store answered
    poll = read_json_lines(min((tmp_path / "out" / "collect" / "admin").glob("*.jsonl")))
    assert poll[0]["source"] == "load-report" and poll[0]["status"] == 401
    assert f"collect: absent from this poll: GET {admin}/admin/v2/broker-stats/load-report -> HTTP 401" in err
    assert "collected into" in out
