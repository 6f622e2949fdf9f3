"""A real ZooKeeper (from the Pulsar jars Maven resolves: scripts/pulsar/jars.sh) for the collector's tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pulsar_jars() -> Path:
    """build/pulsar/lib (resolved once by Maven from Central / ~/.m2); skips without Maven and Java."""
    if not (shutil.which("java") and (shutil.which("mvn") or (REPO / "build/pulsar/lib/.stamp").exists())):
        pytest.skip("needs java and mvn to resolve Pulsar's jars (scripts/pulsar/jars.sh)")
    out = subprocess.run(["bash", str(REPO / "scripts/pulsar/jars.sh")], capture_output=True, text=True, timeout=900,
                         check=False)
    if out.returncode != 0:
        pytest.skip(f"scripts/pulsar/jars.sh failed: {out.stderr[-500:]}")
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def zookeeper(pulsar_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone ZooKeeper server (``ZooKeeperServerMain``) on 127.0.0.1; yields ``zk:127.0.0.1:<port>``."""
    port = _free_port()
    data = tmp_path_factory.mktemp("zk")
    cfg = data / "zoo.cfg"
    cfg.write_text(f"tickTime=2000\ndataDir={data}/data\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                   "admin.enableServer=false\n4lw.commands.whitelist=ruok\n")
    log = open(data / "zk.out", "w")  # noqa: SIM115 -- the server's output for the whole session
    proc = subprocess.Popen(["java", "-Xmx128m", "-cp", f"{pulsar_jars}/*", "-Dzookeeper.admin.enableServer=false",
                             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"ZooKeeper did not start: {(data / 'zk.out').read_text()[-1000:]}")
            time.sleep(0.3)
        yield f"zk:127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture()
def kazoo(zookeeper: str) -> Iterator[object]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper[3:])
    client.start(timeout=30)
    yield client
    client.delete("/loadbalance", recursive=True) if client.exists("/loadbalance") else None
    client.stop()
    client.close()
