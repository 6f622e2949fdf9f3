"""A local HTTP server answering like a Pulsar admin API whose authorization refuses some requests (401 / 403),
for ``collect``'s first-contact tests (a real Pulsar with authorization is scripts/pulsar/'s, too slow here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answers = dict[str, tuple[int, Any]]  # request path -> (HTTP status, JSON body)


@contextmanager
def admin_server(answers: Answers, default: tuple[int, Any] = (401, {"reason": "unauthorized"})) -> Iterator[str]:
    """Serve ``answers`` on 127.0.0.1 (any other path: ``default``); yields the admin URL; stops on exit."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 -- http.server's name
            status, body = answers.get(self.path, default)
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def pulsar_answers(broker: str, refuse: tuple[str, ...] = ()) -> Answers:
    """A one-broker cluster ``c1`` with namespace ``public/default``; the ``refuse`` paths answer 403."""
    ok: Answers = {
        "/admin/v2/broker-stats/load-report": (200, {"loadReportType": "LocalBrokerData", "bundles": []}),
        "/admin/v2/broker-stats/topics": (200, {}),
        "/admin/v2/brokers/leaderBroker": (200, {"brokerId": broker, "serviceUrl": f"http://{broker}"}),
        "/admin/v2/clusters": (200, ["c1"]),
        "/admin/v2/brokers/c1": (200, [broker]),
        "/admin/v2/clusters/c1/namespaceIsolationPolicies": (200, {}),
        "/admin/v2/tenants": (200, ["public"]),
        "/admin/v2/namespaces/public": (200, ["public/default"]),
        "/admin/v2/namespaces/public/default": (200, {"bundles": {"boundaries": ["0x00000000", "0xffffffff"]}}),
    }
    for path in refuse:
        ok[path] = (403, {"reason": "Don't have permission to administrate resources on this tenant"})
    return ok
