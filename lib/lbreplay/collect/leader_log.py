"""The leader's real decisions and shedding runs, from the brokers' logs (``leader-decisions.log`` in a dump).

The comparison with an audit's decisions is :mod:`lbreplay.live_audit.comparison`; :func:`is_leader_log_line` is
what ``collect --leader-log-dir`` keeps of the brokers' logs.

``ModularLoadManagerImpl`` logs each decision of a shedding or split cycle at INFO:

* ``doLoadShedding``: ``[ThresholdShedder] Unloading bundle: <bundle> from broker <broker> to dest broker <dest>``
  (the strategy's simple class name in brackets);
* ``checkNamespaceBundleSplit``: ``Load-manager splitting bundle <bundle> and unloading <true|false>``, then
  ``Successfully split namespace bundle <bundle>`` or ``Failed to split namespace bundle <bundle>`` (e.g. a
  second check on the same, not yet refreshed, load data retries a bundle already split: the admin call is
  refused with "Invalid upper boundary"). A split attempt that failed is kept with ``outcome="failed"`` and is
  not a decision the comparison counts.

``ExtensibleLoadManagerImpl`` (PIP-192):

* ``UnloadScheduler.execute`` (the leader): ``[TransferShedder] Unloading bundle: Unload[sourceBroker=<broker>,
  serviceUnit=<bundle>, destBroker=Optional[<dest>], force=false]`` (``Optional.empty``: an unload without a
  transfer);
* ``SplitManager.waitAsync`` (the owner broker): ``Published the bundle split event for bundle:<bundle>``, then
  ``Completed the bundle split event for bundle:<bundle>``, or ``Timed out while waiting for the bundle split
  event: <bundle>`` / ``Failed the bundle split event for bundle:<bundle>``.

Lines may carry a prefix (e.g. the broker id the log came from) before the log4j timestamp; a ``host:port`` prefix
names the broker that logged the line (an extensible split's owner). A decision's tick is
its time truncated to the minute (UTC): the comparison matches the leader's and the audit's decisions per minute
(the audit decides at the exact times of the report versions ``ingest`` keeps, the leader logs a few ms later).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TS = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})[,.](\d{3})(Z|[+-]\d{2}:?\d{2})?")
_UNLOAD = re.compile(r"\[(?P<strategy>\w+)\] Unloading bundle: (?P<bundle>\S+) from broker (?P<source>\S+)"
                     r"(?: to dest broker (?P<target>\S+))?")  # older Pulsar logs no destination
_SPLIT = re.compile(r"Load-manager splitting bundle (?P<bundle>\S+) and unloading (?P<unload>\w+)")
_SPLIT_OUTCOME = re.compile(r"(?P<outcome>Successfully|Failed to) split namespace bundle (?P<bundle>\S+)")
_TRANSFER = re.compile(r"\[(?P<strategy>\w+)\] Unloading bundle: Unload\[sourceBroker=(?P<source>[^,\]]+), "
                       r"serviceUnit=(?P<bundle>[^,\]]+), destBroker=Optional(?:\[(?P<target>[^\]]*)\]|\.empty)")
_SPLIT_EVENT = re.compile(r"Published the bundle split event for bundle:(?P<bundle>[^\s.]+(?:\.[^\s.]+)*?)\. ")
_SPLIT_EVENT_OUTCOME = re.compile(r"(?P<outcome>Completed the bundle split event for bundle:|Timed out while waiting "
                                  r"for the bundle split event: |Failed the bundle split event for bundle:)"
                                  r"(?P<bundle>[^\s,]+)")
_PREFIX_BROKER = re.compile(r"^\s*(?P<broker>[\w.-]+:\d+)\s+\d{4}-")


@dataclass(frozen=True)
class Decision:
    """One UNLOAD or SPLIT: when (epoch ms), what, from which broker (SPLIT: the owner, when known)."""

    at_ms: int
    action: str
    bundle: str
    source: str | None
    target: str | None = None
    strategy: str | None = None
    line: str = field(default="", compare=False)
    outcome: str | None = field(default=None, compare=False)  # SPLIT: "succeeded" | "failed" | None (not logged)

    @property
    def tick_ms(self) -> int:
        return self.at_ms // 60_000 * 60_000

    def key(self) -> tuple[str, str, str | None]:
        return self.action, self.bundle, self.source


def _epoch_ms(m: re.Match[str]) -> int:
    date, clock, millis, zone = m.groups()
    text = f"{date}T{clock}.{millis}"
    if zone and zone != "Z":
        zone = zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
        dt = datetime.fromisoformat(text + zone)
    else:
        dt = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)  # exact (a float product can land 1 ms short)


def parse_leader_log(lines: Iterable[str], attempts: bool = False) -> list[Decision]:
    """Every UNLOAD / SPLIT decision in time order (lines without a log4j timestamp are skipped); a SPLIT's
    ``outcome`` is taken from the next success / failure line for that bundle. Failed split attempts are left out
    unless ``attempts``."""
    out: list[Decision] = []
    for line in lines:
        m_ts = _TS.search(line)
        if not m_ts:
            continue
        at = _epoch_ms(m_ts)
        m = _TRANSFER.search(line)
        if m:
            out.append(Decision(at, "UNLOAD", m.group("bundle"), m.group("source"), m.group("target") or None,
                                m.group("strategy"), line.rstrip("\n")))
            continue
        m = _SPLIT_EVENT.search(line)
        if m:
            p = _PREFIX_BROKER.match(line)
            out.append(Decision(at, "SPLIT", m.group("bundle"), p.group("broker") if p else None, None, None,
                                line.rstrip("\n")))
            continue
        m = _SPLIT_EVENT_OUTCOME.search(line)
        if m:
            _set_outcome(out, m.group("bundle"), m.group("outcome").startswith("Completed"))
            continue
        m = _UNLOAD.search(line)
        if m:
            target = m.group("target")
            out.append(Decision(at, "UNLOAD", m.group("bundle"), m.group("source"),
                                None if target in ("null", "") else target, m.group("strategy"), line.rstrip("\n")))
            continue
        m = _SPLIT.search(line)
        if m:
            out.append(Decision(at, "SPLIT", m.group("bundle"), None, None, None, line.rstrip("\n")))
            continue
        m = _SPLIT_OUTCOME.search(line)
        if m:
            _set_outcome(out, m.group("bundle"), m.group("outcome") == "Successfully")
    out = [d for d in out if attempts or d.outcome != "failed"]
    return sorted(out, key=lambda d: (d.at_ms, d.action, d.bundle))


def _set_outcome(out: list[Decision], bundle: str, succeeded: bool) -> None:
    """The latest SPLIT of ``bundle`` without an outcome gets this one."""
    pending = [i for i, d in enumerate(out) if d.action == "SPLIT" and d.bundle == bundle and d.outcome is None]
    if pending:
        d = out[pending[-1]]
        out[pending[-1]] = Decision(d.at_ms, d.action, d.bundle, d.source, d.target, d.strategy, d.line,
                                    "succeeded" if succeeded else "failed")


_SHEDDER_LINE = re.compile(r"\[pulsar-load-manager-[\w-]*\] \w+ +org\.apache\.pulsar\.broker\.loadbalance\.(impl\."
                           r"(ThresholdShedder|OverloadShedder|UniformLoadShedder|AvgShedder|ModularLoadManagerImpl)"
                           r"|extensions\.scheduler\.(TransferShedder|UnloadScheduler))\b")


def shedding_runs(lines: Iterable[str], gap_ms: int = 5_000) -> list[int]:
    """When the leader's ``LoadSheddingTask`` (extensible: ``UnloadScheduler``) ran (epoch ms of each run's first
    line): the lines its shedding strategy or ``doLoadShedding`` logs on the load manager's executor thread
    (``pulsar-load-manager-*``; a strategy logs each broker it looks at under DEBUG; ``UnloadScheduler`` logs each
    run's decision result), one run per burst of lines ``gap_ms`` apart."""
    times = sorted(_epoch_ms(m) for line in lines if _SHEDDER_LINE.search(line) and (m := _TS.search(line)))
    runs: list[int] = []
    last = 0
    for t in times:
        if not runs or t - last > gap_ms:
            runs.append(t)
        last = t
    return runs


_OWNER_KEPT = re.compile(r"\[(?P<strategy>\w+)\] The destination broker (?P<broker>\S+) is the same as the current "
                         r"owner broker for Bundle (?P<bundle>\S+)")


def owner_kept(lines: Iterable[str]) -> list[tuple[int, str, str]]:
    """``ModularLoadManagerImpl.doLoadShedding``'s WARN "[<Strategy>] The destination broker <b> is the same as the
    current owner broker for Bundle <bundle>": the strategy shed the bundle but its placement (``selectBroker``)
    chose the owner, so nothing moved: (time, bundle, owner)."""
    out = []
    for line in lines:
        m, m_ts = _OWNER_KEPT.search(line), _TS.search(line)
        if m and m_ts:
            out.append((_epoch_ms(m_ts), m.group("bundle"), m.group("broker")))
    return out


_NOT_OVERLOADED = re.compile(r"ThresholdShedder - \[(?P<broker>[^\]]+)\] broker is not overloaded, ignoring at this point "
                             r"\((?P<usage>[^)]*)\)")
_PERCENT = re.compile(r"(\w+): (-?[\d.]+|NaN|-?Infinity)%")


def shedding_views(lines: Iterable[str]) -> list[tuple[int, str, dict[str, str]]]:
    """What ThresholdShedder read at each run (DEBUG): per broker it did not find overloaded, the held report's
    ``LocalBrokerData.printResourceUsage()`` (each resource's ``percentUsage()``, ``%.2f``): (time, broker,
    {resource: printed percent})."""
    out = []
    for line in lines:
        m, m_ts = _NOT_OVERLOADED.search(line), _TS.search(line)
        if m and m_ts:
            out.append((_epoch_ms(m_ts), m.group("broker"), dict(_PERCENT.findall(m.group("usage")))))
    return out


_LOAD_STATS = re.compile(r"TransferShedder - brokers' load stats:sum:(?P<sum>[-\d.]+), sqSum:(?P<sqSum>[-\d.]+), "
                         r"avg:(?P<avg>[-\d.]+), std:(?P<std>[-\d.NaN]+), totalBrokers:(?P<n>\d+), "
                         r"brokersSortedByLoad:\[(?P<brokers>[^\]]*)\]$")


def transfer_views(lines: Iterable[str]) -> list[tuple[int, dict[str, str], list[str]]]:
    """What TransferShedder read at each run (``loadBalancerDebugModeEnabled``): its ``LoadStats`` of the held
    BrokerLoadData's ``weightedMaxEMA`` (``%.2f``) and the brokers sorted by it: (time, {sum, sqSum, avg, std},
    brokers). The same line with ``after offload`` (logged per planned transfer) is left out."""
    out = []
    for line in lines:
        m, m_ts = _LOAD_STATS.search(line.rstrip()), _TS.search(line)
        if m and m_ts:
            brokers = [b.strip() for b in m.group("brokers").split(",") if b.strip()]
            out.append((_epoch_ms(m_ts), {k: m.group(k) for k in ("sum", "sqSum", "avg", "std")}, brokers))
    return out


_CONSIDERED = re.compile(r"\[(?P<thread>[^\]]+)\] +\w+ +\S*ModularLoadManagerImpl - (?P<n>\d+) brokers being considered "
                         r"for assignment of (?P<bundle>\S+)")
_SELECTED = re.compile(r"\[(?P<thread>[^\]]+)\] +\w+ +\S*ModularLoadManagerImpl - Selected broker "
                       r"Optional(?:\[(?P<broker>[^\]]*)\]|\.empty) from candidate brokers ")
LOAD_MANAGER_THREAD = "pulsar-load-manager-"


@dataclass(frozen=True)
class Placement:
    """One ``ModularLoadManagerImpl.selectBroker`` call a broker logged: when (epoch ms), the broker that logged it
    (the line's ``host:port`` prefix; None unprefixed), its thread, the bundle, ``brokerCandidateCache.size()``
    after the filters, the broker the strategy chose (the DEBUG "Selected broker" line, when logged) and whether it
    was a lookup (``selectBrokerForAssignment``: a bundle already preallocated returns before ``selectBroker``, so
    each line is one strategy call) or ``doLoadShedding``'s own destination choice (on ``pulsar-load-manager-*``)."""

    at_ms: int
    broker: str | None
    thread: str
    bundle: str
    candidates: int
    selected: str | None = None

    @property
    def lookup(self) -> bool:
        return not self.thread.startswith(LOAD_MANAGER_THREAD)


def logged_by_leader(broker: str | None, at_ms: int, elections_ms: Sequence[int] | None,
                     leader_brokers: Sequence[str] | None) -> bool:
    """Was a line logged ``at_ms`` by ``broker`` the leader's? An unnamed broker's, or without a known election,
    yes; else the broker the latest election at or before it elected (before the first election: no)."""
    if broker is None or not elections_ms or not leader_brokers:
        return True
    i = bisect.bisect_right(list(elections_ms), at_ms)
    return i > 0 and leader_brokers[i - 1] == broker


def placements(lines: Iterable[str]) -> list[Placement]:
    """Every placement the brokers logged, in log order: INFO ``<n> brokers being considered for assignment of
    <bundle>`` (``selectBroker``, 3.0.7 / 4.0.7 bytecode offsets 180-196), with the chosen broker of the DEBUG
    ``Selected broker Optional[<b>] from candidate brokers [...]`` that the same broker's same thread logs next
    (offsets 343-363, right after the strategy's call; ``Optional.empty``: none)."""
    out: list[Placement] = []
    open_at: dict[tuple[str | None, str], int] = {}  # (broker, thread) -> index of its last placement line
    for line in lines:
        m_ts = _TS.search(line)
        if not m_ts or "ModularLoadManagerImpl" not in line:
            continue
        p = _PREFIX_BROKER.match(line)
        broker = p.group("broker") if p else None
        m = _CONSIDERED.search(line)
        if m:
            open_at[(broker, m.group("thread"))] = len(out)
            out.append(Placement(_epoch_ms(m_ts), broker, m.group("thread"), m.group("bundle"), int(m.group("n"))))
            continue
        m = _SELECTED.search(line)
        k = open_at.pop((broker, m.group("thread")), None) if m else None
        if m and k is not None:
            d = out[k]
            out[k] = Placement(d.at_ms, d.broker, d.thread, d.bundle, d.candidates, m.group("broker") or None)
    return out


#: the load balancer's classes whose every line ``collect`` keeps (matched on the simple name, so an abbreviated
#: logger such as ``o.a.p.b.l.i.ThresholdShedder`` matches too)
LEADER_LOG_CLASSES = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder", "TransferShedder",
                      "UnloadScheduler", "UnloadManager", "SplitManager", "SplitScheduler")
_KEEP = re.compile(r"Unloading bundle: |Load-manager splitting bundle |split namespace bundle |bundle split event"
                   r"|was elected leader|Acquired leadership on /loadbalance/"
                   r"| brokers being considered for assignment of |Selected broker \S+ from candidate brokers "
                   r"|\b(?:" + "|".join(LEADER_LOG_CLASSES) + r")\b")


def is_leader_log_line(line: str) -> bool:
    """A broker log line the leader log keeps: a log4j line (with its timestamp; a stack trace's frames are not)
    that is one of these, for every strategy:

    * ``ModularLoadManagerImpl.doLoadShedding``: ``[<Strategy>] Unloading bundle: <b> from broker <s> to dest broker
      <d>`` (and ``[<Strategy>] The destination broker … is the same as the current owner broker``);
      ``checkNamespaceBundleSplit``: ``Load-manager splitting bundle <b> and unloading <u>``, ``Successfully split
      namespace bundle <b>`` / ``Failed to split namespace bundle <b>``;
    * any line of a strategy's logger (``findBundlesForUnloading``): ``ThresholdShedder`` (``Attempting to shed load
      on …``, DEBUG ``[<b>] broker is not overloaded, ignoring at this point (…)``), ``OverloadShedder`` (``Attempting
      to shed load on …``, ``HIGH USAGE WARNING : Sole namespace bundle …``), ``UniformLoadShedder`` (``Found bundle to
      unload from <b> with msgRate …`` / ``with msgThroughput …``), ``AvgShedder`` (``broker:<b>, scores:…``,
      ``brokerHitCountForHigh:…``, ``broker:[<b>] is planning to shed bundles to broker:[<d>]…``), ``TransferShedder``
      (``brokers' load stats:…``, ``Decided to unload bundle:…``); the extensible manager's ``UnloadScheduler``
      (``[TransferShedder] Unloading bundle: Unload[…]``, ``Unload decision result: …``), ``UnloadManager``,
      ``SplitManager`` (``Published the bundle split event for bundle:…``, ``Completed the bundle split event …``)
      and ``SplitScheduler``;
    * the election: ``PulsarService`` ``This broker <b> was elected leader``, ``LeaderElectionImpl`` ``Acquired
      leadership on /loadbalance/leader …``;
    * the modular leader's placements (``ModularLoadManagerImpl.selectBroker``, for a lookup and for an unload's
      destination alike): INFO ``<n> brokers being considered for assignment of <bundle>`` and, with the class at
      DEBUG (scripts/pulsar/log4j2.xml), ``Selected broker <b> from candidate brokers [...]``. They time the
      lookups a recording does not otherwise show (and count ``RoundRobinBrokerSelector``'s calls); no decision
      and no shedding run is read from them (a shedding run's own placement lines come after its strategy's).

    The broker's start-up line listing its whole configuration (``configs=``) names the strategy classes too and is
    left out."""
    return bool(_KEEP.search(line)) and "configs=" not in line and _TS.search(line) is not None


def log_time_ms(line: str) -> int | None:
    """A log line's log4j timestamp as epoch ms (UTC unless the line carries an offset); None without one."""
    m = _TS.search(line)
    return _epoch_ms(m) if m else None
