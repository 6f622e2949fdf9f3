"""The driver JVM's class-data-sharing archive (JDK AppCDS): ``lbreplay.spark.class_archive`` names it per java,
pyspark and Delta, ``lbreplay.warm`` dumps it (``make warm``), and every local session's driver JVM maps it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from lbreplay.spark import class_archive, class_path_stamp
from lbreplay.warm import remove_stale_archives
from tests.hostile.harness import env

PROBE = """
import json, sys
from pyspark.sql import SparkSession
from lbreplay.spark import class_archive, configure_lbreplay
b = configure_lbreplay(SparkSession.builder, sys.argv[1], master="local[1]")
print(json.dumps({"archive": str(class_archive()), "options": b._options.get("spark.driver.extraJavaOptions", "")}))
"""


def _probe(cache: Path, **extra: str) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(cache / "lake")], capture_output=True, text=True,
                         env={**env(), "LBREPLAY_CACHE_DIR": str(cache), **extra}, timeout=120, check=True).stdout
    return json.loads(out)


def test_sessions_map_the_archive_once_it_exists(tmp_path: Path) -> None:
    cache = tmp_path / "a cache"
    before = _probe(cache)
    archive = Path(before["archive"])
    assert archive.parent == cache / "jvm" and archive.name.startswith("driver-") and archive.suffix == ".jsa"
    assert "SharedArchiveFile" not in before["options"]
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    after = _probe(cache)["options"]
    # one option per archive path, quoted (the path has a space), and the JVM quiet if it cannot use it
    assert f'"-XX:SharedArchiveFile={archive}"' in after and "-Xlog:cds*=off" in after
    assert "-Dlog4j2.configurationFile=" in after
    assert "-XX:+UseParallelGC" in after


def test_a_collector_chosen_in_the_environment_is_kept(tmp_path: Path) -> None:
    """The JVM refuses two collectors: one chosen through JAVA_TOOL_OPTIONS leaves the default out."""
    assert "-XX:+UseParallelGC" not in _probe(tmp_path, JAVA_TOOL_OPTIONS="-XX:+UseSerialGC")["options"]
    assert "-XX:+UseParallelGC" in _probe(tmp_path, JAVA_TOOL_OPTIONS="-Xss4m")["options"]


def test_quick_jit_is_c1_only_unless_the_environment_chooses_a_jit(monkeypatch) -> None:
    """A short replay's driver JVM compiles with C1 only; a JIT chosen in the JVM's environment options wins (the
    last -XX:TieredStopAtLevel would silently override it)."""
    from lbreplay.spark import QUICK_JIT, driver_java_options

    for var in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        monkeypatch.delenv(var, raising=False)
    assert QUICK_JIT == "-XX:TieredStopAtLevel=1"
    assert QUICK_JIT in driver_java_options(quick_jit=True).split()
    assert QUICK_JIT not in driver_java_options().split()
    for chosen in ("-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation", "-XX:+TieredCompilation"):
        monkeypatch.setenv("JDK_JAVA_OPTIONS", chosen)
        assert "TieredStopAtLevel" not in driver_java_options(quick_jit=True)
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "-Xss4m")
    assert QUICK_JIT in driver_java_options(quick_jit=True).split()


def test_another_java_gets_another_archive(tmp_path: Path) -> None:
    ours = _probe(tmp_path)["archive"]
    other = _probe(tmp_path, JAVA_HOME=str(tmp_path / "another-jdk"))["archive"]
    assert ours != other


SESSION = """
import sys
from lbreplay.spark import class_archive, driver_java_options, get_spark
a = class_archive()
assert a.is_file(), f"no class archive at {a}: run make warm"
spark = get_spark(sys.argv[1], master="local[1]", conf={"spark.driver.extraJavaOptions": driver_java_options(
    f"-XX:SharedArchiveFile={a}", "-Xshare:on", quick_jit=sys.argv[2] == "quick")})
beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print("jit:" + ",".join(str(x) for x in args if "Tiered" in str(x)))
print(",".join(sorted(b.getName() for b in beans)))
print(spark.range(5).count())
spark.stop()
"""


@pytest.mark.parametrize("jit", ["tiered", "quick"])
def test_the_warm_archive_maps_into_a_session_jvm(tmp_path: Path, jit: str) -> None:
    """``-Xshare:on`` makes the JVM refuse to start unless it maps the archive: the one ``make warm`` dumped fits
    the JVM a session launches (same java, same class path, the throughput collector), with the tiered JIT or C1
    only (a small closed loop's driver: ``spark_replay.quick_jit``)."""
    done = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / "lake"), jit], capture_output=True,
                          text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-3:] == ["jit:-XX:TieredStopAtLevel=1" if jit == "quick" else "jit:", "PS MarkSweep,PS Scavenge", "5"]


def test_the_archive_follows_the_jars_it_was_dumped_with(tmp_path: Path) -> None:
    """A re-created virtualenv has the same jar paths with new times, and the JVM refuses an archive dumped with
    other jar times: the archive's name carries the jars' stamp, so such a venv gets (and dumps) its own."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    (jars / "notes.txt").write_text("not on the class path")
    first = class_path_stamp(jars)
    os.utime(jars / "notes.txt", ns=(1, 1))
    assert class_path_stamp(jars) == first
    os.utime(jars / "a.jar", ns=(10**18, 10**18))
    assert class_path_stamp(jars) != first
    (jars / "b.jar").write_bytes(b"b")
    assert len({first, class_path_stamp(jars)}) == 2
    assert class_archive(tmp_path).stem.endswith(class_path_stamp(Path(pyspark.__file__).parent / "jars"))


def test_a_new_archive_replaces_its_installs_older_ones(tmp_path: Path) -> None:
    names = ["driver-aaaa-000000000001.jsa", "driver-aaaa-000000000002.jsa", "driver-bbbb-000000000001.jsa",
             "driver-0123456789abcdef.jsa", "driver-aaaa-000000000003.jsa.99.tmp"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    removed = remove_stale_archives(tmp_path / "driver-aaaa-000000000002.jsa")
    # the same install's archive for other jars and an archive of the old naming go; another install's stays
    assert removed == ["driver-0123456789abcdef.jsa", "driver-aaaa-000000000001.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(names) - set(removed))
