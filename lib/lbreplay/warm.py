"""First Spark start: resolve and cache Delta's jars, check a Delta round trip, and dump the driver JVM's
class-data-sharing archive (``spark.class_archive``) from one short run of what the commands do. Idempotent."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# a small cluster for the archive's run: every command's Spark path (generate, validate, ingest, replay)
TRAINING_SCENARIO = {"brokers": 3, "namespaces": 1, "bundles_per_namespace": 4, "topics": 40, "ticks": 8,
                     "events": [{"at_tick": 4, "leave": 1}]}


def train(archive: Path) -> None:
    """In this process: a session whose JVM writes ``archive`` at its exit, running generate, validate, ingest of
    the modular sample, and an audit and a what-if replay on a temporary lake; then the JVM is stopped and
    awaited."""
    from pyspark import SparkContext

    from lbreplay.lake.generator import generate
    from lbreplay.lake.ingest import ingest
    from lbreplay.lake.validation import validate
    from lbreplay.paths import DATA_DIR
    from lbreplay.replay.run_config import resolve_run_config
    from lbreplay.replay.spark_replay import execute
    from lbreplay.spark import driver_java_options, get_spark

    options = driver_java_options(f"-XX:ArchiveClassesAtExit={archive}")
    with tempfile.TemporaryDirectory(prefix="lbreplay-warm-") as tmp:
        lake = f"{tmp}/lake"
        spark = get_spark(lake, master="local[2]", conf={"spark.driver.extraJavaOptions": options})
        generate(spark, lake, TRAINING_SCENARIO, "warm")
        sample = DATA_DIR / "samples" / "modular-3brokers"
        if sample.is_dir():
            ingest(spark, lake, sample, "warm-dump")
        validate(spark, lake)
        what_if = resolve_run_config("threshold-lltmr")
        audit = resolve_run_config("threshold-lltmr", sets=["replay.mode=observed"])
        execute(spark, lake, "warm", [what_if, audit], run_ids=["warm-1", "warm-2"], quiet=True)
        gateway = SparkContext._gateway
        spark.stop()
        proc = getattr(gateway, "proc", None)
        if proc is not None:  # the gateway JVM exits when its stdin closes, writing the archive first
            proc.stdin.close()
            proc.wait(timeout=600)


def remove_stale_archives(archive: Path) -> list[str]:
    """Remove the archives ``archive`` replaces: the same install's for jars that are gone, and those named before
    archives carried their jars' stamp (``driver-<install>.jsa``). Returns the names removed."""
    install = archive.name.rsplit("-", 1)[0]
    stale = [a for a in archive.parent.glob("driver-*.jsa")
             if a != archive and (a.name.startswith(f"{install}-") or a.stem.count("-") == 1)]
    for a in stale:
        a.unlink(missing_ok=True)
    return sorted(a.name for a in stale)


def dump_class_archive() -> str:
    """The archive for this java/pyspark/Delta and its jars, dumped by a child process unless present (written under
    a temporary name, then renamed: a half-written archive is never used); the same install's archives for other
    jars are removed then (each is ~200 MiB)."""
    from lbreplay.spark import class_archive

    archive = class_archive()
    if archive.is_file():
        return f"class archive present ({archive.name})"
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "lbreplay.warm", "--train", str(tmp)], capture_output=True, text=True)
    if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"class archive not dumped (commands start without it): {tail}"
    tmp.replace(archive)
    remove_stale_archives(archive)
    return f"class archive dumped ({archive.stat().st_size >> 20} MiB, {time.time() - start:.0f}s)"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--train":
        train(Path(sys.argv[2]))
        return
    start = time.time()
    from lbreplay.spark import get_spark

    with tempfile.TemporaryDirectory(prefix="lbreplay-warm-") as tmp:
        spark = get_spark(f"{tmp}/lake", master="local[1]")
        spark.range(3).write.format("delta").save(f"{tmp}/lake/_warm")
        n = spark.read.format("delta").load(f"{tmp}/lake/_warm").count()
        spark.stop()
    print(f"spark + delta ready ({n} rows round-tripped, {time.time() - start:.1f}s); {dump_class_archive()}")


if __name__ == "__main__":
    main()
