"""Progress output of long commands: plain log lines when not a terminal, silent with --quiet."""

import io

from lbreplay.progress import Progress


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
