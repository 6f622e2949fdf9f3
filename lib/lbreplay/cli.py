"""The ``lbreplay`` command line (DESIGN.md §3). Thin: every command delegates to a module.

Heavy imports (pyspark, great_expectations) happen inside the commands, so ``decide`` starts fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from lbreplay.errors import EXIT_FAILURE, EXIT_USAGE, LbReplayError, one_line_reason
from lbreplay.paths import DEFAULT_LAKE

# rich_markup_mode=None: help texts are printed as written (Pulsar spellings such as zk:host:2181[/chroot] are not Rich markup)
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Replay and what-if analysis of Pulsar load balancing.")

LakeOpt = typer.Option(DEFAULT_LAKE, "--lake", help="Lake location (directory or storage URI).")
MasterOpt = typer.Option(None, "--master", help="Spark master (default local[*]; spark-submit's wins).")
QuietOpt = typer.Option(False, "--quiet", help="No progress output.")
_TS = "ISO-8601 UTC timestamp or date, e.g. 2023-08-02 or 2023-08-02T00:00:00Z"
FromOpt = typer.Option(None, "--from", help=f"Replay only ticks at or after this time ({_TS}).")
ToOpt = typer.Option(None, "--to", help=f"Replay only ticks before this time ({_TS}).")
AllowUnknownKeysOpt = typer.Option(
    False, "--allow-unknown-keys", help="A broker.conf key that looks like a typo of a Pulsar key: warn, do not refuse.")


@app.command()
def generate(
    scenario: str = typer.Option(..., "--scenario", help="Scenario name under conf/scenarios/ or a YAML file."),
    cluster: str = typer.Option(..., "--cluster", help="Cluster name written into every row."),
    seed: int = typer.Option(42, "--seed", help="Random seed; same seed -> identical tables."),
    size: Optional[str] = typer.Option(None, "--size", help="Override the scenario size: S or M."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Write a deterministic synthetic cluster history into the input tables."""
    from lbreplay.lake.generator import generate_command

    generate_command(scenario=scenario, cluster=cluster, seed=seed, size=size, lake=lake, master=master, quiet=quiet)


@app.command()
def ingest(
    source: Path = typer.Option(..., "--source", help="Directory of Pulsar load-report JSON dumps."),
    cluster: str = typer.Option(..., "--cluster"),
    since: Optional[str] = typer.Option(
        None, "--since", help=f"Only snapshots at or after this time; replaces only the window's rows ({_TS})."),
    until: Optional[str] = typer.Option(None, "--until", help=f"Only snapshots before this time ({_TS})."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Load real Pulsar dumps (LocalBrokerData, BundleData, TimeAverageBrokerData, BrokerLoadData, TopBundlesLoadData)."""
    from lbreplay.lake.ingest import ingest_command

    ingest_command(source=source, cluster=cluster, lake=lake, master=master, since=since, until=until, quiet=quiet)


@app.command()
def collect(
    out: Optional[Path] = typer.Option(
        None, "--out", help="Directory to record into (the layout `ingest --source` reads); required unless --check."),
    admin_url: list[str] = typer.Option([], "--admin-url", help="A broker's admin URL, e.g. http://broker-1:8080 (repeat)."),
    metadata_store: Optional[str] = typer.Option(
        None, "--metadata-store", help="Watch the load reports here: zk:host:2181[,host:2181][/chroot]."),
    service_url: Optional[str] = typer.Option(
        None, "--service-url", help="pulsar://host:6650: also read the extensible load manager's system topics."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Pulsar cluster name (default: the only one)."),
    interval: float = typer.Option(60.0, "--interval", help="Seconds between admin API polls."),
    duration: Optional[str] = typer.Option(None, "--duration", help="Stop after this long (e.g. 15m); default: until SIGTERM."),
    auth_plugin: Optional[str] = typer.Option(None, "--auth-plugin", help="AuthenticationToken or AuthenticationTls class."),
    auth_params: Optional[str] = typer.Option(
        None, "--auth-params", help="token:<jwt> | file:///path/token | tlsCertFile:<p>,tlsKeyFile:<p> (never logged)."),
    tls_trust_cert_path: Optional[str] = typer.Option(None, "--tls-trust-cert-path", help="CA bundle for https/pulsar+ssl."),
    tls_allow_insecure: bool = typer.Option(False, "--tls-allow-insecure", help="Do not verify server certificates."),
    leader_log_dir: Optional[Path] = typer.Option(
        None, "--leader-log-dir",
        help="The brokers' log files (one per broker, named host_port.log): their load-balancer lines go into "
             "<out>/leader-decisions.log."),
    check: bool = typer.Option(
        False, "--check", help="Only connect and list what would be recorded and what is missing; exit 0 or 3."),
    quiet: bool = QuietOpt,
) -> None:
    """Record a live cluster's load-balancing state (every load-report version) for `ingest`."""
    from lbreplay.collect.recorder import collect_command

    collect_command(admin_urls=admin_url, metadata_store=metadata_store, service_url=service_url,
                    out=str(out) if out else None,
                    cluster=cluster, interval=interval, duration=duration, auth_plugin=auth_plugin,
                    auth_params=auth_params, tls_trust_cert_path=tls_trust_cert_path,
                    tls_allow_insecure=tls_allow_insecure, quiet=quiet, check=check,
                    leader_log_dir=str(leader_log_dir) if leader_log_dir else None)


@app.command()
def validate(
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only this cluster (default: all)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Run the Great Expectations suites on the input tables; exit 3 on failure."""
    from lbreplay.lake.validation import validate_command
    from lbreplay.spark import existing_lake

    with existing_lake(cluster):
        validate_command(cluster=cluster, lake=lake, master=master, quiet=quiet)


@app.command()
def sql(
    query: Optional[str] = typer.Argument(
        None, help="Spark SQL, statements separated by ';'; tables live in the `lbreplay` database. "
                   "Without it: a shell reading ';'-terminated statements from stdin (.quit leaves)."),
    format: str = typer.Option("table", "--format", help="table | csv | json (one object per line)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Run Spark SQL against the registered tables (in a terminal on the lake's warm Spark; LBREPLAY_WARM=0|1)."""
    from lbreplay.lake.sql import sql_command

    sql_command(query=query, fmt=format, lake=lake, master=master)


@app.command()
def server(
    action: str = typer.Argument(..., help="status | stop"),
    lake: str = LakeOpt,
) -> None:
    """Show or stop the lake's warm Spark server (started by the first warm command; stops after LBREPLAY_WARM_IDLE s)."""
    from lbreplay.warm_server.client import server_command

    server_command(action=action, lake=lake)


@app.command()
def decide(
    request: str = typer.Option(..., "--request", help="Request JSON file, or - for standard input."),
    seed: int = typer.Option(0, "--seed", help="Seed for Pulsar's random choices among equally good brokers."),
) -> None:
    """One leader tick on one snapshot (no Spark): shed, split, assign, lookup."""
    from lbreplay.decide import decide_command

    decide_command(request=request, seed=seed)


@app.command()
def verify(
    pulsar_version: Optional[str] = typer.Option(
        None, "--pulsar-version", help="Pulsar line (e.g. 4.0) or release (4.0.7); default: the default pulsarVersion."
    ),
    cases: int = typer.Option(200, "--cases", help="Random cases per strategy."),
    seed: int = typer.Option(0, "--seed", help="Seed of the case generator."),
) -> None:
    """Differential check of the kernel against that Pulsar version's real classes (Maven); agreement per strategy."""
    from lbreplay.kernel.config import PulsarConfig
    from lbreplay.verify import verify_command

    version = pulsar_version or str(PulsarConfig.resolve({})["pulsarVersion"])
    verify_command(version=version, count=cases, seed=seed)


@app.command()
def replay(
    cluster: str = typer.Option(..., "--cluster"),
    config: Optional[str] = typer.Option(
        None, "--config", help="YAML with pulsar:/replay: maps (or a preset name under conf/strategies/)."),
    broker_conf: Optional[str] = typer.Option(None, "--broker-conf", help="A real broker.conf (properties)."),
    set_: list[str] = typer.Option([], "--set", help="Override one key: key=value (replay.<opt>=v for replay options)."),
    mode: Optional[str] = typer.Option(None, "--mode", help="closed-loop (what-if) or observed (audit)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Run id (default: derived from inputs+config+seed)."),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed of Pulsar's random choices among equally good brokers (default replay.seed, 0)."),
    seeds: Optional[str] = typer.Option(
        None, "--seeds", help="Run once per seed (0-4 or 0,3,7) in one Spark job; with --run-id R the runs are "
                              "R-s<seed>. `prediction` takes them as PRED run1+run2+... (the seeds' median and range)."),
    allow_unknown_keys: bool = AllowUnknownKeysOpt,
    from_: Optional[str] = FromOpt,
    to: Optional[str] = ToOpt,
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """One replay run (or one per seed with --seeds); prints the run id(s)."""
    from lbreplay.lake.locks import run_id_lock
    from lbreplay.replay.spark_replay import parse_seeds, replay_command, seeded_run_ids
    from lbreplay.spark import existing_lake, lake_path

    ids = seeded_run_ids(run_id, parse_seeds(seeds)) if seeds is not None else ([run_id] if run_id else [])
    with existing_lake(cluster), run_id_lock(lake_path(lake), ids):
        replay_command(cluster, config, broker_conf, set_, mode, run_id, seed, lake, master, quiet, window=(from_, to),
                       allow_unknown_keys=allow_unknown_keys, seeds=seeds)


@app.command()
def sweep(
    cluster: str = typer.Option(..., "--cluster"),
    grid: str = typer.Option(..., "--grid", help="YAML with pulsar:/replay: base and a grid: of keys to lists."),
    broker_conf: Optional[str] = typer.Option(
        None, "--broker-conf", help="A real broker.conf (properties): the base the grid overrides."),
    set_: list[str] = typer.Option([], "--set", help="Override one key in every run: key=value (wins over the grid)."),
    allow_unknown_keys: bool = AllowUnknownKeysOpt,
    seed: Optional[int] = typer.Option(None, "--seed"),
    run_id_prefix: Optional[str] = typer.Option(
        None, "--run-id-prefix",
        help="Name the runs PREFIX-01, PREFIX-02 ... in grid order (default: ids derived from inputs+config+seed)."),
    from_: Optional[str] = FromOpt,
    to: Optional[str] = ToOpt,
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Many replay runs (a grid of configs) in parallel Spark tasks; prints the run ids."""
    from lbreplay.lake.locks import run_id_lock
    from lbreplay.replay.run_config import expand_grid
    from lbreplay.replay.spark_replay import sweep_command
    from lbreplay.spark import existing_lake, lake_path

    ids = [f"{run_id_prefix}-{i:02d}" for i in range(1, len(expand_grid(grid)) + 1)] if run_id_prefix else []
    with existing_lake(cluster), run_id_lock(lake_path(lake), ids):
        sweep_command(cluster, grid, seed, lake, master, quiet, run_id_prefix=run_id_prefix, window=(from_, to),
                      broker_conf=broker_conf, sets=set_, allow_unknown_keys=allow_unknown_keys)


BaselineRunOpt = typer.Option(
    None, "--baseline", help="Baseline run id, or a broker.conf (the run replaying it); default: the observed run.")


@app.command()
def report(
    runs: str = typer.Option(..., "--runs", help="Comma-separated run ids to compare."),
    out: str = typer.Option(..., "--out", help="Output HTML file (self-contained, opens offline)."),
    baseline: Optional[str] = BaselineRunOpt,
    objective: str = typer.Option("balance", "--objective", help="Objective under conf/objectives/ or a YAML file."),
    prediction: Optional[str] = typer.Option(
        None, "--prediction",
        help="PRED,B,B2,A[,A2]: add the section predicted B vs real B vs noise (see `prediction`; PRED may be "
             "run1+run2+...)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Compare runs: the verdict, KPI table, decision timeline and plots in one self-contained HTML file."""
    from lbreplay.report.html_report import report_command
    from lbreplay.report.prediction import split_seeds
    from lbreplay.spark import existing_lake

    ids = [r.strip() for r in runs.split(",") if r.strip()]
    checked = [r.strip() for r in prediction.split(",") if r.strip()] if prediction else None
    with existing_lake(runs=ids + split_seeds(checked or [])):
        report_command(runs=ids, out=out, lake=lake, master=master, baseline=baseline, objective=objective,
                       prediction=checked)


LimitOpt = typer.Option([], "--limit", help="KPI<=number (repeatable), e.g. unloads_per_hour<=30, max_spread<=20.")
ObjectiveOpt = typer.Option("balance", "--objective", help="Objective under conf/objectives/ or a YAML file.")


@app.command()
def compare(
    runs: str = typer.Option(..., "--runs", help="Comma-separated run ids to compare."),
    baseline: Optional[str] = BaselineRunOpt,
    objective: str = ObjectiveOpt,
    limit: list[str] = LimitOpt,
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """The verdict as text: runs ranked against the baseline, flags, the recommended broker.conf diff."""
    from lbreplay.report.compare import compare_command
    from lbreplay.spark import existing_lake

    ids = [r.strip() for r in runs.split(",") if r.strip()]
    with existing_lake(runs=ids):
        compare_command(ids, baseline, objective, limit, lake, master)


@app.command()
def prediction(
    runs: str = typer.Option(..., "--runs", help="PRED,B,B2,A[,A2]: the closed loop of A's recording under B's "
                             "broker.conf (or its seeds' runs joined by +, from replay --seeds: their median and "
                             "range), then the audits of B, of B run again, of A (and of A run again)."),
    save_noise: Optional[str] = typer.Option(
        None, "--save-noise", help="Write B vs B2 per KPI (a noise band YAML; with seeds, half their range too)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Predicted B vs real B, the noise band (B vs B2) and real A; exit 1 when a target is missed."""
    from lbreplay.report.prediction import PredictionMissed, prediction_command, split_seeds
    from lbreplay.spark import existing_lake

    ids = [r.strip() for r in runs.split(",") if r.strip()]
    with existing_lake(runs=split_seeds(ids)):
        if not prediction_command(ids, lake, master, save_noise):
            raise PredictionMissed("prediction: targets missed (see the lines above)")


@app.command()
def gate(
    cluster: str = typer.Option(..., "--cluster"),
    baseline: str = typer.Option(..., "--baseline", help="The broker.conf in use."),
    candidate: str = typer.Option(..., "--candidate", help="The broker.conf to check."),
    limit: list[str] = LimitOpt,
    objective: str = ObjectiveOpt,
    from_: Optional[str] = FromOpt,
    to: Optional[str] = ToOpt,
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Replay the history under both broker.confs; exit 0 within the limits, 1 when the candidate breaks one."""
    from lbreplay.report.gate import gate_command
    from lbreplay.spark import existing_lake

    with existing_lake(cluster):
        gate_command(cluster, baseline, candidate, limit, lake, master, objective, (from_, to), quiet)


@app.command()
def demo(
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Generate a sample history, validate it, replay it under several strategies, print where results are."""
    from lbreplay.demo import demo_command

    demo_command(lake=lake, master=master, quiet=quiet)


VERBOSE_FLAGS = ("--verbose",)


@app.callback()
def _root(
    verbose: bool = typer.Option(
        False, "--verbose", help="On an unexpected error print the full traceback (also accepted after the command)."),
) -> None:
    """Replay and what-if analysis of Pulsar load balancing."""


def crash_log_dir() -> Path:
    """Where unexpected errors' tracebacks go (``$LBREPLAY_CACHE_DIR/logs``, default ``~/.cache/lbreplay/logs``)."""
    from lbreplay.paths import CACHE_DIR

    return CACHE_DIR / "logs"


def _write_crash_log(argv: list[str], text: str) -> Path | None:
    """Write ``text`` (the traceback) to a fresh file under :func:`crash_log_dir`; None if that fails too."""
    import datetime as dt
    import os

    try:
        folder = crash_log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = folder / f"lbreplay-{stamp}-{os.getpid()}.log"
        path.write_text("lbreplay " + " ".join(argv) + "\n\n" + text, encoding="utf-8")
        return path
    except OSError:
        return None


def main() -> None:
    """Console entry point: maps lbreplay errors to the contract's exit codes with a one-line reason.

    An unexpected exception exits 1 with one line naming it and the file holding its traceback; ``--verbose``
    (anywhere on the command line) prints the traceback as well."""
    import traceback

    argv = sys.argv[1:]
    from lbreplay.warm_server.client import forward

    forwarded = forward(argv)  # a lake-reading command run by the lake's warm server (lbreplay.warm_server)
    if forwarded is not None:
        sys.exit(forwarded)
    verbose = any(a in VERBOSE_FLAGS for a in argv)
    args = [a for a in argv if a not in VERBOSE_FLAGS]
    previous = os.environ.get("LBREPLAY_VERBOSE")
    if verbose:
        os.environ["LBREPLAY_VERBOSE"] = "1"  # Spark's own logging too (lbreplay.spark)
    try:
        app(args=args, prog_name="lbreplay", standalone_mode=False)
    except LbReplayError as exc:
        print(f"lbreplay: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("lbreplay: aborted", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
    except typer.TyperException as exc:  # click's usage errors (exit 2) and other click exceptions
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"lbreplay: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code if exc.exit_code is not None else EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - the catch-all: one line, the traceback in a log file
        from lbreplay.lake.damage import unreadable_table

        text = traceback.format_exc()
        damaged = unreadable_table(exc)
        if damaged is not None:  # a deleted / corrupt file of a lake table: input error, exit 3
            log = _write_crash_log(argv, text)
            print(f"lbreplay: {damaged}" + (f" (traceback in {log})" if log else ""), file=sys.stderr)
            sys.exit(damaged.exit_code)
        log = _write_crash_log(argv, text)
        if verbose:
            print(text, file=sys.stderr, end="")
        where = f"traceback in {log}" if log else "traceback not saved"
        hint = "" if verbose else "; rerun with --verbose to print it"
        print(f"lbreplay: unexpected error: {one_line_reason(exc)} ({where}{hint})", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
    finally:  # main() called in-process (tests, a notebook): --verbose does not outlive the command
        if previous is None:
            os.environ.pop("LBREPLAY_VERBOSE", None)
        else:
            os.environ["LBREPLAY_VERBOSE"] = previous


if __name__ == "__main__":
    main()
