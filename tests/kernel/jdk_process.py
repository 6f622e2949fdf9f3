"""One JVM running a small Java program of ``tests/kernel/java/`` (compiled once per test module): a line in, a line
out. The property tests of ``java_hash_map`` and ``broker_candidate_cache`` ask the JDK's own maps through it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

JAVA_DIR = Path(__file__).parent / "java"
P = TypeVar("P", bound="JdkProcess")


def hex_key(key: str) -> str:
    """A key as hex UTF-16 (what the Java programs read: any string, unpaired surrogates included)."""
    return key.encode("utf-16-be", "surrogatepass").hex()


def unhex_key(h: str) -> str:
    return bytes.fromhex(h).decode("utf-16-be", "surrogatepass")


class JdkProcess:
    """``java <main>`` kept open: :meth:`ask` writes one line and reads the answer line."""

    def __init__(self, classes: Path, main: str) -> None:
        self.proc = subprocess.Popen(["java", "-Xshare:auto", "-cp", str(classes), main],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="ascii")

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().rstrip("\n")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def compiled(tmp_path_factory: pytest.TempPathFactory, main: str, kind: type[P]) -> Iterator[P]:
    """Compile ``java/<main>.java`` and keep one process of it open (for a module-scoped fixture); skipped without
    a JDK."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip(f"javac / java not on PATH: {main} (the JDK's own maps) cannot be run")
    classes = tmp_path_factory.mktemp(main)
    subprocess.run(["javac", "-d", str(classes), str(JAVA_DIR / f"{main}.java")], check=True)
    process = kind(classes, main)
    yield process
    process.close()
