"""``make lock`` / ``make dist``: lbreplay as a wheel and a packed Python environment for Spark executors.

* ``lock``: ``requirements-lock.txt`` -- the exact versions of lbreplay's runtime dependency closure (from the
  wheel's requirements, i.e. setup.cfg's ``install_requires``, walked through the installed distributions' metadata
  of the running environment). setup.cfg stays the source of the dependencies; the lock adds the transitive pins.
* ``dist``: ``dist/lbreplay-<version>-py3-none-any.whl`` (``pip wheel --no-deps .``) and
  ``dist/lbreplay-env.tar.gz``: a fresh virtual environment (no pip, no ``.pyc``) with the wheel and every locked
  package installed ``--no-deps``, except pyspark and py4j -- the executors import those from the cluster's own
  Spark (``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip beside it, which Spark puts on the Python workers'
  ``PYTHONPATH``), so the archive never carries a second, possibly different, pyspark. lbreplay's ``conf/`` goes in
  as ``conf/`` (``spark.executorEnv.LBREPLAY_CONF_DIR=./environment/conf``).

Ship it with ``--archives dist/lbreplay-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python``
(``spark.archives`` in a conf file). Like any virtual environment (and venv-pack's archives), the interpreter is not
in the archive: ``bin/python`` links to the Python 3.11 this was built with, which must exist at the same path on
every worker (the path is printed). The archive is reproducible: sorted members, fixed times and owners.

    python scripts/spark-cluster/pack_env.py lock
    python scripts/spark-cluster/pack_env.py dist [--dist DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from email.parser import Parser
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements-lock.txt"
ARCHIVE = "lbreplay-env.tar.gz"
FROM_SPARK = {"pyspark", "py4j"}  # provided by the cluster's Spark distribution (python/lib/*.zip)
CONF_SUFFIXES = (".yaml", ".yml", ".conf", ".json", ".properties")


def _applies(req: Requirement, extras: set[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras})


def closure(requirements: list[str]) -> dict[str, str]:
    """Canonical name -> installed version of ``requirements`` and everything they need (markers evaluated for
    this interpreter); a requirement that is not installed here stops with one line."""
    pins: dict[str, str] = {}
    todo = [(Requirement(r), set[str]()) for r in requirements]
    while todo:
        req, parent_extras = todo.pop()
        if not _applies(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        if name in pins:
            continue
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            raise SystemExit(f"{req.name}: required by lbreplay's closure but not installed in {sys.prefix}") from None
        pins[name] = dist.version
        todo += [(Requirement(r), set(req.extras)) for r in dist.requires or []]
    return dict(sorted(pins.items()))


def wheel_requirements(wheel: Path) -> list[str]:
    """``Requires-Dist`` of the wheel (setup.cfg's install_requires), extras' requirements left out."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(meta).decode())
    return [r for r in msg.get_all("Requires-Dist") or [] if "extra ==" not in r]


def build_wheel(dist_dir: Path) -> Path:
    """``pip wheel --no-deps .`` into ``dist_dir``; the previous lbreplay wheels there are replaced."""
    dist_dir.mkdir(parents=True, exist_ok=True)
    for old in dist_dir.glob("lbreplay-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", tmp, str(REPO)],
                       check=True)
        (built,) = Path(tmp).glob("lbreplay-*.whl")
        return Path(shutil.move(str(built), dist_dir / built.name))


def write_lock(requirements: list[str], lock: Path = LOCK) -> dict[str, str]:
    pins = closure(requirements)
    lines = ["# lbreplay's runtime dependency closure, exact versions (make lock; setup.cfg's install_requires is the",
             "# source). make dist installs these --no-deps into the executors' environment, pyspark and py4j left out",
             "# (the cluster's Spark provides them).", *(f"{n}=={v}" for n, v in pins.items())]
    tmp = lock.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, lock)
    return pins


def read_lock(lock: Path = LOCK) -> dict[str, str]:
    if not lock.is_file():
        raise SystemExit(f"{lock.name}: missing; run make lock")
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def check_lock(requirements: list[str], pins: dict[str, str]) -> None:
    """Every direct requirement of the wheel is locked at a version it allows (else: one line, run make lock)."""
    for text in requirements:
        req = Requirement(text)
        if not _applies(req, set()):
            continue
        locked = pins.get(canonicalize_name(req.name))
        if locked is None or not req.specifier.contains(locked, prereleases=True):
            raise SystemExit(f"{LOCK.name}: {req.name} is {locked or 'not locked'} but setup.cfg asks {req}; run make lock")


def _tar_filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if "__pycache__" in info.name.split("/"):
        return None
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def write_archive(root: Path, dest: Path, level: int = 1) -> None:
    """``root``'s tree as a reproducible tar.gz (sorted names, fixed times/owners), written atomically."""
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix()
            if "__pycache__" not in rel.split("/"):
                tar.add(path, arcname=rel, recursive=False, filter=_tar_filter)
    os.replace(tmp, dest)


def build_env(wheel: Path, pins: dict[str, str], env: Path) -> None:
    """A fresh venv (no pip) with the wheel and the locked packages, pyspark/py4j excluded, and lbreplay's conf/."""
    python = Path(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(env)], check=True)
    reqs = [f"{n}=={v}" for n, v in pins.items() if n not in FROM_SPARK and n != "lbreplay"]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--quiet",
                    "--no-deps", "--no-compile", "--only-binary", ":all:", "--disable-pip-version-check",
                    *reqs, str(wheel)], check=True)
    for src in sorted((REPO / "conf").rglob("*")):
        if src.is_file() and src.suffix in CONF_SUFFIXES:
            dest = env / "conf" / src.relative_to(REPO / "conf")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    for script in (env / "bin").iterdir():  # console scripts carry the build path in their #! line: not shipped
        if not script.name.startswith("python"):
            script.unlink()


def smoke_test(env: Path) -> None:
    """The packed modules import with the env's Python and pyspark from Spark's zips (as on an executor)."""
    import pyspark

    lib = Path(pyspark.__file__).resolve().parent / "python" / "lib"
    path = os.pathsep.join(str(p) for p in sorted(lib.glob("*.zip")))
    code = "import lbreplay.replay.replay_task, numpy, pandas, pyarrow, yaml, pyspark, sys; print(sys.prefix)"
    run_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    out = subprocess.run([str(env / "bin" / "python"), "-c", code], env={**run_env, "PYTHONPATH": path},
                         capture_output=True, text=True, cwd=env)
    if out.returncode != 0:
        raise SystemExit(f"{env.name}: the packed environment does not import lbreplay: {out.stderr.strip().splitlines()[-1]}")


def dist(dist_dir: Path) -> dict[str, object]:
    t0 = time.time()
    wheel = build_wheel(dist_dir)
    t_wheel = time.time()
    requirements = wheel_requirements(wheel)
    pins = read_lock()
    check_lock(requirements, pins)
    with tempfile.TemporaryDirectory(prefix="lbreplay-env-") as tmp:
        env = Path(tmp) / "env"
        build_env(wheel, pins, env)
        t_env = time.time()
        smoke_test(env)
        write_archive(env, dist_dir / ARCHIVE)
    return {"step": "dist", "wheel": str(wheel), "archive": str(dist_dir / ARCHIVE),
            "archive_mb": round((dist_dir / ARCHIVE).stat().st_size / 2 ** 20, 1),
            "packages": len([n for n in pins if n not in FROM_SPARK]) + 1, "excluded": sorted(FROM_SPARK),
            "python": str(Path(getattr(sys, "_base_executable", sys.executable))),
            "seconds": {"wheel": round(t_wheel - t0, 1), "env": round(t_env - t_wheel, 1),
                        "pack": round(time.time() - t_env, 1)},
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("lock", "dist"))
    ap.add_argument("--dist", default=str(REPO / "dist"), help="output directory of dist (default: dist/)")
    args = ap.parse_args()
    if args.command == "lock":
        with tempfile.TemporaryDirectory() as tmp:
            pins = write_lock(wheel_requirements(build_wheel(Path(tmp))))
        print(json.dumps({"step": "lock", "file": LOCK.name, "packages": len(pins)}))
    else:
        print(json.dumps(dist(Path(args.dist).resolve())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
