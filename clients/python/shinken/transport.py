"""HTTP/1.1 keep-alive transport with a retry policy that never repeats a step.

Retries happen only where they cannot run anything twice:

* connection refused while connecting (the server is still starting): nothing
  was sent, so any request is retried until ``connect_retry_s`` runs out;
* a GET (or close) whose reused keep-alive connection turned out dead: sent
  again once on a fresh connection, since those calls are idempotent.

A reset or step that may have reached the server is never retried; its failure
surfaces as TransportError(sent=True). Before reusing an idle connection the
transport checks whether the server already closed it, and reconnects first,
so a keep-alive timeout does not turn into a lost step.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from . import wire
from .errors import ProtocolError, ShinkenError, TransportError, error_from_wire

_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError, http.client.BadStatusLine)

# Status → code for replies that carry no typed error body.
_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 409: "episode_over",
                 413: "payload_too_large", 422: "invalid_action", 501: "unsupported",
                 502: "sandbox_died", 503: "pool_exhausted", 504: "timeout"}


class Stats:
    """Byte and request counters of one transport (cumulative, plus the last reply)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_reply_bytes = 0
        self.retries = 0

    def __repr__(self) -> str:
        return (f"Stats(requests={self.requests}, sent={self.bytes_sent}, "
                f"received={self.bytes_received}, retries={self.retries})")


class Transport:
    """One keep-alive connection to an envserver, safe to share between threads
    (calls are serialized).

    ``timeout`` bounds every socket wait of a call; ``connect_retry_s`` bounds
    how long a refused connection is retried.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 300.0,
                 connect_retry_s: float = 30.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"envserver url {url!r}: want http://host:port")
        self.url = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._headers = {"Content-Type": wire.CONTENT_TYPE, "Accept": wire.CONTENT_TYPE}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self.connect_retry_s = connect_retry_s
        self._conn: Optional[http.client.HTTPConnection] = None
        self._lock = threading.Lock()
        self.stats = Stats()

    # -- connection management -------------------------------------------

    def close(self) -> None:
        """Closes the connection; the next call opens a new one."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connect(self) -> http.client.HTTPConnection:
        """Returns a connected HTTPConnection, retrying refusals until the deadline."""
        if self._conn is not None and self._conn.sock is not None:
            # An idle keep-alive socket that is readable has been closed by the
            # server (or holds garbage): never send a request into it.
            r, _, _ = select.select([self._conn.sock], [], [], 0)
            if not r:
                return self._conn
            self._drop()
        deadline = time.monotonic() + self.connect_retry_s
        delay = 0.05
        while True:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            try:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._conn = conn
                return conn
            except ConnectionRefusedError as e:
                conn.close()
                if time.monotonic() + delay > deadline:
                    raise TransportError(f"connect {self._host}:{self._port}: {e} "
                                         f"(retried for {self.connect_retry_s:.0f}s)", sent=False) from e
                self.stats.retries += 1
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except OSError as e:
                conn.close()
                raise TransportError(f"connect {self._host}:{self._port}: {e}", sent=False) from e

    # -- requests ----------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
             raw_body: Optional[bytes] = None, content_type: Optional[str] = None) -> Any:
        """Sends one request and returns its decoded reply body.

        A non-2xx reply raises the typed error its body names. ``raw_body``
        sends bytes as they are (tests use it to send malformed bodies).
        """
        status, ctype, data = self.request(method, path, body, idempotent=idempotent,
                                           raw_body=raw_body, content_type=content_type)
        decoded = self._decode(ctype, data, status)
        if 200 <= status < 300:
            return decoded
        if isinstance(decoded, dict) and isinstance(decoded.get("error"), dict):
            raise error_from_wire(decoded["error"], status=status)
        code = _STATUS_CODES.get(status, "internal")
        text = data[:200].decode("utf-8", "replace") if isinstance(data, bytes) else str(decoded)
        raise error_from_wire({"code": code, "message": f"HTTP {status}: {text}"}, status=status)

    def request(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
                raw_body: Optional[bytes] = None,
                content_type: Optional[str] = None) -> Tuple[int, str, bytes]:
        """Sends one request; returns (status, content type, body bytes)."""
        payload = raw_body if raw_body is not None else (wire.pack(body) if body is not None else None)
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        with self._lock:
            attempts = 2 if idempotent else 1
            for attempt in range(attempts):
                conn = self._connect()
                try:
                    try:
                        conn.request(method, self._prefix + path, body=payload, headers=headers)
                    except (BrokenPipeError, ConnectionResetError):
                        # The server may have answered early and closed (e.g.
                        # 413 for an oversized body): read that answer if any.
                        if conn.sock is None:
                            raise
                    resp = conn.getresponse()
                    data = resp.read()
                except _STALE as e:
                    self._drop()
                    if attempt + 1 < attempts:
                        self.stats.retries += 1
                        continue
                    raise TransportError(f"{method} {path}: connection lost: {e!r}", sent=True) from e
                except (socket.timeout, TimeoutError) as e:
                    self._drop()
                    raise TransportError(f"{method} {path}: no reply within {self.timeout}s", sent=True) from e
                except OSError as e:
                    self._drop()
                    raise TransportError(f"{method} {path}: {e!r}", sent=True) from e
                self.stats.requests += 1
                self.stats.bytes_sent += len(payload or b"")
                self.stats.bytes_received += len(data)
                self.stats.last_reply_bytes = len(data)
                if resp.will_close:
                    self._drop()
                return resp.status, resp.getheader("Content-Type", ""), data
        raise AssertionError("unreachable")

    @staticmethod
    def _decode(ctype: str, data: bytes, status: int) -> Any:
        if not data:
            return None
        try:
            if "msgpack" in ctype:
                return wire.unpack(data)
            if "json" in ctype:
                return json.loads(data)
        except Exception as e:  # a body that claims a type and is not it
            if 200 <= status < 300:
                raise ProtocolError(f"undecodable {ctype} reply: {e}") from e
            return data
        if 200 <= status < 300:
            return data
        return data
