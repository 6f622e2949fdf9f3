"""``make test-cluster``: a real multi-node Spark run on this machine.

* a Spark standalone master and two workers, started from the installed pyspark's own launch classes
  (``org.apache.spark.deploy.master.Master``, ``org.apache.spark.deploy.worker.Worker`` through ``bin/spark-class``),
  each its own JVM bound to 127.0.0.1 with its own cores and memory; PIDs recorded in ``<work>/pids`` and every
  process stopped by PID at the end (also on failure);
* the jobs submitted with ``spark-submit`` as docs/user-guide.md's "Running on a cluster" says: Delta through ``--packages``
  (resolved from Maven Central); lbreplay, its pinned dependencies and ``conf/`` in the packed environment of
  ``make dist`` (``--archives dist/lbreplay-env.tar.gz#environment``, ``spark.pyspark.python=./environment/bin/python``,
  ``LBREPLAY_CONF_DIR=./environment/conf`` on the executors; pyspark from the workers' own Spark); the driver (client
  mode) runs this interpreter; the lake on the local filesystem the workers share; neither the worker JVMs nor the
  executors see this environment (no ``PYSPARK_PYTHON``, no ``PYTHONPATH``);
* ``probe_env.py`` first: the driver's session passes the cluster Spark version check (``lbreplay.cluster_check``)
  and one task per executor reports its ``sys.executable`` and module files, all inside the unpacked archive;
* ``generate`` (heterogeneous, size S) -> ``validate`` -> a 4-run ``sweep`` (conf/grids/cluster-smoke.yaml) on the
  cluster, each executor with one core, so the runs spread over both executors;
* ``compare.py`` (spark-submitted with ``--master local[2]``) runs the same sweep embedded and checks the decision
  hashes are equal run by run and that the cluster's runs ran on two executors (from the sweep's event log).

Prints JSON lines (per run: executor id, decision hash; then the summary with the wall times and load averages).

    python scripts/spark-cluster/test_cluster.py [--work DIR] [--keep] [--env-archive dist/lbreplay-env.tar.gz]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
SCENARIO, SIZE, CLUSTER, SEED = "heterogeneous", "S", "c1", 7
GRID = "conf/grids/cluster-smoke.yaml"
WORKERS = 2
WORKER_CORES, WORKER_MEMORY, EXECUTOR_MEMORY = 1, "1536m", "1g"


def emit(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def delta_package() -> str:
    from importlib.metadata import version

    import pyspark

    return f"io.delta:delta-spark_{'.'.join(pyspark.__version__.split('.')[:2])}_2.13:{version('delta-spark')}"


class Cluster:
    """Master + workers as child JVMs; their PIDs are written to ``<work>/pids/<name>.pid``."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work, self.env = work, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (work / "pids").mkdir(parents=True, exist_ok=True)
        (work / "logs").mkdir(parents=True, exist_ok=True)
        self.master_url = ""

    def _launch(self, name: str, cls: str, args: list[str]) -> Path:
        log = self.work / "logs" / f"{name}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        # spark-class execs the JVM, so this PID is the JVM's
        proc = subprocess.Popen(cmd, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[name] = proc
        (self.work / "pids" / f"{name}.pid").write_text(f"{proc.pid}\n")
        return log

    @staticmethod
    def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if log.is_file() and text in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                raise SystemExit(f"{log.name}: process exited ({proc.returncode}):\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        raise SystemExit(f"{log.name}: no '{text}' after {timeout:.0f}s")

    def start(self) -> None:
        port, ui = free_port(), free_port()
        self.master_url = f"spark://{HOST}:{port}"
        log = self._launch("master", "org.apache.spark.deploy.master.Master",
                           ["--host", HOST, "--port", str(port), "--webui-port", str(ui)])
        self._wait_for(log, "I have been elected leader", self.procs["master"])
        for i in range(WORKERS):
            name = f"worker-{i + 1}"
            wdir = self.work / name
            wdir.mkdir(exist_ok=True)
            log = self._launch(name, "org.apache.spark.deploy.worker.Worker",
                               ["--host", HOST, "--port", str(free_port()), "--webui-port", str(free_port()),
                                "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--work-dir", str(wdir),
                                self.master_url])
            self._wait_for(log, "Successfully registered with master", self.procs[name])

    def stop(self) -> None:
        """SIGTERM each recorded PID (workers first), SIGKILL what is still alive after 20 s."""
        for name in sorted(self.procs, key=lambda n: n == "master"):
            proc = self.procs[name]
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
            (self.work / "pids" / f"{name}.pid").unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="work directory (default: a new temporary one, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (lake, logs, event logs)")
    ap.add_argument("--env-archive", default=str(REPO / "dist" / "lbreplay-env.tar.gz"),
                    help="the executors' packed environment (make dist)")
    args = ap.parse_args()
    archive = Path(args.env_archive).resolve()
    if not archive.is_file():
        raise SystemExit(f"{archive}: no packed environment; run make dist")
    started = time.time()
    work = Path(args.work or tempfile.mkdtemp(prefix="lbreplay-cluster-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    lake, events = work / "lake", work / "events"
    events.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_GATEWAY_PORT", "PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV", "LBREPLAY_CONF_DIR")}
    env.update({
        "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work),
    })
    # the driver (client mode) runs this interpreter with the checkout's conf/; the workers get neither
    driver_env = {**env, "PYSPARK_DRIVER_PYTHON": sys.executable, "LBREPLAY_CONF_DIR": str(REPO / "conf")}
    ivy = Path.home() / ".cache" / "lbreplay" / "ivy-submit"
    common = [
        "--packages", delta_package(),
        "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
        "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "--conf", f"spark.jars.ivy={ivy}",
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--conf", f"spark.driver.host={HOST}", "--conf", f"spark.driver.bindAddress={HOST}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--driver-memory", "1g",
    ]
    cluster = Cluster(work, env)
    times: dict[str, float] = {}
    app_id = ""

    def submit(step: str, master_args: list[str], script: str, *flags: str) -> None:
        t0 = time.time()
        cmd = [str(spark_home() / "bin" / "spark-submit"), *master_args, *common, script, *flags]
        log = work / "logs" / f"{step}.log"
        with log.open("wb") as fh:
            out = subprocess.run(cmd, check=False, env=driver_env, cwd=REPO, stdout=subprocess.PIPE, stderr=fh)
        times[step] = round(time.time() - t0, 1)
        for line in out.stdout.decode(errors="replace").splitlines():
            if step == "probe_env" and line.startswith("{"):
                print(line, flush=True)
        if out.returncode != 0:
            raise SystemExit(f"{step} failed ({out.returncode}); last lines of {log}:\n"
                             f"{out.stdout.decode(errors='replace')[-2000:]}{log.read_text(errors='replace')[-4000:]}")
        emit(step=step, seconds=times[step], load_average=[round(x, 2) for x in os.getloadavg()])

    rc = 1
    try:
        t0 = time.time()
        cluster.start()
        times["cluster_start"] = round(time.time() - t0, 1)
        emit(step="cluster_start", master=cluster.master_url, workers=WORKERS, worker_cores=WORKER_CORES,
             pids={n: p.pid for n, p in cluster.procs.items()}, seconds=times["cluster_start"])
        # the packed environment (lbreplay, its pinned dependencies, conf/) unpacked in each executor's directory
        on_cluster = ["--master", cluster.master_url, "--archives", f"{archive}#environment",
                      "--conf", "spark.pyspark.python=./environment/bin/python",
                      "--conf", "spark.executorEnv.LBREPLAY_CONF_DIR=./environment/conf",
                      "--conf", f"spark.executor.cores={WORKER_CORES}", "--conf", f"spark.executor.memory={EXECUTOR_MEMORY}",
                      "--conf", f"spark.cores.max={WORKERS * WORKER_CORES}",
                      "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                      "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s"]
        submit("probe_env", on_cluster, "scripts/spark-cluster/probe_env.py", "--lake", str(lake),
               "--executors", str(WORKERS))
        submit("generate", on_cluster, "jobs/generate.py", "--scenario", SCENARIO, "--size", SIZE,
               "--cluster", CLUSTER, "--seed", str(SEED), "--lake", str(lake), "--quiet")
        submit("validate", on_cluster, "jobs/validate.py", "--cluster", CLUSTER, "--lake", str(lake))
        before = set(os.listdir(events))
        submit("sweep", on_cluster + ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
                              "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false"],
               "jobs/sweep.py", "--cluster", CLUSTER, "--grid", GRID, "--run-id-prefix", "cluster", "--lake", str(lake),
               "--quiet")
        new = sorted(set(os.listdir(events)) - before)
        if len(new) != 1:
            raise SystemExit(f"expected one new event log, found {new}")
        app_id = new[0].split(".")[0]
        t0 = time.time()
        # local[2]: the Python workers run in the driver's working directory, so they read the checkout's conf/
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]",
               "--conf", f"spark.executorEnv.LBREPLAY_CONF_DIR={REPO / 'conf'}", *common,
               "scripts/spark-cluster/compare.py", "--lake", str(lake), "--cluster", CLUSTER, "--grid", GRID,
               "--cluster-prefix", "cluster", "--local-prefix", "local2", "--event-dir", str(events),
               "--app-id", app_id]
        with (work / "logs" / "compare.log").open("wb") as fh:
            rc = subprocess.run(cmd, check=False, env=driver_env, cwd=REPO, stderr=fh).returncode
        times["local_sweep_and_compare"] = round(time.time() - t0, 1)
        if rc != 0:
            print((work / "logs" / "compare.log").read_text(errors="replace")[-3000:], file=sys.stderr)
    finally:
        cluster.stop()
        total = round(time.time() - started, 1)
        emit(step="test-cluster", ok=rc == 0, total_seconds=total, seconds=times, app_id=app_id,
             load_average=[round(x, 2) for x in os.getloadavg()], work=None if not args.keep else str(work))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
