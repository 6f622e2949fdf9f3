"""Progress output of long commands: plain log lines when not a terminal, a live line on one, silent with --quiet;
``generate`` reports step k/n, the step's Spark tasks, the rows covered and an ETA weighted by expected rows."""

from __future__ import annotations

import io
import re
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from lbreplay.lake.generator import generate_command, generate_steps
from lbreplay.lake.scenario import resolve_scenario
from lbreplay.progress import Progress, StepProgress, eta_seconds, spark_tasks, steps_done

TINY = {"name": "tiny", "brokers": 3, "namespaces": 1, "bundles_per_namespace": 4, "topics": 40, "ticks": 20}


def test_plain_lines_with_eta_and_quiet() -> None:
    out = io.StringIO()
    p = Progress("replaying 2 run(s)", 200, "ticks", out=out, log_every_s=0.0)
    p.update(50)
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("replaying 2 run(s): 50/200 ticks (25%)") and "ETA" in lines[0]
    assert lines[-1].startswith("replaying 2 run(s): 200/200 ticks (100%)")
    quiet = io.StringIO()
    q = Progress("x", 10, out=quiet, quiet=True)
    q.update(5)
    q.finish()
    assert quiet.getvalue() == ""


def test_eta_weights_steps_by_expected_rows() -> None:
    """Issue 5 item 4: the ETA is overall, steps weighted by their expected rows. Steps of 100 and 900 rows, the
    second half done after 10 s: 100 + 450 = 550 rows covered, ETA = 10 / 550 x 450 = 8.18 s (counting steps
    instead -- 1.5 of 2 done -- would say 3.33 s)."""
    assert steps_done([100, 900], 1, 0.5) == 550.0
    assert steps_done([100, 900], 0, 2.0) == 100.0  # a fraction is clamped to [0, 1]
    assert eta_seconds(550.0, 1000.0, 10.0) == pytest.approx(10.0 / 550.0 * 450.0)
    assert eta_seconds(0.0, 1000.0, 3.0) != eta_seconds(0.0, 1000.0, 3.0)  # NaN before any progress


def test_generate_steps_rows_known_from_the_scenario() -> None:
    """The weights of generate's steps come from the scenario alone: 20 ticks x 40 topics (written, then summed per
    bundle), 20 ticks x 3 brokers, 20 ticks x 4 bundles, 1 namespace."""
    sc = resolve_scenario(TINY)
    assert generate_steps(sc) == [("topics", 40), ("topic_load", 800), ("bundle_stats", 800),
                                  ("broker_load", 60), ("bundle_load", 80), ("namespace_policy", 1)]


class FakeContext:
    """The SparkContext surface progress uses: local properties, setJobGroup and a status tracker whose group
    has job 1 succeeded (stage 0 ran 4/4, stage 1 skipped: 0/4) and job 2 running (stage 2 at 1/3)."""

    def __init__(self) -> None:
        self.props: dict[str, Any] = {"spark.jobGroup.id": "outer"}
        self.group: str | None = None
        self.jobs = {1: SimpleNamespace(status="SUCCEEDED", stageIds=[0, 1]),
                     2: SimpleNamespace(status="RUNNING", stageIds=[1, 2])}
        self.stages = {0: (4, 4), 1: (4, 0), 2: (3, 1)}

    def getLocalProperty(self, key: str) -> Any:
        return self.props.get(key)

    def setLocalProperty(self, key: str, value: Any) -> None:
        self.props[key] = value

    def setJobGroup(self, group: str, description: str) -> None:
        self.group = group
        self.props.update({"spark.jobGroup.id": group, "spark.job.description": description})

    def statusTracker(self) -> Any:
        return SimpleNamespace(
            getJobIdsForGroup=lambda g: [1, 2] if g == self.group else [],
            getJobInfo=self.jobs.get,
            getStageInfo=lambda s: SimpleNamespace(numTasks=self.stages[s][0], numCompletedTasks=self.stages[s][1]))

    def finish(self) -> None:
        """Job 2 completes its stage 2 (3/3)."""
        self.jobs[2].status = "SUCCEEDED"
        self.stages[2] = (3, 3)


def test_spark_tasks_count_each_stage_once_and_drop_skipped_stages() -> None:
    """SparkStatusTracker: a stage shared by two jobs counts once; a stage of a succeeded job that ran no task was
    skipped and leaves the total: completed 4 + 0 + 1 = 5 of 4 + 3 = 7 (not 5 of 11)."""
    ctx = FakeContext()
    ctx.setJobGroup("g", "d")
    assert spark_tasks(ctx.statusTracker(), "g") == (5, 7)
    assert spark_tasks(ctx.statusTracker(), "other") == (0, 0)
    assert spark_tasks(None, "g") == (0, 0)  # a failed status read never raises


def _progress_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("lbreplay-progress")]


def test_step_lines_poll_tasks_and_weight_the_eta() -> None:
    """Steps a (100 rows) and b (300 rows), fake clock. Mid-step b the poller reports tasks 5/7 -> 100 + 300 x 5/7
    = 314 rows covered at 20 s: ETA 20 / 314 x 86 = 5 s. Step ends are forced lines: a done at 5 s (100/400 rows,
    ETA 5 / 100 x 300 = 15 s); b, started at 5 s, done at 25 s with its jobs' 7/7 tasks. The job group is restored
    and the poller thread is gone."""
    now = [0.0]
    out = io.StringIO()
    sp = StepProgress("gen", [("a", 100), ("b", 300)], out=out, log_every_s=0.0, poll_s=0.005,
                      clock=lambda: now[0])
    with sp.step("a") as note:
        now[0] = 5.0
        note.text = "100 rows"
    ctx = FakeContext()
    with sp.step("b", ctx):
        assert ctx.props["spark.jobGroup.id"].startswith("lbreplay-b-")
        now[0] = 20.0
        deadline = time.monotonic() + 5
        while "314/400" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.005)
        now[0] = 25.0
        ctx.finish()
    sp.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "gen: 100/400 rows (25%), 5s elapsed, ETA 15s | step 1/2 a done: 100 rows in 5.0s, tasks 0/0"
    assert "gen: 314/400 rows (78%), 20s elapsed, ETA 5s | step 2/2 b, tasks 5/7" in lines
    assert lines[-1] == "gen: 400/400 rows (100%), 25s elapsed, ETA 0s | step 2/2 b done in 20.0s, tasks 7/7"
    assert ctx.props["spark.jobGroup.id"] == "outer" and ctx.props["spark.job.description"] is None
    assert _progress_threads() == []


def test_step_that_raises_stops_the_poller_and_prints_no_end_line() -> None:
    """A failing step: the poller is stopped and joined, the job group restored, no 'done' line, error re-raised."""
    out = io.StringIO()
    sp = StepProgress("gen", [("a", 10)], out=out, log_every_s=1e9, poll_s=0.005)
    ctx = FakeContext()
    with pytest.raises(RuntimeError, match="boom"):
        with sp.step("a", ctx):
            assert _progress_threads() == ["lbreplay-progress-a"]
            raise RuntimeError("boom")
    assert _progress_threads() == []
    assert ctx.props["spark.jobGroup.id"] == "outer"
    assert "done" not in out.getvalue()


def test_plain_output_is_step_ends_only_between_log_intervals() -> None:
    """Off a terminal, lines come at most every log_every_s plus one per step end. A running last step never
    reaches 100 % (10 + 1 x 5/7 = 10.7 rows floors to 10 of 11), so polls do not print the final line early."""
    out = io.StringIO()
    sp = StepProgress("gen", [("a", 10), ("b", 1)], out=out, log_every_s=1e9, poll_s=0.002)
    ctx = FakeContext()
    with sp.step("a"):
        pass
    with sp.step("b", ctx):
        deadline = time.monotonic() + 5
        while sp.covered < 10 and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(0.05)  # many more polls
        assert sp.covered == 10
        ctx.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("gen: 10/11 rows") and lines[1].startswith("gen: 11/11 rows")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_gets_one_live_line_and_log_lines_clear_it() -> None:
    """On a terminal: `\\r`-redrawn line, a log message replaces it on its own line, close() ends the line."""
    out = Tty()
    sp = StepProgress("gen", [("a", 10), ("b", 10)], out=out, poll_s=60)
    with sp.step("a"):
        pass
    sp.log("hello")
    with sp.step("b"):
        pass
    sp.close()
    text = out.getvalue()
    assert text.startswith("\rgen: 10/20 rows (50%)") and "step 1/2 a done" in text
    assert "\r" + " " * 20 in text and "\rhello\n" in text.replace(" ", "")
    assert re.search(r"\rgen: 20/20 rows \(100%\).*step 2/2 b done.*\n$", text)


# ---------------------------------------------------------------------------------------------------------
# Spark: a real generate run
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_generate_prints_steps_tasks_and_eta_then_the_summary(spark, lake, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 5 item 4 (non-terminal output): one forced line per step with k/6, its Spark tasks (all done at the
    step's end) and the ETA; 800 + 800 + 60 + 80 + 40 + 1 = 1781 rows at the end; the summary stays on stdout."""
    generate_command(TINY, "progress1", lake=lake)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    steps = [line for line in lines if " done" in line]
    names = [name for name, _ in generate_steps(resolve_scenario(TINY))]
    assert [re.search(r"step (\d)/6 (\w+) done", line).groups() for line in steps] == [  # type: ignore[union-attr]
        (str(k + 1), name) for k, name in enumerate(names)]
    for line in steps:
        done, total = map(int, re.search(r"tasks (\d+)/(\d+)$", line).groups())  # type: ignore[union-attr]
        assert 0 < done == total, line
        assert re.search(r"ETA \d+s", line)
    assert "topic_load done: 800 rows" in steps[1]
    assert steps[-1].startswith("generate: 1781/1781 rows (100%)")
    assert captured.out.strip().splitlines()[-1].startswith("generated cluster progress1 (scenario tiny")
    assert _progress_threads() == []
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


@pytest.mark.spark
def test_generate_quiet_prints_only_the_summary_and_writes_tables(spark, lake, capsys) -> None:  # type: ignore[no-untyped-def]
    """--quiet: no progress at all (stderr empty), the summary line only, and the tables are written
    (topic_load: 20 ticks x 40 topics)."""
    generate_command(TINY, "progress2", lake=lake, quiet=True)
    captured = capsys.readouterr()
    assert captured.err == ""
    assert len(captured.out.strip().splitlines()) == 1 and captured.out.startswith("generated cluster progress2")
    assert spark.table("lbreplay.topic_load").where("cluster = 'progress2'").count() == 800


@pytest.mark.spark
def test_generate_failing_step_leaves_no_poller(spark, lake, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A write that fails mid-step (after the poller has polled): the error propagates, the poller thread is gone
    and the session's job group is restored."""
    from lbreplay.lake import tables

    def failing(*_args: Any, **_kw: Any) -> None:
        time.sleep(0.6)
        raise RuntimeError("disk full")

    monkeypatch.setattr(tables, "replace_partitions", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        generate_command(TINY, "progress3", lake=lake)
    assert _progress_threads() == []
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    assert " done" in capsys.readouterr().err  # the topics step had finished


@pytest.mark.spark
def test_ingest_reports_reading_and_each_table_commit_unless_quiet(spark, lake) -> None:  # type: ignore[no-untyped-def]
    """``ingest`` prints on stderr the files read and one line per table as its commit lands (tables commit
    concurrently, so in any order); ``--quiet`` prints nothing there. The counts are the summary's ``rows:``."""
    from lbreplay.lake.ingest import INGEST_TABLES
    from tests.hostile.harness import REPO, cli

    source = REPO / "data" / "samples" / "modular-3brokers"
    res = cli(spark, "ingest", "--source", str(source), "--cluster", "progress-ingest", "--lake", lake)
    assert res.code == 0, res.err
    rows = dict(kv.split("=") for kv in res.out.splitlines()[1].removeprefix("rows: ").split(", "))
    lines = res.err.splitlines()
    ticks = re.search(r": (\d+) ticks", res.out).group(1)  # type: ignore[union-attr]
    assert re.fullmatch(rf"ingest: read 21 files \({ticks} ticks\) under {re.escape(str(source))}; writing "
                        rf"{len(INGEST_TABLES)} tables", lines[0]), lines[0]
    expected = {f"ingest: {t.name}: {rows[t.name]} rows committed" if int(rows[t.name]) else f"ingest: {t.name}: no rows"
                for t in INGEST_TABLES}
    assert sorted(lines[1:]) == sorted(expected)
    assert int(rows["broker_load"]) == 9
    quiet = cli(spark, "ingest", "--source", str(source), "--cluster", "progress-ingest", "--lake", lake, "--quiet")
    assert quiet.code == 0 and quiet.err == "" and quiet.out == res.out


@pytest.mark.spark
def test_validate_reports_each_table_scan_unless_quiet(spark, lake) -> None:  # type: ignore[no-untyped-def]
    """``validate`` prints on stderr the tables it scans, one line per table as its scan ends (rows, rows some rule's
    Spark predicate flags) and one per Great Expectations suite run over flagged rows; ``--quiet`` prints none."""
    from lbreplay.lake.expectations import VALIDATED_TABLES
    from tests.hostile.harness import REPO, cli

    source = REPO / "data" / "samples" / "modular-3brokers"
    ingested = cli(spark, "ingest", "--source", str(source), "--cluster", "progress-val", "--lake", lake, "--quiet")
    assert ingested.code == 0, ingested.err
    rows = dict(kv.split("=") for kv in ingested.out.splitlines()[1].removeprefix("rows: ").split(", "))
    res = cli(spark, "validate", "--cluster", "progress-val", "--lake", lake)
    assert res.code == 0 and res.out.startswith("validation passed: cluster progress-val"), res.err
    lines = [ln for ln in res.err.splitlines() if ln.startswith("validate: ")]
    scanned = re.fullmatch(r"validate: scanning (\d+) tables of progress-val", lines[0])
    assert scanned, lines[0]
    per_table = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
                 (re.fullmatch(r"validate: (\w+): (\d+) rows, (\d+) flagged by the rules' predicates", ln)
                  for ln in lines[1:]) if m}
    assert len(per_table) == int(scanned.group(1)) and set(per_table) <= {t.name for t in VALIDATED_TABLES}
    for name, (n, _) in per_table.items():
        assert n == int(rows.get(name, 0)), name
    suites = [ln for ln in lines[1:] if "Great Expectations suite" in ln]
    assert len(lines) == 1 + len(per_table) + len(suites)
    assert all(per_table[re.match(r"validate: (\w+):", ln).group(1)][1] > 0 for ln in suites)  # type: ignore[union-attr]
    quiet = cli(spark, "validate", "--cluster", "progress-val", "--lake", lake, "--quiet")
    assert quiet.code == 0 and not [ln for ln in quiet.err.splitlines() if ln.startswith("validate: ")]
