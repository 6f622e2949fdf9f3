"""Building (Maven) and running the Java oracle of ``tests/pulsar_oracle`` against one Pulsar jar."""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self

from lbreplay.errors import LbReplayError

REPO_ROOT = Path(__file__).resolve().parents[3]
ORACLE_DIR = REPO_ROOT / "tests" / "pulsar_oracle"


class OracleError(LbReplayError):
    """The oracle could not be built or answered with an error."""


# ------------------------------------------------------------------------------------------------------------
# Building and running the oracle
# ------------------------------------------------------------------------------------------------------------
def _java_home(major: int) -> str | None:
    """A JDK of at least ``major`` (JAVA_HOME, else the java on PATH, else the usual Debian locations)."""
    candidates = [os.environ.get("JAVA_HOME")] + sorted(str(p) for p in Path("/usr/lib/jvm").glob("*"))
    for home in candidates:
        if not home:
            continue
        java = Path(home) / "bin" / "java"
        if java.exists() and _java_major(str(java)) >= major:
            return home
    return None


def _java_major(java: str) -> int:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False).stderr
    except (OSError, subprocess.SubprocessError):
        return 0
    for token in out.split('"')[1:2]:
        head = token.split(".")[0]
        return int(head) if head.isdigit() else 0
    return 0


def build_oracle(version: str, java_major: int = 17, extensible: bool = True) -> tuple[str, dict[str, str]]:
    """Build the oracle against ``pulsar-broker:<version>`` if not built yet (cached under ``target/``);
    return (classpath, environment for ``java``). ``extensible=False`` leaves out ``Extensible*.java`` (lines
    before 3.0 have no complete extensible load manager)."""
    out = ORACLE_DIR / "target" / f"pulsar-{version}"
    classes, cp_file = out / "classes", out / "classpath.txt"
    env = dict(os.environ)
    home = _java_home(java_major)
    if home:
        env["JAVA_HOME"] = home
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"pulsar-{version}.lock", "w") as lock:  # one build per line at a time (several verifies)
        fcntl.flock(lock, fcntl.LOCK_EX)
        _build_if_stale(out, version, java_major, extensible, env)
    return f"{classes}{os.pathsep}{cp_file.read_text().strip()}", env


def _build_if_stale(out: Path, version: str, java_major: int, extensible: bool, env: dict[str, str]) -> None:
    """``mvn package`` into ``out`` unless its classes are newer than the oracle's sources."""
    classes, cp_file = out / "classes", out / "classpath.txt"
    src_mtime = max(p.stat().st_mtime for p in (ORACLE_DIR / "src").rglob("*") if p.is_file())
    stale = not cp_file.exists() or not (classes / "lbreplay" / "oracle" / "Oracle.class").exists() or (
        (classes / "lbreplay" / "oracle" / "Oracle.class").stat().st_mtime < src_mtime
    )
    if stale:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise OracleError("verify: Maven (mvn) is needed to build the Pulsar oracle; install it (apt-get install maven)")
        cmd = [mvn, "-B", "-q", "-f", str(ORACLE_DIR / "pom.xml"), f"-Dpulsar.version={version}",
               f"-Djava.release={java_major}", "package"]
        if not extensible:
            cmd.insert(-1, "-Doracle.excludes=lbreplay/oracle/Extensible*.java")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            tail = " ".join((proc.stdout + proc.stderr).split()[-60:])
            raise OracleError(f"verify: building the oracle for Pulsar {version} failed: {tail}")


class Oracle:
    """One JVM running ``lbreplay.oracle.Oracle``: one request line in, one answer line out."""

    def __init__(self, version: str, java_major: int = 17, extensible: bool = True) -> None:
        cp, env = build_oracle(version, java_major, extensible)
        java = str(Path(env["JAVA_HOME"]) / "bin" / "java") if env.get("JAVA_HOME") else "java"
        self.proc = subprocess.Popen(
            [java, "-Xss8m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, "lbreplay.oracle.Oracle"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )

    def _send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request, separators=(",", ":")) + "\n")
        self.proc.stdin.flush()

    def _receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise OracleError("verify: the oracle JVM exited")
        return json.loads(line)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self._send(request)
        return self._receive()

    def ask_many(self, requests: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The answers to ``requests`` in order, pipelined: a thread writes the requests while the caller consumes
        the answers (the JVM answers one request while the caller works on the previous answer)."""
        pending: queue.Queue[BaseException | None | bool] = queue.Queue()  # True per request sent, then None

        def write() -> None:
            try:
                for request in requests:
                    self._send(request)
                    pending.put(True)
                pending.put(None)
            except BaseException as exc:  # noqa: BLE001 -- handed to the reading thread, which raises it
                pending.put(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        while (item := pending.get()) is True:
            yield self._receive()
        writer.join()
        if isinstance(item, BaseException):
            raise item

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

