"""``lbreplay collect``: run the recorders until ``--duration`` has passed or SIGTERM / SIGINT arrives.

A stop lets the admin poll in flight finish, drains the metadata-store events already reported and closes every
file, so nothing is half-written; the session's start and end (with counts) go to ``collect/session.jsonl``.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbreplay.collect.admin import AdminPoller
from lbreplay.collect.auth import ClientAuth
from lbreplay.collect.layout import JsonLines
from lbreplay.collect.leader_log_files import LeaderLogGatherer
from lbreplay.collect.reachability import require_reachable, targets_of
from lbreplay.errors import InvalidInputError, UsageError
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


@dataclass
class Recorders:
    """The recorders of one session (each None when its flag was not given)."""

    admin: AdminPoller | None = None
    zk: Any = None  # MetadataStoreRecorder
    ext: Any = None  # ExtensibleRecorder
    logs: LeaderLogGatherer | None = None

    def counts(self) -> dict[str, Any]:
        c: dict[str, Any] = {}
        if self.zk is not None:
            c.update({f"{k}_versions": v for k, v in self.zk.counts.versions.items() if k != "other"})
            c.update(missed=self.zk.counts.missed, absent=self.zk.counts.absent, errors=self.zk.counts.errors)
        if self.admin is not None:
            c.update(admin_polls=self.admin.polls, admin_answered=self.admin.answered,
                     admin_failures=self.admin.failures)
        if self.ext is not None:
            c.update(self.ext.counts)
        if self.logs is not None:
            c.update(self.logs.counts())
        return c

    def recorded(self) -> bool:
        """Anything recorded at all: an admin answer, a znode version, a system-topic message."""
        zk = self.zk is not None and sum(self.zk.counts.versions.values()) > 0
        ext = self.ext is not None and sum(self.ext.counts.values()) > 0
        return bool((self.admin is not None and self.admin.answered) or zk or ext)

    def stop(self) -> None:
        for rec in (self.zk, self.ext):
            if rec is not None:
                rec.stop()
        if self.logs is not None:
            self.logs.finish()


def _start(rec: Recorders, metadata_store: str | None, service_url: str | None, root: Path, events: JsonLines,
           auth: ClientAuth) -> None:
    if metadata_store:
        from lbreplay.collect.metadata_store import MetadataStoreRecorder

        zk = MetadataStoreRecorder(metadata_store, root, events)
        zk.start()  # InvalidInputError (exit 3) when no session within its connect timeout
        rec.zk = zk
    if service_url:
        from lbreplay.collect.extensible import ExtensibleRecorder

        rec.ext = ExtensibleRecorder(service_url, root, events, auth)
        rec.ext.start()


def _poll_admin(admin: AdminPoller, root: Path, now: float, progress: Progress) -> None:
    from lbreplay.collect.admin import refusal

    lines = admin.poll()
    admin.write(root, lines, int(now * 1000))
    down = [refusal(r) for r in admin.refused if r.get("request") == "/admin/v2/broker-stats/load-report"]
    if down:
        progress.log(f"collect: absent from this poll: {'; '.join(down)}")


def _record(rec: Recorders, stop: threading.Event, started: float, seconds: float | None, interval: float,
            root: Path, progress: Progress) -> None:
    """The loop: an admin poll every ``interval``, the leader logs every second, progress; until stopped."""
    next_poll = time.time()
    while not stop.is_set():
        now = time.time()
        if seconds is not None and now - started >= seconds:
            break
        if rec.admin is not None and now >= next_poll:
            _poll_admin(rec.admin, root, now, progress)
            next_poll = now + interval
        if rec.logs is not None:
            rec.logs.gather()
            for name in rec.logs.take_unnamed():
                progress.log(f"collect: warning: leader log {name}: no host_port in its name or directory; its "
                             "lines are kept without the broker's id")
        detail = ", ".join(f"{k}={v}" for k, v in rec.counts().items())
        elapsed = int(time.time() - started)
        if seconds is not None:
            progress.update(elapsed, detail=detail)
        elif elapsed and elapsed % 60 == 0:
            progress.log(f"collect: {elapsed}s | {detail}")
        stop.wait(min(1.0, max(0.0, next_poll - time.time())) if rec.admin else 1.0)


def _nothing_recorded(rec: Recorders, root: Path, elapsed: float) -> InvalidInputError:
    from lbreplay.collect.admin import refusal

    why = []
    if rec.admin is not None:
        last = rec.admin.refused[-1] if rec.admin.refused else None
        why.append(f"no admin request answered in {rec.admin.polls} poll(s)" + (f" (last: {refusal(last)})" if last else ""))
    if rec.zk is not None:
        why.append("no znode version under /loadbalance")
    if rec.ext is not None:
        why.append("no system-topic message")
    return InvalidInputError(f"collect: nothing recorded into {root} in {elapsed:.0f} s: {'; '.join(why)}")


def collect_command(admin_urls: list[str], metadata_store: str | None, service_url: str | None, out: str | None,
                    cluster: str | None = None, interval: float = 60.0, duration: str | None = None,
                    auth_plugin: str | None = None, auth_params: str | None = None,
                    tls_trust_cert_path: str | None = None, tls_allow_insecure: bool = False,
                    quiet: bool = False, check: bool = False, leader_log_dir: str | None = None) -> dict[str, Any]:
    """Record until the duration ends or a stop signal arrives; returns the session's counts. ``check``: only
    :func:`lbreplay.collect.first_contact.check_command`. Exit 3 when a target is unreachable or nothing was
    recorded."""
    if not admin_urls and not metadata_store and not service_url:
        raise UsageError("give at least one of --admin-url, --metadata-store, --service-url")
    if interval <= 0:
        raise UsageError("--interval must be positive (seconds)")
    seconds = parse_duration(duration)
    auth = ClientAuth.from_flags(auth_plugin, auth_params, tls_trust_cert_path, tls_allow_insecure)
    targets = targets_of(admin_urls, metadata_store, service_url)
    if check:
        from lbreplay.collect.first_contact import check_command

        return {"problems": len(check_command(admin_urls, metadata_store, service_url, cluster, auth).problems)}
    if not out:
        raise UsageError("--out is required: the directory to record into (only --check goes without it)")
    require_reachable(targets)  # exit 3, one line, after bounded retries
    root = Path(out)
    logs = LeaderLogGatherer(Path(leader_log_dir), root) if leader_log_dir else None
    root.mkdir(parents=True, exist_ok=True)
    session = JsonLines(root / "collect" / "session.jsonl")
    events = JsonLines(root / "collect" / "metadata-versions.jsonl")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    started = time.time()
    session.write({"event": "start", "at": int(started * 1000), "admin_urls": admin_urls,
                   "metadata_store": metadata_store, "service_url": service_url, "cluster": cluster,
                   "interval_s": interval, "duration_s": seconds, "auth": auth.describe(),
                   "leader_log_dir": leader_log_dir})
    rec = Recorders(admin=AdminPoller(admin_urls, auth, cluster) if admin_urls else None, logs=logs)
    progress = Progress("collect", int(seconds) if seconds else 1, unit="s", quiet=quiet)
    ran = False
    try:
        _start(rec, metadata_store, service_url, root, events, auth)
        progress.log(f"collect: recording into {root} (metadata store: {metadata_store or '-'}, "
                     f"admin: {len(admin_urls)} URL(s), leader logs: {leader_log_dir or '-'}, "
                     f"auth: {auth.describe()}); stop with SIGTERM or Ctrl-C")
        _record(rec, stop, started, seconds, interval, root, progress)
        ran = True
    finally:
        rec.stop()
        counts = rec.counts()
        session.write({"event": "stop", "at": int(time.time() * 1000), "signal": stop.is_set(), **counts})
        session.close()
        events.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        progress.finish(redraw=ran and seconds is not None and not stop.is_set())
    if not rec.recorded():
        raise _nothing_recorded(rec, root, time.time() - started)
    if not quiet:
        print(f"collected into {root}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        print(f"next: lbreplay ingest --source {root} --cluster <name>")
    return counts
