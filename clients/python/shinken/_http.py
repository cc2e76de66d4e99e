"""A small asyncio HTTP/1.1 keep-alive client: the transport under every call.

Only what the envserver protocol needs: request bodies with Content-Length,
replies with Content-Length, chunked encoding or close-delimited bodies, and a
bounded pool of keep-alive connections. Every read is bounded (header block,
body size) and every request has a deadline.

Retries happen only where they cannot run anything twice:

* a connection that could not be opened: nothing was sent. By default this
  fails at once with a message naming the URL (a wrong port should not hang a
  trainer); ``connect_retry_s`` > 0 retries refusals for that long, for callers
  that start the server and the client together;
* an idempotent request (GET, close) whose reused keep-alive connection turned
  out dead: sent once more on a fresh connection.

A reset or step that may have reached the server is never retried here; its
failure surfaces as TransportError(sent=True). (AsyncClient.step resends a step
that carries a request_id, which the server answers without running it twice.) An idle connection the server already
closed is never reused, and connections idle longer than ``max_idle_s`` are
dropped rather than risk racing the server's own idle close.

There is no global lock: each request holds its own connection for the
duration of its exchange; ``max_conns`` bounds how many are open at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.parse
from collections import deque
from typing import Any, Deque, Dict, Optional, Tuple

from . import wire
from .errors import ProtocolError, TransportError, error_from_wire

# Status → code for replies that carry no typed error body.
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found", 409: "episode_over",
                413: "payload_too_large", 422: "invalid_action", 501: "unsupported",
                502: "sandbox_died", 503: "pool_exhausted", 504: "timeout"}

MAX_HEADER_BYTES = 64 << 10
MAX_REPLY_BYTES = 1 << 30  # 64 raw 1920x1080 frames are ~400 MB


class Stats:
    """Byte and request counters of one transport (cumulative, plus the last reply)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_reply_bytes = 0
        self.retries = 0
        self.step_retries = 0  # steps resent with their request_id (AsyncClient.step)
        self.connections_opened = 0
        # Each request's round trip (request written → whole reply read), the
        # most recent last: what the wire and the server took, for telling the
        # client's own overhead apart in benchmarks.
        self.rtts: Deque[float] = deque(maxlen=4096)

    def __repr__(self) -> str:
        return (f"Stats(requests={self.requests}, sent={self.bytes_sent}, "
                f"received={self.bytes_received}, retries={self.retries}, step_retries={self.step_retries}, "
                f"connections={self.connections_opened})")


class _Conn:
    __slots__ = ("reader", "writer", "idle_since", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.idle_since = time.monotonic()
        self.reused = False

    def alive(self, max_idle_s: float) -> bool:
        return (not self.reader.at_eof() and not self.writer.is_closing()
                and not self.reader._buffer  # type: ignore[attr-defined]  # unsolicited bytes: not ours
                and time.monotonic() - self.idle_since < max_idle_s)

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # already torn down by the loop
            pass


class _Dead(Exception):
    """A reused connection failed before any reply byte arrived."""


class AsyncTransport:
    """A pool of keep-alive connections to one envserver.

    Use from a single event loop (the one that first calls it). ``timeout`` is
    the default per-request deadline (connect + send + whole reply);
    ``connect_timeout`` bounds opening a connection.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 300.0,
                 connect_timeout: float = 5.0, connect_retry_s: float = 0.0, max_conns: int = 256,
                 max_idle_s: float = 60.0, max_reply_bytes: int = MAX_REPLY_BYTES):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"envserver url {url!r}: want http://host:port")
        self.url = url.rstrip("/")
        self.host = u.hostname
        self.port = u.port or 80
        self._prefix = u.path.rstrip("/")
        self.token = token
        hdr = f"Host: {u.netloc}\r\nAccept: {wire.CONTENT_TYPE}\r\n"
        if token:
            hdr += f"Authorization: Bearer {token}\r\n"
        self._common = hdr
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.connect_retry_s = connect_retry_s
        self.max_idle_s = max_idle_s
        self.max_reply_bytes = max_reply_bytes
        self._idle: Deque[_Conn] = deque()
        self._open: "set[_Conn]" = set()
        self._slots = asyncio.Semaphore(max_conns) if max_conns > 0 else None
        self._closed = False
        self.stats = Stats()

    # -- connections -------------------------------------------------------------

    async def _dial(self) -> _Conn:
        deadline = time.monotonic() + self.connect_retry_s
        delay = 0.05
        while True:
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, limit=MAX_HEADER_BYTES),
                    self.connect_timeout)
            except (ConnectionRefusedError, OSError, asyncio.TimeoutError) as e:
                refused = isinstance(e, ConnectionRefusedError)
                if refused and time.monotonic() + delay <= deadline:
                    self.stats.retries += 1
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                why = "timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or repr(e))
                hint = " (is envserver running there? set SHINKEN_URL)" if refused else ""
                raise TransportError(f"cannot connect to envserver at {self.url}: {why}{hint}",
                                     sent=False) from None
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.stats.connections_opened += 1
            c = _Conn(r, w)
            self._open.add(c)
            return c

    def _take_idle(self) -> Optional[_Conn]:
        while self._idle:
            c = self._idle.pop()  # most recently used first: warmest socket
            if c.alive(self.max_idle_s):
                c.reused = True
                return c
            self._discard(c)
        return None

    def _discard(self, c: _Conn) -> None:
        self._open.discard(c)
        c.close()

    def _release(self, c: _Conn, keep: bool) -> None:
        if keep and not self._closed:
            c.idle_since = time.monotonic()
            self._idle.append(c)
        else:
            self._discard(c)

    async def aclose(self) -> None:
        """Closes every connection; calls after this fail."""
        self._closed = True
        conns = list(self._open)
        self._idle.clear()
        self._open.clear()
        for c in conns:
            c.close()
        for c in conns:
            try:
                await asyncio.wait_for(c.writer.wait_closed(), 1.0)
            except Exception:  # best effort: the socket is closed either way
                pass

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # -- requests ------------------------------------------------------------------

    async def call(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
                   raw_body: Optional[bytes] = None, content_type: Optional[str] = None,
                   timeout: Optional[float] = None) -> Any:
        """Sends one request and returns its decoded reply body; a non-2xx
        reply raises the typed error its body names."""
        status, ctype, data = await self.request(method, path, body, idempotent=idempotent,
                                                 raw_body=raw_body, content_type=content_type,
                                                 timeout=timeout)
        return decode_reply(status, ctype, data)

    async def request(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
                      raw_body: Optional[bytes] = None, content_type: Optional[str] = None,
                      timeout: Optional[float] = None) -> Tuple[int, str, bytes]:
        """Sends one request; returns (status, content type, body bytes)."""
        if self._closed:
            raise TransportError(f"{method} {path}: client is closed", sent=False)
        payload = raw_body if raw_body is not None else (wire.pack(body) if body is not None else b"")
        head = (f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._common}"
                f"Content-Type: {content_type or wire.CONTENT_TYPE}\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode("latin-1")
        limit = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._exchange(method, path, head, payload, idempotent), limit)
        except asyncio.TimeoutError:
            raise TransportError(f"{method} {path}: no reply from {self.url} within {limit:g}s",
                                 sent=True, timed_out=True) from None

    async def _exchange(self, method: str, path: str, head: bytes, payload: bytes,
                        idempotent: bool) -> Tuple[int, str, bytes]:
        if self._slots is not None:
            await self._slots.acquire()
        try:
            for attempt in range(2):
                c = self._take_idle() or await self._dial()
                t0 = time.perf_counter()
                try:
                    status, ctype, data, keep = await self._roundtrip(c, head, payload)
                except _Dead as e:
                    # A kept-alive socket died under us before any reply byte.
                    # Only an idempotent call may go again (nothing can run twice).
                    self._discard(c)
                    if idempotent and attempt == 0:
                        self.stats.retries += 1
                        continue
                    raise TransportError(f"{method} {path}: connection lost: {e}", sent=True) from None
                except BaseException:
                    self._discard(c)  # cancelled or failed mid-exchange: the stream is unusable
                    raise
                self._release(c, keep)
                self.stats.rtts.append(time.perf_counter() - t0)
                self.stats.requests += 1
                self.stats.bytes_sent += len(payload)
                self.stats.bytes_received += len(data)
                self.stats.last_reply_bytes = len(data)
                return status, ctype, data
            raise AssertionError("unreachable")
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _roundtrip(self, c: _Conn, head: bytes, payload: bytes) -> Tuple[int, str, bytes, bool]:
        r, w = c.reader, c.writer
        try:
            w.write(head)
            if payload:
                w.write(payload)
            await w.drain()
        except (ConnectionError, OSError) as e:
            # The server may have answered early and closed (e.g. 413 for an
            # oversized body): read that answer if there is one.
            if not r._buffer and r.at_eof():  # type: ignore[attr-defined]
                raise _Dead(repr(e)) from None
        try:
            line = await r.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _Dead("closed before replying") from None
            raise TransportError("reply cut short in the status line", sent=True) from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("reply status line over the header cap") from None
        except (ConnectionError, OSError) as e:
            raise _Dead(repr(e)) from None
        try:
            return await self._read_reply(r, line)
        except asyncio.IncompleteReadError:
            raise TransportError("connection closed mid-reply", sent=True) from None
        except (ConnectionError, OSError) as e:
            raise TransportError(f"connection lost mid-reply: {e!r}", sent=True) from None
        except asyncio.LimitOverrunError:
            raise ProtocolError(f"reply header block over {MAX_HEADER_BYTES} bytes") from None

    async def _read_reply(self, r: asyncio.StreamReader, line: bytes) -> Tuple[int, str, bytes, bool]:
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x reply: {line[:80]!r}")
        status = int(parts[1])
        http10 = parts[0] == b"HTTP/1.0"
        headers: Dict[str, str] = {}
        total = len(line)
        while True:
            h = await r.readuntil(b"\r\n")
            total += len(h)
            if total > MAX_HEADER_BYTES:
                raise ProtocolError(f"reply header block over {MAX_HEADER_BYTES} bytes")
            if h == b"\r\n":
                break
            k, sep, v = h.decode("latin-1").partition(":")
            if not sep:
                raise ProtocolError(f"malformed reply header {h[:80]!r}")
            headers[k.strip().lower()] = v.strip()
        conn_hdr = headers.get("connection", "").lower()
        keep = not (http10 or "close" in conn_hdr)
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            data = await self._read_chunked(r)
        elif "content-length" in headers:
            try:
                n = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"bad Content-Length {headers['content-length']!r}") from None
            if n < 0 or n > self.max_reply_bytes:
                raise ProtocolError(f"reply of {n} bytes over the {self.max_reply_bytes}-byte cap")
            data = await r.readexactly(n)
        elif status in (204, 304) or 100 <= status < 200:
            data = b""
        else:  # delimited by close
            data = await r.read(self.max_reply_bytes + 1)
            buf = bytearray(data)
            while data and len(buf) <= self.max_reply_bytes:
                data = await r.read(self.max_reply_bytes + 1 - len(buf))
                buf += data
            if len(buf) > self.max_reply_bytes:
                raise ProtocolError(f"reply over the {self.max_reply_bytes}-byte cap")
            data, keep = bytes(buf), False
        return status, headers.get("content-type", ""), data, keep

    async def _read_chunked(self, r: asyncio.StreamReader) -> bytes:
        buf = bytearray()
        while True:
            size_line = await r.readuntil(b"\r\n")
            try:
                n = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_line[:40]!r}") from None
            if n == 0:
                while (await r.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return bytes(buf)
            if len(buf) + n > self.max_reply_bytes:
                raise ProtocolError(f"reply over the {self.max_reply_bytes}-byte cap")
            buf += await r.readexactly(n)
            await r.readexactly(2)


def decode_body(ctype: str, data: bytes, status: int) -> Any:
    if not data:
        return None
    try:
        if "msgpack" in ctype:
            return wire.unpack(data)
        if "json" in ctype:
            return json.loads(data)
    except Exception as e:  # a body that claims a type and is not it
        if 200 <= status < 300:
            raise ProtocolError(f"undecodable {ctype} reply: {e}") from None
        return data
    return data


def decode_reply(status: int, ctype: str, data: bytes) -> Any:
    """The decoded body of a 2xx reply, or raises the typed error of any other."""
    decoded = decode_body(ctype, data, status)
    if 200 <= status < 300:
        return decoded
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), dict):
        raise error_from_wire(decoded["error"], status=status)
    code = STATUS_CODES.get(status, "internal")
    text = data[:200].decode("utf-8", "replace")
    raise error_from_wire({"code": code, "message": f"HTTP {status}: {text}"}, status=status)
