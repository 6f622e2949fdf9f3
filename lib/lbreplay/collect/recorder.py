"""``lbreplay collect``: run the recorders until ``--duration`` has passed or SIGTERM / SIGINT arrives.

A stop lets the admin poll in flight finish, drains the metadata-store events already reported and closes every
file, so nothing is half-written; the session's start and end (with counts) go to ``collect/session.jsonl``.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from lbreplay.collect.admin import AdminPoller
from lbreplay.collect.auth import ClientAuth
from lbreplay.collect.layout import JsonLines
from lbreplay.errors import UsageError
from lbreplay.progress import Progress


def parse_duration(text: str | None) -> float | None:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d`` -> seconds; None -> until stopped."""
    if text is None or text == "":
        return None
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if t[-1] in mult:
            value = float(t[:-1]) * mult[t[-1]]
        else:
            value = float(t)
    except (ValueError, IndexError):
        raise UsageError(f"--duration {text!r}: use seconds or a number with s/m/h/d, e.g. 15m") from None
    if value <= 0:
        raise UsageError(f"--duration {text!r}: must be positive")
    return value


def collect_command(admin_urls: list[str], metadata_store: str | None, service_url: str | None, out: str,
                    cluster: str | None = None, interval: float = 60.0, duration: str | None = None,
                    auth_plugin: str | None = None, auth_params: str | None = None,
                    tls_trust_cert_path: str | None = None, tls_allow_insecure: bool = False,
                    quiet: bool = False) -> dict[str, Any]:
    """Record until the duration ends or a stop signal arrives; returns the session's counts."""
    if not admin_urls and not metadata_store and not service_url:
        raise UsageError("give at least one of --admin-url, --metadata-store, --service-url")
    if interval <= 0:
        raise UsageError("--interval must be positive (seconds)")
    seconds = parse_duration(duration)
    auth = ClientAuth.from_flags(auth_plugin, auth_params, tls_trust_cert_path, tls_allow_insecure)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    session = JsonLines(root / "collect" / "session.jsonl")
    events = JsonLines(root / "collect" / "metadata-versions.jsonl")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    started = time.time()
    session.write({"event": "start", "at": int(started * 1000), "admin_urls": admin_urls,
                   "metadata_store": metadata_store, "service_url": service_url, "cluster": cluster,
                   "interval_s": interval, "duration_s": seconds, "auth": auth.describe()})
    zk = ext = None
    admin = AdminPoller(admin_urls, auth, cluster) if admin_urls else None
    progress = Progress("collect", int(seconds) if seconds else 1, unit="s", quiet=quiet)
    counts: dict[str, Any] = {}
    try:
        if metadata_store:
            from lbreplay.collect.metadata_store import MetadataStoreRecorder

            zk = MetadataStoreRecorder(metadata_store, root, events)
            zk.start()
        if service_url:
            from lbreplay.collect.extensible import ExtensibleRecorder

            ext = ExtensibleRecorder(service_url, root, events, auth)
            ext.start()
        progress.log(f"collect: recording into {root} (metadata store: {metadata_store or '-'}, "
                     f"admin: {len(admin_urls)} URL(s), auth: {auth.describe()}); stop with SIGTERM or Ctrl-C")
        next_poll = time.time()
        while not stop.is_set():
            now = time.time()
            if seconds is not None and now - started >= seconds:
                break
            if admin is not None and now >= next_poll:
                lines = admin.poll()
                admin.write(root, lines, int(now * 1000))
                down = sorted({ln["admin_url"] for ln in lines if ln.get("status") != 200
                               and ln.get("source") == "load-report"})
                if down:
                    progress.log(f"collect: absent from this poll (no answer): {', '.join(down)}")
                next_poll = now + interval
            counts = _counts(zk, admin, ext)
            detail = ", ".join(f"{k}={v}" for k, v in counts.items())
            elapsed = int(time.time() - started)
            if seconds is not None:
                progress.update(elapsed, detail=detail)
            elif elapsed and elapsed % 60 == 0:
                progress.log(f"collect: {elapsed}s | {detail}")
            stop.wait(min(1.0, max(0.0, next_poll - time.time())) if admin else 1.0)
    finally:
        if zk is not None:
            zk.stop()
        if ext is not None:
            ext.stop()
        counts = _counts(zk, admin, ext)
        session.write({"event": "stop", "at": int(time.time() * 1000), "signal": stop.is_set(), **counts})
        session.close()
        events.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        progress.finish(redraw=seconds is not None and not stop.is_set())
    if not quiet:
        print(f"collected into {root}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        print(f"next: lbreplay ingest --source {root} --cluster <name>")
    return counts


def _counts(zk: Any, admin: AdminPoller | None, ext: Any) -> dict[str, Any]:
    c: dict[str, Any] = {}
    if zk is not None:
        c.update({f"{k}_versions": v for k, v in zk.counts.versions.items() if k != "other"})
        c.update(missed=zk.counts.missed, absent=zk.counts.absent, errors=zk.counts.errors)
    if admin is not None:
        c.update(admin_polls=admin.polls, admin_failures=admin.failures)
    if ext is not None:
        c.update(ext.counts)
    return c
