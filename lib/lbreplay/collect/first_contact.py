"""``lbreplay collect --check``: connect to what ``collect`` was given, list what it would record and what it lacks.

Per target: reachable or not (:mod:`lbreplay.collect.reachability`); through the admin URLs one poll of every
request ``collect`` makes (:class:`lbreplay.collect.admin.AdminPoller`): the brokers, the leader, the namespaces,
and each request refused (HTTP 401/403: a permission the credentials lack) or failed; in the metadata store
(``ModularLoadManagerImpl``'s znodes) the brokers under ``/loadbalance/brokers`` and the kind of each report
(``LocalBrokerData``: modular load manager, ``BrokerLookupData``: extensible), the bundle-data and time-average
znodes and the leader (``/loadbalance/leader``, ``/loadbalance/extension/leader``); for the service URL, which of
the extensible load manager's system topics exist. Nothing is written. Exit 0 when everything is reachable and
readable, else 3 with the problems listed (the last line names how many and the first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lbreplay.collect.admin import AdminPoller, refusal
from lbreplay.collect.auth import ClientAuth
from lbreplay.collect.extensible import BROKER_LOAD_DATA_TOPIC, SERVICE_UNIT_STATE_TOPIC, TOP_BUNDLES_TOPIC
from lbreplay.collect.metadata_store import (
    BROKERS,
    BUNDLE_DATA,
    LEADER,
    ROOT,
    TIME_AVERAGE,
    connect,
    is_load_report,
    zk_hosts,
)
from lbreplay.collect.reachability import probe_all, targets_of
from lbreplay.errors import InvalidInputError

EXTENSION_LEADER = f"{ROOT}/extension/leader"
ZK_CONNECT_S = 10.0
MAX_BUNDLE_NODES = 100_000  # the bundle-data walk stops counting here


@dataclass
class Findings:
    """What the check found: lines to print and the problems (each one line)."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)

    def problem(self, line: str) -> None:
        self.problems.append(line)
        self.lines.append(f"  ! {line}")


def _leader_name(body: Any) -> str:
    """``LeaderBroker`` JSON -> its broker id or URL."""
    if isinstance(body, dict):
        return str(body.get("brokerId") or body.get("serviceUrl") or body)
    return str(body)


def check_admin(poller: AdminPoller, found: Findings) -> str | None:
    """One poll of every admin request ``collect`` makes; its answers and refusals. Returns the first admin URL
    that answered (None: none did)."""
    lines = poller.poll()
    for base in poller.urls:
        own = {ln["source"]: ln.get("status") for ln in lines if ln["admin_url"] == base}
        found.add(f"admin {base}: load-report {own.get('load-report')}, topics {own.get('topics')} (HTTP status)")
    by_source = {ln["source"]: ln for ln in lines if ln.get("status") == 200}
    if "leader" in by_source:
        found.add(f"  leader (brokers/leaderBroker): {_leader_name(by_source['leader'].get('body'))}")
    if "brokers" in by_source:
        brokers = by_source["brokers"].get("body") or []
        found.add(f"  active brokers: {len(brokers)} ({', '.join(map(str, brokers))})")
    elif not any(ln["source"] == "brokers" for ln in lines) and any(ln.get("status") == 200 for ln in lines):
        found.problem("admin: cannot tell the cluster (GET /admin/v2/clusters lists none or several): give --cluster")
    policies = [ln for ln in lines if ln["source"] == "namespace-policies"]
    found.add(f"  namespaces: {sum(ln.get('status') == 200 for ln in policies)} of {len(policies)} policies readable")
    for rec in poller.refused:
        found.problem(f"admin: {refusal(rec)}")
    return next((ln["admin_url"] for ln in lines if ln.get("status") == 200), None)


def _count_bundles(client: Any, path: str, depth: int = 0, seen: int = 0) -> int:
    """Bundle-data znodes under ``path`` (tenant/namespace[/cluster]/range), at most :data:`MAX_BUNDLE_NODES`."""
    from lbreplay.collect.metadata_store import classify

    count = 0
    for child in client.get_children(path):
        full = f"{path}/{child}"
        if classify(full) is not None:
            count += 1
        elif depth < 3:
            count += _count_bundles(client, full, depth + 1, seen + count)
        if seen + count >= MAX_BUNDLE_NODES:
            break
    return count


def _zk_leader(client: Any, path: str) -> str | None:
    if not client.exists(path):
        return None
    data, _ = client.get(path)
    try:
        return _leader_name(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return f"{len(data)} bytes (not JSON)"


def _zk_overview(client: Any, found: Findings) -> None:
    if not client.exists(ROOT):
        found.problem(f"--metadata-store: no {ROOT} znode (not a Pulsar metadata store, or a wrong /chroot)")
        return
    brokers = sorted(client.get_children(BROKERS)) if client.exists(BROKERS) else []
    kinds = {}
    for b in brokers:
        data, _ = client.get(f"{BROKERS}/{b}")
        kinds[b] = "LocalBrokerData" if is_load_report(data) else "BrokerLookupData (extensible: loads in topics)"
    found.add(f"  {BROKERS}: {len(brokers)} broker(s)" + "".join(f"\n    {b}: {k}" for b, k in kinds.items()))
    bundles = _count_bundles(client, BUNDLE_DATA) if client.exists(BUNDLE_DATA) else 0
    averages = len(client.get_children(TIME_AVERAGE)) if client.exists(TIME_AVERAGE) else 0
    found.add(f"  {BUNDLE_DATA}: {bundles} bundle(s); {TIME_AVERAGE}: {averages} broker(s)")
    leaders = {p: _zk_leader(client, p) for p in (LEADER, EXTENSION_LEADER)}
    found.add("  leader: " + ("; ".join(f"{p} -> {v}" for p, v in leaders.items() if v) or "none elected"))


def check_metadata_store(metadata_store: str, found: Findings) -> None:
    """Connect (bounded) and read what the recorder watches; a refused read (NoAuth) is a missing permission."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoAuthError

    client = KazooClient(hosts=zk_hosts(metadata_store), timeout=ZK_CONNECT_S)
    if not connect(client, ZK_CONNECT_S):
        found.problem(f"--metadata-store {metadata_store}: TCP open but no ZooKeeper session within {ZK_CONNECT_S:g} s")
        return
    try:
        found.add(f"metadata store {metadata_store}: connected")
        _zk_overview(client, found)
    except NoAuthError as exc:
        found.problem(f"--metadata-store: reading {getattr(exc, 'path', None) or ROOT} refused (NoAuth: the "
                      "ZooKeeper ACL does not let this client read it)")
    except KazooException as exc:
        found.problem(f"--metadata-store: {type(exc).__name__} while reading {ROOT}")
    finally:
        client.stop()
        client.close()


def check_service(service_url: str, admin: AdminPoller | None, up: str | None, found: Findings) -> None:
    """The extensible load manager's system topics: ``pulsar-client`` importable, the topics listed by the admin
    API (``/admin/v2/{non-persistent,persistent}/pulsar/system``)."""
    try:
        import pulsar  # noqa: F401 -- only whether it is installed
    except ImportError:
        found.problem("--service-url: the Python package pulsar-client is not installed")
    if admin is None or up is None:
        found.add(f"service URL {service_url}: system topics not listed (needs a reachable --admin-url)")
        return
    listed: set[str] = set()
    for kind in ("non-persistent", "persistent"):
        rec = admin.get(up, f"/admin/v2/{kind}/pulsar/system")
        if rec.get("status") == 200 and isinstance(rec.get("body"), list):
            listed |= {str(t).split("-partition-")[0] for t in rec["body"]}
        else:
            found.problem(f"admin: {refusal(rec)}")
    for topic in (BROKER_LOAD_DATA_TOPIC, TOP_BUNDLES_TOPIC, SERVICE_UNIT_STATE_TOPIC):
        found.add(f"  {topic}: {'exists' if topic in listed else 'not listed (a modular cluster has none)'}")


def check_command(admin_urls: list[str], metadata_store: str | None, service_url: str | None,
                  cluster: str | None, auth: ClientAuth) -> Findings:
    """Print what ``collect`` would record and the problems; raise :class:`InvalidInputError` (exit 3) if any."""
    found = Findings()
    targets = targets_of(admin_urls, metadata_store, service_url)
    found.add(f"collect --check: {len(targets)} target(s), nothing is recorded")
    probes = probe_all(targets)
    for p in probes:
        (found.add if p.error is None else found.problem)(p.line())
    up = {p.target.value for p in probes if p.error is None}
    admin = answering = None
    if any(u in up for u in admin_urls):
        admin = AdminPoller([u for u in admin_urls if u in up], auth, cluster)
        answering = check_admin(admin, found)
    if metadata_store and metadata_store in up:
        check_metadata_store(metadata_store, found)
    if service_url and service_url in up:
        found.add(f"service URL {service_url}: reachable")
        check_service(service_url, admin, answering, found)
    print("\n".join(found.lines))
    if found.problems:
        print(f"check: {len(found.problems)} problem(s)")
        raise InvalidInputError(f"collect --check: {len(found.problems)} problem(s); first: {found.problems[0]}")
    print("check: OK (everything collect needs is reachable and readable)")
    return found
