"""Skewed producer load on a 16-bundle namespace, with the real Pulsar client (PyPI ``pulsar-client``).

Creates tenant/namespace (``--namespace``, ``--bundles`` bundles) through the admin REST API, asks which bundle
each of ``--topics`` topics falls in (``/admin/v2/persistent/<ns>/<topic>/bundle``), then produces: the two
hottest topics are put in the same bundle (together above ``loadBalancerNamespaceBundleMaxMsgRate`` so the
leader splits it), the others get Zipf-distributed rates; every ``--phase`` seconds the Zipf ranks rotate so
brokers' loads change and the shedder has work. Stops on SIGTERM / SIGINT or after ``--duration`` seconds.

``--schedule FILE`` (YAML, e.g. scripts/pulsar/whatif/schedule.yaml) fixes a whole run relative to its start
instead: the namespace, topics, message size and duration, the Zipf tail (its ranks permuted at every rotation by a
``random.Random(seed)``, so two runs of one schedule send the same rates at the same offsets), the hot groups (the
k-th fullest bundle's first topics at a rate from ``from`` to ``to`` seconds) and the cluster events the caller
runs (a broker joining, a broker SIGKILLed: ``--print-events`` prints them as ``<seconds> <join|kill> <broker>``).

``--hot-owner`` puts the hot load on one broker instead: once the producers are connected, the broker that owns
the most topics (``/lookup/v2/topic``; ties: the lower URL) gets all its topics at ``--hot-rate`` each, the others
keep the Zipf tail (the extensible manager near its defaults: scripts/pulsar/topologies/extensible-defaults.conf).

usage: python scripts/pulsar/traffic.py --admin-url http://127.0.0.1:18081 --service-url pulsar://127.0.0.1:16651
       python scripts/pulsar/traffic.py --schedule FILE --print-events
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HotGroup:
    """``n`` topics of the ``rank``-th fullest bundle (0: the fullest) at ``rate`` msg/s each, from ``start`` to
    ``end`` seconds after the traffic starts."""

    rank: int
    n: int
    rate: float
    start: float
    end: float


@dataclass(frozen=True)
class Plan:
    """Everything the producers do, relative to the start (defaults: the unscheduled skewed load)."""

    namespace: str = "lb/hot"
    bundles: int = 16
    topics: int = 48
    size: int = 2048
    duration: float = 0.0
    tail_rate: float = 160.0
    zipf: float = 0.8
    phase: float = 300.0
    seed: int | None = None
    hot: tuple[HotGroup, ...] = (HotGroup(0, 2, 400.0, 0.0, float("inf")),)

    def rank(self, k: int, phase: int, n_tail: int) -> int:
        """The Zipf rank of tail topic ``k`` in rotation ``phase``: a seeded permutation per rotation (schedule),
        else a shift by 7 per rotation."""
        if self.seed is None:
            return (k + phase * 7) % n_tail
        perm = random.Random(self.seed * 1_000_003 + phase).sample(range(n_tail), n_tail)
        return perm[k]


def read_schedule(path: Path) -> tuple[Plan, list[tuple[float, str, str]]]:
    """The plan and the cluster events (seconds, ``join``|``kill``, broker number or ``non-leader``) of a schedule."""
    import yaml

    doc: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    tail = doc.get("tail", {})
    hot = tuple(HotGroup(int(h.get("bundle_rank", i)), int(h.get("topics", 2)), float(h["rate"]),
                         float(h.get("from", 0)), float(h.get("to", float("inf"))))
                for i, h in enumerate(doc.get("hot", [])))
    plan = Plan(namespace=str(doc.get("namespace", "lb/hot")), bundles=int(doc.get("bundles", 16)),
                topics=int(doc.get("topics", 48)), size=int(doc.get("size", 2048)),
                duration=float(doc["minutes"]) * 60, tail_rate=float(tail.get("rate", 160.0)),
                zipf=float(tail.get("zipf", 0.8)), phase=float(tail.get("rotate_every", 300.0)),
                seed=int(doc["seed"]), hot=hot)
    brokers = doc.get("brokers", {})
    events = [(float(e["at"]), "join", str(e["broker"])) for e in brokers.get("join", [])]
    events += [(float(e["at"]), "kill", str(e["broker"])) for e in brokers.get("kill", [])]
    return plan, sorted(events)


def http(method: str, url: str, body: object | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Guava's ``Hashing.murmur3_32_fixed()`` (what Pulsar's ``Murmur3_32Hash`` uses to place a topic in a bundle)."""
    c1, c2, h = 0xCC9E2D51, 0x1B873593, seed
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    k = 0
    rest = data[n:]
    for j, b in enumerate(rest):
        k |= b << (8 * j)
    if rest:
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def bundle_of(topic: str, boundaries: list[str]) -> str:
    """The bundle range of ``topic`` (``NamespaceBundleFactory.getBundle``: the range holding its hash)."""
    code = murmur3_32(topic.encode("utf-8"))
    bounds = [int(b, 16) for b in boundaries]
    for lo, hi in itertools.pairwise(bounds):
        if lo <= code < hi or (hi == bounds[-1] and code == hi):
            return f"0x{lo:08x}_0x{hi:08x}"
    return "?"


def hot_topics(plan: Plan, by_bundle: dict[str, list[str]]) -> list[tuple[HotGroup, list[str]]]:
    """Each hot group's topics: the ``rank``-th fullest bundle (ties: the lower range first), its first ``n``."""
    ranked = sorted(by_bundle, key=lambda b: (-len(by_bundle[b]), b))
    return [(g, by_bundle[ranked[g.rank]][:g.n]) for g in plan.hot]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-url")
    ap.add_argument("--service-url")
    ap.add_argument("--cluster", default="lbreplay-live")
    ap.add_argument("--schedule", type=Path, default=None, help="a YAML schedule (replaces the traffic flags)")
    ap.add_argument("--print-events", action="store_true", help="print the schedule's cluster events and exit")
    ap.add_argument("--namespace", default="lb/hot")
    ap.add_argument("--bundles", type=int, default=16)
    ap.add_argument("--topics", type=int, default=48)
    ap.add_argument("--hot-rate", type=float, default=400.0, help="msg/s of each of the two hot topics")
    ap.add_argument("--hot-owner", action="store_true",
                    help="every topic of the broker owning the most topics is hot (at --hot-rate), not one bundle's two")
    ap.add_argument("--tail-rate", type=float, default=160.0, help="msg/s of the top Zipf topic")
    ap.add_argument("--zipf", type=float, default=0.8)
    ap.add_argument("--phase", type=float, default=300.0, help="seconds between rank rotations")
    ap.add_argument("--size", type=int, default=2048, help="message bytes")
    ap.add_argument("--duration", type=float, default=0.0, help="seconds (0: until SIGTERM)")
    ap.add_argument("--batching", action="store_true",
                    help="batch messages (far less broker CPU per message: the brokers' CPU then hardly differs)")
    a = ap.parse_args()
    if a.schedule is not None:
        plan, events = read_schedule(a.schedule)
        if a.print_events:
            for at, action, broker in events:
                print(f"{at:g} {action} {broker}")
            return 0
    else:
        if a.print_events:
            ap.error("--print-events needs --schedule")
        plan = Plan(namespace=a.namespace, bundles=a.bundles, topics=a.topics, size=a.size, duration=a.duration,
                    tail_rate=a.tail_rate, zipf=a.zipf, phase=a.phase,
                    hot=(HotGroup(0, 2, a.hot_rate, 0.0, float("inf")),))
    if not a.admin_url or not a.service_url:
        ap.error("--admin-url and --service-url are required")
    return produce(a.admin_url.rstrip("/"), a.service_url, a.cluster, plan, a.batching,
                   a.hot_owner and a.schedule is None)


def owners_hot(admin: str, topics: list[str], rate: float) -> list[tuple[HotGroup, list[str]]]:
    """``--hot-owner``: the topics of the broker that owns the most of them (``/lookup/v2/topic``; ties: the lower
    broker URL), as one hot group at ``rate`` msg/s each."""
    owners: dict[str, str] = {}
    for t in topics:
        st, txt = http("GET", f"{admin}/lookup/v2/topic/{t.replace('://', '/')}")
        assert st == 200, (t, st, txt)
        owners[t] = json.loads(txt)["brokerUrl"]
    counts = Counter(owners.values())
    broker = min(counts, key=lambda b: (-counts[b], b))
    hot = [t for t in topics if owners[t] == broker]
    print(f"traffic: --hot-owner: {broker} owns {len(hot)} of {len(topics)} topics", flush=True)
    return [(HotGroup(-1, len(hot), rate, 0.0, float("inf")), hot)]


def produce(admin: str, service_url: str, cluster: str, plan: Plan, batching: bool, hot_owner: bool = False) -> int:
    """Create the namespace, then send each topic's messages at the plan's rates until the end or a signal."""
    import pulsar

    tenant = plan.namespace.split("/")[0]
    st, _ = http("PUT", f"{admin}/admin/v2/tenants/{tenant}", {"allowedClusters": [cluster], "adminRoles": []})
    assert st in (204, 409), st
    st, txt = http("PUT", f"{admin}/admin/v2/namespaces/{plan.namespace}", {"bundles": {"numBundles": plan.bundles}})
    assert st in (204, 409), (st, txt)
    topics = [f"persistent://{plan.namespace}/t-{i:02d}" for i in range(plan.topics)]
    st, txt = http("GET", f"{admin}/admin/v2/namespaces/{plan.namespace}/bundles")
    boundaries = json.loads(txt)["boundaries"]
    by_bundle: dict[str, list[str]] = {}
    for t in topics:
        by_bundle.setdefault(bundle_of(t, boundaries), []).append(t)
    groups = hot_topics(plan, by_bundle)
    hot = [t for _, ts in groups for t in ts]
    tail = [t for t in topics if t not in hot]
    for g, ts in groups:
        print(f"traffic: hot {ts} at {g.rate} msg/s each from {g.start:g} s to {g.end:g} s", flush=True)
    print(f"traffic: {len(tail)} Zipf topics (top {plan.tail_rate} msg/s, s={plan.zipf}, rotated every "
          f"{plan.phase:g} s, seed {plan.seed})", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    client = pulsar.Client(service_url, operation_timeout_seconds=60,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    producers = {t: client.create_producer(t, batching_enabled=batching, batching_max_publish_delay_ms=10,
                                           block_if_queue_full=False, max_pending_messages=5000) for t in topics}
    if hot_owner:  # every topic is looked up now (the producers connected): the hot load goes to one broker
        groups = owners_hot(admin, topics, plan.hot[0].rate)
        hot = groups[0][1]
        tail = [t for t in topics if t not in hot]
        print(f"traffic: hot {hot} at {plan.hot[0].rate} msg/s each; {len(tail)} Zipf topics", flush=True)
    payload = b"x" * plan.size
    started = time.time()
    credit = {t: 0.0 for t in topics}
    sent = failed = 0
    last = time.time()
    last_log = started

    def cb(res, _msg_id):
        nonlocal failed
        if res != pulsar.Result.Ok:
            failed += 1

    while not stop.is_set():
        now = time.time()
        if plan.duration and now - started >= plan.duration:
            break
        phase = int((now - started) // plan.phase)
        dt = now - last
        last = now
        for k, t in enumerate(tail):
            credit[t] += dt * plan.tail_rate / (plan.rank(k, phase, len(tail)) + 1) ** plan.zipf
        for g, ts in groups:
            if g.start <= now - started < g.end:
                for t in ts:
                    credit[t] += dt * g.rate
        for t in topics:
            n = int(credit[t])
            if n:
                credit[t] -= n
                for _ in range(n):
                    try:
                        producers[t].send_async(payload, cb)
                        sent += 1
                    except Exception:  # noqa: BLE001 -- queue full while a bundle moves: drop, count
                        failed += 1
        if now - last_log >= 60:
            print(f"traffic: {now - started:.0f}s sent={sent} failed={failed} phase={phase}", flush=True)
            last_log = now
        stop.wait(0.02)
    for p in producers.values():
        try:
            p.flush()
            p.close()
        except Exception as exc:  # noqa: BLE001 -- closing after a broker went away
            print(f"traffic: close: {type(exc).__name__}", flush=True)
    client.close()
    print(f"traffic: stopped after {time.time() - started:.0f}s sent={sent} failed={failed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
