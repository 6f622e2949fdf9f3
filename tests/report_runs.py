"""Two real replay runs shared by tests/report/test_report.py and tests/lake/test_views.py (produced once per session).

The history (tests/replay/history.py): 5 brokers, 16 bundles of 10 MB/s + 2000 msg/s each; broker-0 owns 8 of
them, brokers 1-4 two each; broker-4 has no row from tick ``LEAVE_AT`` on (it leaves). It is validated like any
input, then replayed closed-loop with Pulsar's default ThresholdShedder + LeastLongTermMessageRate and with
AvgShedder (shedding and placement); beside them, for the verdict, the observed audit of the same history (the
baseline) and a ThresholdShedder run whose 100 % threshold never sheds (a run that did nothing while unbalanced).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from tests.replay.history import T0, write_history

CLUSTER = "report1"
TICKS = 30
LEAVE_AT = 20
BROKERS = [f"broker-{i}:8080" for i in range(5)]
RUN_IDS = {"threshold": "report-threshold-lltmr", "avg": "report-avg-shedder", "observed": "report-observed",
           "idle": "report-threshold-100"}


@dataclass(frozen=True)
class ReplayedRuns:
    cluster: str
    threshold: str
    avg: str
    t0: dt.datetime
    leave_ts: dt.datetime
    observed: str = RUN_IDS["observed"]
    idle: str = RUN_IDS["idle"]

    @property
    def ids(self) -> list[str]:
        """The two closed loops compared by the report tests (the observed audit joins them as the baseline)."""
        return [self.threshold, self.avg]


_CACHE: dict[str, ReplayedRuns] = {}


def replayed_runs(spark: Any, lake: str) -> ReplayedRuns:
    """Write, validate and replay the history once per lake; create the views."""
    if lake in _CACHE:
        return _CACHE[lake]
    from lbreplay.lake.validation import validate
    from lbreplay.lake.views import ensure_views
    from lbreplay.replay import spark_replay as R
    from lbreplay.replay.run_config import resolve_run_config

    write_history(spark, lake, CLUSTER, ticks=TICKS, leave_at=LEAVE_AT)
    report = validate(spark, lake, CLUSTER)
    assert report.passed, report.details()
    threshold = "conf/strategies/threshold-lltmr.yaml"
    specs = [resolve_run_config(threshold), resolve_run_config("conf/strategies/avg-shedder.yaml"),
             resolve_run_config(threshold, sets=["replay.mode=observed"]),
             resolve_run_config(threshold, sets=["loadBalancerBrokerThresholdShedderPercentage=100"])]
    names = [RUN_IDS[k] for k in ("threshold", "avg", "observed", "idle")]
    ids = R.execute(spark, lake, CLUSTER, specs, run_ids=names, quiet=True)
    ensure_views(spark, lake)
    runs = ReplayedRuns(CLUSTER, ids[0], ids[1], T0, T0 + dt.timedelta(minutes=LEAVE_AT))
    _CACHE[lake] = runs
    return runs
