"""Can ``collect`` reach what it was given? TCP endpoints of the admin URLs, the metadata store and the service URL,
each tried a bounded number of times before the recording starts.

An endpoint nobody answers is an input error (exit 3) named in one line: what it is, ``host:port`` and what was
tried, e.g. ``--metadata-store zk:127.0.0.1:2181: cannot connect to 127.0.0.1:2181 (connection refused; 3 TCP
attempts over 1.5 s)``. A ZooKeeper ensemble (``zk:h1:2181,h2:2181``) or a multi-host service URL
(``pulsar://h1:6650,h2:6650``) is reachable when one of its hosts is, as Pulsar's clients and kazoo fail over.
"""

from __future__ import annotations

import errno
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from lbreplay.collect.metadata_store import zk_hosts
from lbreplay.errors import InvalidInputError, UsageError

ATTEMPTS = 3
CONNECT_TIMEOUT_S = 3.0
BACKOFF_S = 0.5  # before the 2nd attempt; doubled before each later one
ADMIN_PORTS = {"http": 80, "https": 443}
SERVICE_PORTS = {"pulsar": 6650, "pulsar+ssl": 6651}
ZK_PORT = 2181


@dataclass(frozen=True)
class Target:
    """One thing ``collect`` connects to: the flag and value it came from, and its ``(host, port)`` candidates."""

    flag: str
    value: str
    hosts: tuple[tuple[str, int], ...]

    def label(self) -> str:
        return f"{self.flag} {self.value}"


def _host_port(text: str, default: int, where: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` -> (host, port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or str(default)
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, str(default)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{where}: expected host[:port], got {text!r}")
    return host, int(port)


def admin_target(url: str) -> Target:
    """``http(s)://host[:port]`` (``--admin-url``)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ADMIN_PORTS or not parts.hostname:
        raise UsageError(f"--admin-url {url!r}: expected http://host:port or https://host:port")
    try:
        port = parts.port or ADMIN_PORTS[parts.scheme]
    except ValueError:
        raise UsageError(f"--admin-url {url!r}: the port is not a number in 1-65535") from None
    return Target("--admin-url", url, ((parts.hostname, port),))


def metadata_store_target(metadata_store: str) -> Target:
    """``zk:h1:2181[,h2:2181][/chroot]`` (``--metadata-store``): every host of the ensemble."""
    hosts = zk_hosts(metadata_store).split("/", 1)[0]
    pairs = tuple(_host_port(h, ZK_PORT, f"--metadata-store {metadata_store!r}") for h in hosts.split(",") if h.strip())
    if not pairs:
        raise UsageError(f"--metadata-store {metadata_store!r}: no host")
    return Target("--metadata-store", metadata_store, pairs)


def service_target(url: str) -> Target:
    """``pulsar://h1:6650[,h2:6650]`` or ``pulsar+ssl://…`` (``--service-url``)."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep or scheme not in SERVICE_PORTS:
        raise UsageError(f"--service-url {url!r}: expected pulsar://host:6650 or pulsar+ssl://host:6651")
    hosts = rest.split("/", 1)[0]
    pairs = tuple(_host_port(h, SERVICE_PORTS[scheme], f"--service-url {url!r}") for h in hosts.split(",") if h.strip())
    if not pairs:
        raise UsageError(f"--service-url {url!r}: no host")
    return Target("--service-url", url, pairs)


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if exc.errno == errno.ECONNREFUSED:
        return "connection refused"
    return exc.strerror or type(exc).__name__


@dataclass(frozen=True)
class Probe:
    """The outcome of trying one target: ``error`` None when a TCP connection opened."""

    target: Target
    error: str | None
    attempts: int
    seconds: float

    def line(self) -> str:
        where = ", ".join(f"{h}:{p}" for h, p in self.target.hosts)
        if self.error is None:
            return f"{self.target.label()}: reachable ({where})"
        return (f"{self.target.label()}: cannot connect to {where} ({self.error}; {self.attempts} TCP attempts over "
                f"{self.seconds:.1f} s)")


def probe(target: Target, attempts: int = ATTEMPTS, timeout_s: float = CONNECT_TIMEOUT_S,
          backoff_s: float = BACKOFF_S) -> Probe:
    """Open (and close) a TCP connection to one of the target's hosts, up to ``attempts`` rounds with backoff."""
    started = time.monotonic()
    error = "no host"
    for attempt in range(1, attempts + 1):
        for host, port in target.hosts:
            try:
                with socket.create_connection((host, port), timeout=timeout_s):
                    return Probe(target, None, attempt, time.monotonic() - started)
            except OSError as exc:
                error = _reason(exc)
        if attempt < attempts:
            time.sleep(backoff_s * 2 ** (attempt - 1))
    return Probe(target, error, attempts, time.monotonic() - started)


def probe_all(targets: list[Target], attempts: int = ATTEMPTS) -> list[Probe]:
    """Every target probed concurrently (the whole check takes as long as the slowest target)."""
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        return list(pool.map(lambda t: probe(t, attempts), targets))


def targets_of(admin_urls: list[str], metadata_store: str | None, service_url: str | None) -> list[Target]:
    """The targets the flags name (usage errors for malformed values)."""
    out = [admin_target(u) for u in admin_urls]
    if metadata_store:
        out.append(metadata_store_target(metadata_store))
    if service_url:
        out.append(service_target(service_url))
    return out


def require_reachable(targets: list[Target], attempts: int = ATTEMPTS) -> list[Probe]:
    """Raise :class:`InvalidInputError` (exit 3) naming every unreachable target, in one line."""
    probes = probe_all(targets, attempts)
    failed = [p.line() for p in probes if p.error is not None]
    if failed:
        raise InvalidInputError("collect: " + "; ".join(failed))
    return probes
