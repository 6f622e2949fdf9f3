"""Skewed producer load on a 16-bundle namespace, with the real Pulsar client (PyPI ``pulsar-client``).

Creates tenant/namespace (``--namespace``, ``--bundles`` bundles) through the admin REST API, asks which bundle
each of ``--topics`` topics falls in (``/admin/v2/persistent/<ns>/<topic>/bundle``), then produces: the two
hottest topics are put in the same bundle (together above ``loadBalancerNamespaceBundleMaxMsgRate`` so the
leader splits it), the others get Zipf-distributed rates; every ``--phase`` seconds the Zipf ranks rotate so
brokers' loads change and the shedder has work. Stops on SIGTERM / SIGINT or after ``--duration`` seconds.

usage: python scripts/pulsar/traffic.py --admin-url http://127.0.0.1:18081 --service-url pulsar://127.0.0.1:16651
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import threading
import time
import urllib.request


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-url", required=True)
    ap.add_argument("--service-url", required=True)
    ap.add_argument("--cluster", default="lbreplay-live")
    ap.add_argument("--namespace", default="lb/hot")
    ap.add_argument("--bundles", type=int, default=16)
    ap.add_argument("--topics", type=int, default=48)
    ap.add_argument("--hot-rate", type=float, default=400.0, help="msg/s of each of the two hot topics")
    ap.add_argument("--tail-rate", type=float, default=160.0, help="msg/s of the top Zipf topic")
    ap.add_argument("--zipf", type=float, default=0.8)
    ap.add_argument("--phase", type=float, default=300.0, help="seconds between rank rotations")
    ap.add_argument("--size", type=int, default=2048, help="message bytes")
    ap.add_argument("--duration", type=float, default=0.0, help="seconds (0: until SIGTERM)")
    ap.add_argument("--batching", action="store_true",
                    help="batch messages (far less broker CPU per message: the brokers' CPU then hardly differs)")
    a = ap.parse_args()

    import pulsar

    admin = a.admin_url.rstrip("/")
    tenant = a.namespace.split("/")[0]
    st, _ = http("PUT", f"{admin}/admin/v2/tenants/{tenant}", {"allowedClusters": [a.cluster], "adminRoles": []})
    assert st in (204, 409), st
    st, txt = http("PUT", f"{admin}/admin/v2/namespaces/{a.namespace}", {"bundles": {"numBundles": a.bundles}})
    assert st in (204, 409), (st, txt)
    topics = [f"persistent://{a.namespace}/t-{i:02d}" for i in range(a.topics)]
    st, txt = http("GET", f"{admin}/admin/v2/namespaces/{a.namespace}/bundles")
    boundaries = json.loads(txt)["boundaries"]
    by_bundle: dict[str, list[str]] = {}
    for t in topics:
        by_bundle.setdefault(bundle_of(t, boundaries), []).append(t)
    hot_bundle = max(sorted(by_bundle), key=lambda b: len(by_bundle[b]))
    hot = by_bundle[hot_bundle][:2]
    tail = [t for t in topics if t not in hot]
    print(f"traffic: hot bundle {a.namespace}/{hot_bundle} with {hot} at {a.hot_rate} msg/s each; "
          f"{len(tail)} Zipf topics (top {a.tail_rate} msg/s, s={a.zipf})", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    client = pulsar.Client(a.service_url, operation_timeout_seconds=60,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    producers = {t: client.create_producer(t, batching_enabled=a.batching, batching_max_publish_delay_ms=10,
                                           block_if_queue_full=False, max_pending_messages=5000) for t in topics}
    payload = b"x" * a.size
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
        if a.duration and now - started >= a.duration:
            break
        phase = int((now - started) // a.phase)
        dt = now - last
        last = now
        for k, t in enumerate(tail):
            rank = (k + phase * 7) % len(tail)
            credit[t] += dt * a.tail_rate / (rank + 1) ** a.zipf
        for t in hot:
            credit[t] += dt * a.hot_rate
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
