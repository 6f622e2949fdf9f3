"""The leader's decisions parsed from ``ModularLoadManagerImpl``'s log lines (the comparison: tests/live_audit)."""

from __future__ import annotations

from lbreplay.collect.leader_log import parse_leader_log

# The two INFO lines of Pulsar 4.0.7's ModularLoadManagerImpl (doLoadShedding / checkNamespaceBundleSplit), as
# scripts/pulsar/log4j2.xml writes them, prefixed with the id of the broker whose log they came from.
LOG = """\
127.0.0.1:18082 2026-11-25T18:04:31,118+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl - [ThresholdShedder] Unloading bundle: lb/hot/0x60000000_0x70000000 from broker 127.0.0.1:18081 to dest broker 127.0.0.1:18083
127.0.0.1:18082 2026-11-25T18:05:31,120+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl - Load-manager splitting bundle lb/hot/0x10000000_0x20000000 and unloading true
127.0.0.1:18082 2026-11-25T20:05:31,120+0200 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl - [ThresholdShedder] Unloading bundle: lb/hot/0x00000000_0x10000000 from broker 127.0.0.1:18083 to dest broker null
127.0.0.1:18082 2026-11-25T18:05:32,000+0000 [main] INFO  org.apache.pulsar.broker.PulsarService - configs=ServiceConfiguration(loadBalancerLoadSheddingStrategy=ThresholdShedder)
"""
T0 = 1795629871118  # 2026-11-25T18:04:31.118Z


def test_parse_unload_and_split() -> None:
    ds = parse_leader_log(LOG.splitlines())
    assert [(d.action, d.bundle, d.source, d.target) for d in ds] == [
        ("UNLOAD", "lb/hot/0x60000000_0x70000000", "127.0.0.1:18081", "127.0.0.1:18083"),
        ("SPLIT", "lb/hot/0x10000000_0x20000000", None, None),
        ("UNLOAD", "lb/hot/0x00000000_0x10000000", "127.0.0.1:18083", None),  # +0200 is the same instant
    ]
    assert ds[0].at_ms == T0 and ds[0].strategy == "ThresholdShedder"
    assert ds[1].at_ms == ds[2].at_ms == T0 + 60_002
    assert ds[0].tick_ms == T0 // 60_000 * 60_000


def test_failed_split_retry_is_not_a_decision() -> None:
    """Pulsar 4.0.7 on the live cluster: a second split check on not-yet-refreshed load data retried the bundle it
    had just split; the admin call was refused ("Invalid upper boundary") and logged as a failed split."""
    lines = [
        "2026-11-25T20:40:26,089+0000 [pulsar-modular-load-manager-30-1] INFO  o.a.p.b.l.i.ModularLoadManagerImpl - Load-manager splitting bundle lb/hot/0x70000000_0x80000000 and unloading true",
        "2026-11-25T20:40:30,492+0000 [pulsar-modular-load-manager-30-1] INFO  o.a.p.b.l.i.ModularLoadManagerImpl - Successfully split namespace bundle lb/hot/0x70000000_0x80000000",
        "2026-11-25T20:40:30,555+0000 [pulsar-modular-load-manager-30-1] INFO  o.a.p.b.l.i.ModularLoadManagerImpl - Load-manager splitting bundle lb/hot/0x70000000_0x80000000 and unloading true",
        "2026-11-25T20:40:30,754+0000 [pulsar-modular-load-manager-30-1] ERROR o.a.p.b.l.i.ModularLoadManagerImpl - Failed to split namespace bundle lb/hot/0x70000000_0x80000000",
    ]
    ds = parse_leader_log(lines)
    assert [(d.action, d.outcome) for d in ds] == [("SPLIT", "succeeded")]
    assert [d.outcome for d in parse_leader_log(lines, attempts=True)] == ["succeeded", "failed"]


def _shedder_line(ts: str, broker: str) -> str:
    """A DEBUG line ThresholdShedder logs for each broker it looks at, as the live test's brokers log it."""
    return (f"127.0.0.1:18083 {ts}+0000 [pulsar-load-manager-1-1] DEBUG org.apache.pulsar.broker.loadbalance.impl."
            f"ThresholdShedder - [{broker}] broker is not overloaded, ignoring at this point (0.11)")


def test_shedding_runs_are_the_bursts_of_the_strategys_lines() -> None:
    """LoadSheddingTask runs doLoadShedding on the load manager's executor: each run logs one line per broker
    within milliseconds; runs are a minute apart. Lines of other threads (the split check's) are not runs."""
    from lbreplay.collect.leader_log import shedding_runs

    lines = [_shedder_line(f"2026-11-26T21:{m}:53,{ms}", b) for m, ms in (("16", "921"), ("17", "951"))
             for b in ("127.0.0.1:18081", "127.0.0.1:18082")]
    lines.append("127.0.0.1:18083 2026-11-26T21:16:49,174+0000 [pulsar-modular-load-manager-30-1] INFO  "
                 "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl - Load-manager splitting bundle x")
    assert shedding_runs(lines) == [1_795_727_813_921, 1_795_727_873_951]


# ExtensibleLoadManagerImpl (Pulsar 4.0.7): UnloadScheduler.execute on the leader, SplitManager on the owner broker
# (the Unload record's toString), as scripts/pulsar/log4j2.xml writes them, prefixed with the logging broker's id.
EXT_LOG = """\
127.0.0.1:18083 2026-11-27T01:45:45,268+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder - brokers' load stats:sum:0.78, sqSum:0.21, avg:0.26, std:0.01, totalBrokers:3
127.0.0.1:18083 2026-11-27T01:45:45,270+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.scheduler.UnloadScheduler - [TransferShedder] Unloading bundle: Unload[sourceBroker=127.0.0.1:18082, serviceUnit=lb/hot/0x30000000_0x40000000, destBroker=Optional[127.0.0.1:18081], force=false]
127.0.0.1:18082 2026-11-27T01:45:53,175+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.strategy.DefaultNamespaceBundleSplitStrategyImpl - Can't split broker:lb/hot/0xb0000000_0xc0000000. Split condition hit count: 0 is less than or equal to threshold: 3.
127.0.0.1:18082 2026-11-27T01:45:53,175+0000 [pulsar-io-3-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.manager.SplitManager - Published the bundle split event for bundle:lb/hot/0x70000000_0x80000000. Waiting the split event to complete. Timeout: 60000 MILLISECONDS
127.0.0.1:18081 2026-11-27T01:45:53,522+0000 [pulsar-io-3-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.manager.SplitManager - Published the bundle split event for bundle:lb.x/hot/0xe0000000_0xf0000000. Waiting the split event to complete. Timeout: 60000 MILLISECONDS
127.0.0.1:18082 2026-11-27T01:45:53,631+0000 [broker-client-shared-internal-executor-5-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.manager.SplitManager - Completed the bundle split event for bundle:lb/hot/0x70000000_0x80000000
127.0.0.1:18081 2026-11-27T01:46:53,530+0000 [pulsar-io-3-1] WARN  org.apache.pulsar.broker.loadbalance.extensions.manager.SplitManager - Timed out while waiting for the bundle split event: lb.x/hot/0xe0000000_0xf0000000
127.0.0.1:18083 2026-11-27T01:46:45,266+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.scheduler.UnloadScheduler - [TransferShedder] Unload decision result: []
127.0.0.1:18083 2026-11-27T01:47:45,266+0000 [pulsar-load-manager-1-1] INFO  org.apache.pulsar.broker.loadbalance.extensions.scheduler.UnloadScheduler - [TransferShedder] Unloading bundle: Unload[sourceBroker=127.0.0.1:18081, serviceUnit=lb/hot/0x00000000_0x10000000, destBroker=Optional.empty, force=false]
"""
EXT_T0 = 1795743945268  # 2026-11-27T01:45:45.268Z


def test_parse_the_extensible_managers_transfers_and_splits() -> None:
    """UnloadScheduler's ``Unload[...]`` (with and without a destination) and SplitManager's published split event,
    its owner from the line's broker prefix, its outcome from the completion or the timeout naming the bundle."""
    ds = parse_leader_log(EXT_LOG.splitlines(), attempts=True)
    assert [(d.at_ms - EXT_T0, d.action, d.bundle, d.source, d.target, d.outcome) for d in ds] == [
        (2, "UNLOAD", "lb/hot/0x30000000_0x40000000", "127.0.0.1:18082", "127.0.0.1:18081", None),
        (7_907, "SPLIT", "lb/hot/0x70000000_0x80000000", "127.0.0.1:18082", None, "succeeded"),
        (8_254, "SPLIT", "lb.x/hot/0xe0000000_0xf0000000", "127.0.0.1:18081", None, "failed"),
        (120_000 - 2, "UNLOAD", "lb/hot/0x00000000_0x10000000", "127.0.0.1:18081", None, None),
    ]
    assert ds[0].strategy == "TransferShedder"
    assert [d.bundle for d in parse_leader_log(EXT_LOG.splitlines())] == [
        "lb/hot/0x30000000_0x40000000", "lb/hot/0x70000000_0x80000000", "lb/hot/0x00000000_0x10000000"]


def test_the_extensible_leaders_shedding_runs_are_its_unload_schedulers() -> None:
    """One run per burst of UnloadScheduler / TransferShedder lines; the split strategy's lines, logged on every
    broker's load-manager thread by its own SplitScheduler, are not the leader's runs."""
    from lbreplay.collect.leader_log import shedding_runs

    assert shedding_runs(EXT_LOG.splitlines()) == [EXT_T0, EXT_T0 + 59_998, EXT_T0 + 119_998]
