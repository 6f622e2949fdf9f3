"""One poll of the Pulsar admin REST API (``/admin/v2``), written as one ``collect/admin/<stamp>.jsonl`` file.

Per admin URL (each broker's own view): ``broker-stats/load-report`` (the broker's current ``LocalBrokerData``)
and ``broker-stats/topics`` (per-topic stats grouped by namespace and bundle, for ``topic_load``). Once per poll,
from the first URL that answers: the leader (``brokers/leaderBroker``), the active brokers
(``brokers/<cluster>``), the namespace isolation policies (``clusters/<cluster>/namespaceIsolationPolicies``),
and every namespace's policies (``namespaces/<tenant>/<ns>``, whose ``bundles`` are the bundle boundaries).
An unreachable broker or a failed request is a line with ``status`` null and the error (the broker is
recorded as absent from that poll), never a crash.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lbreplay.collect.auth import ClientAuth
from lbreplay.collect.layout import atomic_write


def stamp(ms: int) -> str:
    """``20260102T030405.678Z`` (UTC, millisecond precision) for file names."""
    dt = datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    return dt.strftime("%Y%m%dT%H%M%S.") + f"{ms % 1000:03d}Z"


class AdminPoller:
    """Polls ``admin_urls`` with ``requests`` (auth from :class:`ClientAuth`)."""

    def __init__(self, admin_urls: list[str], auth: ClientAuth, cluster: str | None, timeout_s: float = 10.0) -> None:
        import requests

        self.urls = [u.rstrip("/") for u in admin_urls]
        self.session = requests.Session()
        self.kwargs = auth.requests_kwargs()
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.polls = 0
        self.failures = 0  # requests without an HTTP answer (connection refused, timeout)
        self.answered = 0  # requests answered 200
        self.refused: list[dict[str, Any]] = []  # this poll's requests not answered 200 (status, or the error)

    def get(self, base: str, path: str) -> dict[str, Any]:
        """One GET -> a record line (status, body or error); never raises."""
        import requests

        started = time.time()
        rec: dict[str, Any] = {"admin_url": base, "request": path, "at": int(started * 1000)}
        try:
            resp = self.session.get(base + path, timeout=self.timeout_s, **self.kwargs)
            rec["status"] = resp.status_code
            try:
                rec["body"] = resp.json()
            except ValueError:
                rec["body"] = resp.text[:2000]
        except requests.RequestException as exc:
            rec["status"] = None
            rec["error"] = type(exc).__name__
            self.failures += 1
        rec["ms"] = int((time.time() - started) * 1000)
        if rec["status"] == 200:
            self.answered += 1
        else:
            self.refused.append({k: rec.get(k) for k in ("admin_url", "request", "status", "error")})
        return rec

    def poll(self) -> list[dict[str, Any]]:
        """All requests of one poll, as record lines (``source`` names what each is)."""
        lines: list[dict[str, Any]] = []
        self.refused = []
        for base in self.urls:
            lines.append({"source": "load-report", **self.get(base, "/admin/v2/broker-stats/load-report")})
            lines.append({"source": "topics", **self.get(base, "/admin/v2/broker-stats/topics")})
        up = next((ln["admin_url"] for ln in lines if ln.get("status") == 200), None)
        if up is not None:
            lines.append({"source": "leader", **self.get(up, "/admin/v2/brokers/leaderBroker")})
            cluster = self.cluster
            if not cluster:
                clusters = self.get(up, "/admin/v2/clusters")
                body = clusters.get("body")
                cluster = body[0] if isinstance(body, list) and len(body) == 1 else None
            if cluster:
                lines.append({"source": "brokers", **self.get(up, f"/admin/v2/brokers/{quote(cluster)}")})
                lines.append({"source": "isolation-policies",
                              **self.get(up, f"/admin/v2/clusters/{quote(cluster)}/namespaceIsolationPolicies")})
            tenants = self.get(up, "/admin/v2/tenants")
            for tenant in tenants.get("body") or [] if tenants.get("status") == 200 else []:
                nss = self.get(up, f"/admin/v2/namespaces/{quote(tenant)}")
                for ns in nss.get("body") or [] if nss.get("status") == 200 else []:
                    lines.append({"source": "namespace-policies", "namespace": ns,
                                  **self.get(up, f"/admin/v2/namespaces/{ns}")})
        self.polls += 1
        return lines

    def write(self, out: Path, lines: list[dict[str, Any]], at_ms: int) -> Path:
        """The poll as ``collect/admin/<stamp>.jsonl`` (atomic)."""
        import json

        path = out / "collect" / "admin" / f"{stamp(at_ms)}.jsonl"
        atomic_write(path, "".join(json.dumps(ln, sort_keys=True) + "\n" for ln in lines).encode("utf-8"))
        return path


def refusal(rec: dict[str, Any]) -> str:
    """One refused request for messages: ``GET http://b:8080/admin/v2/brokers/leaderBroker -> HTTP 403 (forbidden:
    the role lacks this permission)`` or ``… -> ConnectionError (no answer)``."""
    status = rec.get("status")
    where = f"GET {rec.get('admin_url')}{rec.get('request')}"
    if status is None:
        return f"{where} -> {rec.get('error') or 'error'} (no answer)"
    hint = {401: " (unauthorized: give --auth-plugin/--auth-params)",
            403: " (forbidden: the role lacks this permission; a superuser or admin role reads every endpoint)"}
    return f"{where} -> HTTP {status}{hint.get(int(status), '')}"
