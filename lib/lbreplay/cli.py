"""The ``lbreplay`` command line (DESIGN.md §3). Thin: every command delegates to a module.

Heavy imports (pyspark, great_expectations) happen inside the commands, so ``decide`` starts fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from lbreplay.errors import EXIT_FAILURE, EXIT_USAGE, LbReplayError
from lbreplay.paths import DEFAULT_LAKE

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Replay and what-if analysis of Pulsar load balancing.")

LakeOpt = typer.Option(DEFAULT_LAKE, "--lake", help="Lake location (directory or storage URI).")
MasterOpt = typer.Option(None, "--master", help="Spark master (default local[*]; spark-submit's wins).")
QuietOpt = typer.Option(False, "--quiet", help="No progress output.")
_TS = "ISO-8601 UTC timestamp or date, e.g. 2023-08-02 or 2023-08-02T00:00:00Z"
FromOpt = typer.Option(None, "--from", help=f"Replay only ticks at or after this time ({_TS}).")
ToOpt = typer.Option(None, "--to", help=f"Replay only ticks before this time ({_TS}).")


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
) -> None:
    """Load real Pulsar dumps (LocalBrokerData, BundleData, TimeAverageBrokerData, BrokerLoadData, TopBundlesLoadData)."""
    from lbreplay.lake.ingest import ingest_command

    ingest_command(source=source, cluster=cluster, lake=lake, master=master, since=since, until=until)


@app.command()
def validate(
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Only this cluster (default: all)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Run the Great Expectations suites on the input tables; exit 3 on failure."""
    from lbreplay.lake.validation import validate_command

    validate_command(cluster=cluster, lake=lake, master=master)


@app.command()
def sql(
    query: str = typer.Argument(..., help="Spark SQL; tables live in the `lbreplay` database."),
    format: str = typer.Option("table", "--format", help="table | csv | json (one object per line)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Run Spark SQL against the registered tables."""
    from lbreplay.lake.sql import sql_command

    sql_command(query=query, fmt=format, lake=lake, master=master)


@app.command()
def decide(
    request: str = typer.Option(..., "--request", help="Request JSON file, or - for standard input."),
    seed: int = typer.Option(0, "--seed", help="Seed for Pulsar's random choices among equally good brokers."),
) -> None:
    """One leader tick on one snapshot (no Spark): shed, split, assign, lookup."""
    from lbreplay.decide import decide_command

    decide_command(request=request, seed=seed)


@app.command()
def replay(
    cluster: str = typer.Option(..., "--cluster"),
    config: Optional[str] = typer.Option(
        None, "--config", help="YAML with pulsar:/replay: maps (or a preset name under conf/strategies/)."),
    broker_conf: Optional[str] = typer.Option(None, "--broker-conf", help="A real broker.conf (properties)."),
    set_: list[str] = typer.Option([], "--set", help="Override one key: key=value (replay.<opt>=v for replay options)."),
    mode: Optional[str] = typer.Option(None, "--mode", help="closed-loop (what-if) or observed (audit)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Run id (default: derived from inputs+config+seed)."),
    seed: Optional[int] = typer.Option(None, "--seed"),
    from_: Optional[str] = FromOpt,
    to: Optional[str] = ToOpt,
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """One replay run; prints the run id."""
    from lbreplay.replay.spark_replay import replay_command

    replay_command(cluster, config, broker_conf, set_, mode, run_id, seed, lake, master, quiet, window=(from_, to))


@app.command()
def sweep(
    cluster: str = typer.Option(..., "--cluster"),
    grid: str = typer.Option(..., "--grid", help="YAML with pulsar:/replay: base and a grid: of keys to lists."),
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
    from lbreplay.replay.spark_replay import sweep_command

    sweep_command(cluster, grid, seed, lake, master, quiet, run_id_prefix=run_id_prefix, window=(from_, to))


@app.command()
def report(
    runs: str = typer.Option(..., "--runs", help="Comma-separated run ids to compare."),
    out: str = typer.Option(..., "--out", help="Output HTML file (self-contained, opens offline)."),
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
) -> None:
    """Compare runs: KPI table and plots in one self-contained HTML file."""
    from lbreplay.report.html_report import report_command

    report_command(runs=[r.strip() for r in runs.split(",") if r.strip()], out=out, lake=lake, master=master)


@app.command()
def demo(
    lake: str = LakeOpt,
    master: Optional[str] = MasterOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Generate a sample history, validate it, replay it under several strategies, print where results are."""
    from lbreplay.demo import demo_command

    demo_command(lake=lake, master=master, quiet=quiet)


def main() -> None:
    """Console entry point: maps lbreplay errors to the contract's exit codes with a one-line reason."""
    try:
        app(standalone_mode=False)
    except LbReplayError as exc:
        print(f"lbreplay: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("lbreplay: aborted", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
    except Exception as exc:  # click usage errors and anything else
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            sys.exit(EXIT_USAGE)
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        print(f"lbreplay: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILURE)


if __name__ == "__main__":
    main()
