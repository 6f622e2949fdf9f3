"""``collect --leader-log-dir``: the brokers' load-balancer lines gathered into ``leader-decisions.log`` as ``ingest``
and the live audit read them, for every shedding strategy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lbreplay.collect.leader_log import is_leader_log_line, log_time_ms, parse_leader_log, shedding_runs
from lbreplay.collect.leader_log_files import LEADER_LOG, LeaderLogGatherer, broker_of
from lbreplay.lake.dump_tree import dump_files
from tests.collect.admin_server import admin_server, pulsar_answers

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
T = "2026-11-27T01:31:46,223+0000"
IMPL = "org.apache.pulsar.broker.loadbalance.impl"
EXT = "org.apache.pulsar.broker.loadbalance.extensions"
# one line per strategy as Pulsar logs it (class, method: the message in findBundlesForUnloading unless named)
STRATEGY_LINES = [
    f"{T} [pulsar-load-manager-1-1] INFO  {IMPL}.ThresholdShedder - Attempting to shed load on 127.0.0.1:18081, which "
    "has max resource usage above avgUsage  and threshold 61.2% > 40.1% + 10.0% -- Offloading at least 0.5 MByte/s of "
    "traffic, left throughput 2.1 MByte/s",
    f"{T} [pulsar-load-manager-1-1] DEBUG {IMPL}.ThresholdShedder - [127.0.0.1:18082] broker is not overloaded, "
    "ignoring at this point (cpu: 10.00%, memory: 20.00%, directMemory: 0.00%, bandwidthIn: 1.00%, bandwidthOut: 1.00%)",
    f"{T} [pulsar-load-manager-1-1] INFO  {IMPL}.OverloadShedder - Attempting to shed load on 127.0.0.1:18081, which "
    "has resource usage 91.0% above threshold 85.0% -- Offloading at least 0.4 MByte/s of traffic (cpu: 91.00%)",
    f"{T} [pulsar-load-manager-1-1] WARN  {IMPL}.OverloadShedder - HIGH USAGE WARNING : Sole namespace bundle "
    "lb/hot/0x00000000_0xffffffff is overloading broker 127.0.0.1:18081. No Load Shedding will be done on this broker",
    f"{T} [pulsar-load-manager-1-1] INFO  {IMPL}.UniformLoadShedder - Found bundle to unload from 127.0.0.1:18081 "
    "with msgRate 1200.0",
    f"{T} [pulsar-load-manager-1-1] INFO  {IMPL}.AvgShedder - broker:127.0.0.1:18081, scores:72.0, "
    "throughput:2048.0, messageRate:100.0",
    f"{T} [pulsar-load-manager-1-1] INFO  {IMPL}.AvgShedder - brokerHitCountForHigh:{{}}, brokerHitCountForLow:{{}}",
    f"{T} [pulsar-load-manager-1-1] INFO  {EXT}.scheduler.TransferShedder - Decided to unload "
    "bundle:lb/hot/0x00000000_0x10000000, throughput:{10.0}",
    f"{T} [pulsar-modular-load-manager-30-1] INFO  {IMPL}.ModularLoadManagerImpl - [AvgShedder] Unloading bundle: "
    "lb/hot/0x00000000_0x10000000 from broker 127.0.0.1:18081 to dest broker 127.0.0.1:18082",
    f"{T} [pulsar-modular-load-manager-30-1] INFO  {IMPL}.ModularLoadManagerImpl - [UniformLoadShedder] Unloading "
    "bundle: lb/hot/0x10000000_0x20000000 from broker 127.0.0.1:18081",
    f"{T} [pulsar-modular-load-manager-30-1] INFO  {IMPL}.ModularLoadManagerImpl - Load-manager splitting bundle "
    "lb/hot/0x70000000_0x80000000 and unloading true",
    f"{T} [pulsar-modular-load-manager-30-1] ERROR {IMPL}.ModularLoadManagerImpl - Failed to split namespace bundle "
    "lb/hot/0x70000000_0x80000000",
    f"{T} [pulsar-load-manager-1-1] INFO  o.a.p.b.l.e.scheduler.UnloadScheduler - [TransferShedder] Unload decision "
    "result: []",
]
NOISE = [
    f"{T} [main] INFO  org.apache.pulsar.broker.PulsarService - messaging service is ready, configs=ServiceConfiguration("
    "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder)",
    "\tat org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl.checkNamespaceBundleSplit(Modular.java:1)",
    f"{T} [pulsar-io-3-1] INFO  org.apache.pulsar.broker.service.ServerCnx - New connection from /127.0.0.1:50000",
    f"{T} [pulsar-modular-load-manager-30-1] INFO  {IMPL}.ModularLoadManagerImpl - Writing local data to metadata store",
]


def test_every_strategys_lines_are_kept_and_nothing_else() -> None:
    assert [ln for ln in STRATEGY_LINES if not is_leader_log_line(ln)] == []
    assert [ln for ln in NOISE if is_leader_log_line(ln)] == []
    unloads = [(d.strategy, d.bundle, d.source, d.target) for d in parse_leader_log(STRATEGY_LINES, attempts=True)
               if d.action == "UNLOAD"]
    assert unloads == [("AvgShedder", "lb/hot/0x00000000_0x10000000", "127.0.0.1:18081", "127.0.0.1:18082"),
                       ("UniformLoadShedder", "lb/hot/0x10000000_0x20000000", "127.0.0.1:18081", None)]


def test_the_broker_is_named_by_the_file_or_its_directory(tmp_path: Path) -> None:
    assert broker_of(Path("logs/127.0.0.1_18081.log")) == "127.0.0.1:18081"
    assert broker_of(Path("logs/broker-1.example.com:8080.log")) == "broker-1.example.com:8080"
    assert broker_of(Path("logs/10.0.0.7_8080/pulsar-broker.log")) == "10.0.0.7:8080"
    assert broker_of(Path("logs/pulsar-broker.log")) is None


@pytest.mark.parametrize("sample", ["real-modular-run-clock", "real-extensible-transfer"])
def test_the_samples_leader_log_is_rebuilt_from_the_brokers_logs(tmp_path: Path, sample: str) -> None:
    """Each broker's lines of a recorded leader-decisions.log, written back into one log per broker between noise
    lines, come out as the same lines in time order: the same decisions and shedding runs for ingest."""
    original = (SAMPLES / sample / LEADER_LOG).read_text(encoding="utf-8").splitlines()
    logs = tmp_path / "logs"
    logs.mkdir()
    per_broker: dict[str, list[str]] = {}
    for line in original:
        broker, _, rest = line.partition(" ")
        per_broker.setdefault(broker, []).append(rest)
    for broker, lines in per_broker.items():
        mixed = [x for ln in lines for x in (ln, NOISE[len(ln) % len(NOISE)])]
        (logs / f"{broker.replace(':', '_')}.log").write_text("\n".join(mixed) + "\n", encoding="utf-8")
    out = tmp_path / "dump"
    gatherer = LeaderLogGatherer(logs, out)
    gatherer.finish()
    got = (out / LEADER_LOG).read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in original if is_leader_log_line(ln.partition(" ")[2])]
    assert Counter(got) == Counter(kept) and len(kept) >= 0.9 * len(original)
    times = [log_time_ms(ln) or 0 for ln in got]
    assert times == sorted(times)
    assert parse_leader_log(got, attempts=True) == parse_leader_log(original, attempts=True)
    assert shedding_runs(got) == shedding_runs(original)
    assert gatherer.counts() == {"leader_log_lines": len(kept)}


def test_growing_rotated_and_resumed_logs(tmp_path: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "dump"
    logs.mkdir()
    log = logs / "127.0.0.1_18081.log"
    a, b, c = STRATEGY_LINES[:3]
    log.write_text(a + "\n" + b[:40], encoding="utf-8")  # b is being written
    g = LeaderLogGatherer(logs, out)
    assert g.gather() == 1
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(b[40:] + "\n")
    assert g.gather() == 1 and g.gather() == 0
    again = LeaderLogGatherer(logs, out)  # a later session goes on where the offsets say
    assert again.gather() == 0
    log.rename(logs / "old.log.1")  # rotated: a new, shorter file under the name
    log.write_text(c + "\n", encoding="utf-8")
    assert again.gather() == 1
    assert (out / LEADER_LOG).read_text(encoding="utf-8").splitlines() == [f"127.0.0.1:18081 {x}" for x in (a, b, c)]
    # the offsets are collect's bookkeeping: `ingest --source` (dump_tree.dump_files) must not take them for a dump
    assert (out / "collect" / "leader-log-offsets.jsonl").is_file() and dump_files(out) == []


def test_collect_gathers_the_leader_log_while_it_records(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "127.0.0.1_18081.log").write_text("\n".join(STRATEGY_LINES[:2] + NOISE) + "\n", encoding="utf-8")
    (logs / "pulsar-broker.log").write_text(STRATEGY_LINES[4] + "\n", encoding="utf-8")
    env = {**os.environ, "COLUMNS": "200"}
    with admin_server(pulsar_answers("127.0.0.1:18081")) as url:
        proc = subprocess.run([sys.executable, "-m", "lbreplay.cli", "collect", "--out", str(tmp_path / "out"),
                               "--admin-url", url, "--duration", "2s", "--leader-log-dir", str(logs)],
                              capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    got = (tmp_path / "out" / LEADER_LOG).read_text(encoding="utf-8").splitlines()
    assert got == [f"127.0.0.1:18081 {STRATEGY_LINES[0]}", f"127.0.0.1:18081 {STRATEGY_LINES[1]}", STRATEGY_LINES[4]]
    assert ("collect: warning: leader log pulsar-broker.log: no host_port in its name or directory; its lines are "
            "kept without the broker's id") in proc.stderr
    assert "leader_log_lines=3" in proc.stdout
