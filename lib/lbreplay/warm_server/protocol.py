"""The wire between a client and the lake's warm server, over a Unix socket: frames of one kind byte, a 4-byte length
and the payload. One command per connection:

* client -> server: ``q`` the request (JSON: argv, cwd, LBREPLAY_* environment, which of stdin/stdout/stderr are
  terminals), then at most ``c`` (cancel: Ctrl-C); closing the connection cancels too;
* server -> client: ``o`` / ``e`` bytes for stdout / stderr, in the order written, then ``x`` the exit code (JSON),
  or ``f`` (the server cannot run commands: the reason; the client then runs the command itself).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

REQUEST, CANCEL, STDOUT, STDERR, EXIT, FALLBACK = b"q", b"c", b"o", b"e", b"x", b"f"
_HEADER = struct.Struct(">cI")


def send(sock: socket.socket, kind: bytes, payload: bytes = b"", lock: threading.Lock | None = None) -> None:
    frame = _HEADER.pack(kind, len(payload)) + payload
    if lock is None:
        sock.sendall(frame)
        return
    with lock:
        sock.sendall(frame)


def send_json(sock: socket.socket, kind: bytes, value: Any, lock: threading.Lock | None = None) -> None:
    send(sock, kind, json.dumps(value).encode(), lock)


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame ``(kind, payload)``; None when the peer closed the connection."""
    header = _exactly(sock, _HEADER.size)
    if header is None:
        return None
    kind, length = _HEADER.unpack(header)
    payload = _exactly(sock, length) if length else b""
    return None if payload is None else (kind, payload)
