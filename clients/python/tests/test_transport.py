"""Transport behaviour that the real envserver cannot be made to show on
demand (a refused port, a dropped connection), driven by a small HTTP peer on
real loopback sockets: retries happen only where nothing can run twice."""

import socket
import threading
import time

import pytest

import shinken
from shinken import wire
from shinken.transport import Transport


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Peer:
    """A one-thread HTTP/1.1 peer. ``behave(n, request_bytes)`` returns the
    reply bytes for the n-th request, or None to drop the connection unanswered."""

    def __init__(self, behave, port=None, close_idle_after=None):
        self.behave = behave
        self.close_idle_after = close_idle_after
        self.requests = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port or 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _read_request(self, c):
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                chunk = c.recv(65536)
            except socket.timeout:
                if self._stop.is_set():
                    return None
                continue
            if not chunk:
                return None
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
        while len(body) < n:
            body += c.recv(65536)
        return head + b"\r\n\r\n" + body

    def _serve(self):
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            with c:
                c.settimeout(0.1)
                while True:
                    try:
                        req = self._read_request(c)
                    except (socket.timeout, OSError):
                        break
                    if req is None:
                        break
                    self.requests.append(req)
                    reply = self.behave(len(self.requests), req)
                    if reply is None:
                        break
                    c.sendall(reply)
                    if self.close_idle_after is not None:
                        time.sleep(self.close_idle_after)
                        break

    def close(self):
        self._stop.set()
        self._t.join(5)
        self.sock.close()


def reply(status, body=b"", ctype="application/msgpack"):
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


OK = reply(200, wire.pack({"closed": []}))


@pytest.fixture
def peer_factory():
    peers = []

    def make(*a, **kw):
        p = Peer(*a, **kw)
        peers.append(p)
        return p
    yield make
    for p in peers:
        p.close()


def test_refused_connection_is_retried_until_the_server_starts(peer_factory):
    port = _free_port()
    t = Transport(f"http://127.0.0.1:{port}", connect_retry_s=20, timeout=5)
    late = threading.Timer(0.5, lambda: peer_factory(lambda n, r: OK, port=port))
    late.start()
    try:
        assert t.call("POST", "/v1/step", {"steps": []}) == {"closed": []}
    finally:
        late.join()
    assert t.stats.retries > 0


def test_refused_past_the_deadline_is_a_transport_error():
    t = Transport(f"http://127.0.0.1:{_free_port()}", connect_retry_s=0.3, timeout=5)
    with pytest.raises(shinken.TransportError) as ei:
        t.call("POST", "/v1/step", {"steps": []})
    assert ei.value.sent is False


def test_a_dropped_step_is_never_retried(peer_factory):
    p = peer_factory(lambda n, r: None)
    t = Transport(p.url, timeout=5)
    with pytest.raises(shinken.TransportError) as ei:
        t.call("POST", "/v1/step", {"steps": []})
    assert ei.value.sent is True
    time.sleep(0.2)
    assert len(p.requests) == 1, f"got {len(p.requests)} step requests; want 1"


def test_a_dropped_get_is_retried_once(peer_factory):
    p = peer_factory(lambda n, r: None if n == 1 else reply(200, wire.pack({"protocol": 1})))
    t = Transport(p.url, timeout=5)
    assert t.call("GET", "/v1/spec", idempotent=True) == {"protocol": 1}
    assert len(p.requests) == 2


def test_idle_connection_closed_by_server_is_not_used_for_a_step(peer_factory):
    # The peer closes each connection right after replying, without saying so
    # in its headers: the next step must go out on a fresh connection.
    p = peer_factory(lambda n, r: OK, close_idle_after=0.0)
    t = Transport(p.url, timeout=5)
    t.call("POST", "/v1/step", {"steps": []})
    time.sleep(0.2)
    assert t.call("POST", "/v1/step", {"steps": []}) == {"closed": []}
    assert len(p.requests) == 2


def test_keep_alive_reuses_one_connection(peer_factory):
    conns = []
    p = peer_factory(lambda n, r: OK)
    t = Transport(p.url, timeout=5)
    for _ in range(3):
        t.call("POST", "/v1/close", {"env_ids": []})
        conns.append(t.stats.connections_opened)
    assert conns == [1, 1, 1] and len(p.requests) == 3 and t.open_connections == 1
    t.close()
    assert t.open_connections == 0


@pytest.mark.parametrize("code,cls", sorted(shinken.CODES.items()))
def test_whole_request_errors_are_typed(peer_factory, code, cls):
    status = cls.http_status
    body = wire.pack({"error": {"code": code, "message": "m", "detail": {"k": 1}}})
    p = peer_factory(lambda n, r: reply(status, body))
    with pytest.raises(cls) as ei:
        Transport(p.url, timeout=5).call("POST", "/v1/reset", {"envs": []})
    assert ei.value.status == status and ei.value.code == code and ei.value.detail == {"k": 1}


def test_untyped_error_body_maps_by_status(peer_factory):
    p = peer_factory(lambda n, r: reply(413, b"Request Entity Too Large", "text/plain"))
    with pytest.raises(shinken.PayloadTooLarge):
        Transport(p.url, timeout=5).call("POST", "/v1/reset", {"envs": []})


def test_bearer_token_is_sent(peer_factory):
    p = peer_factory(lambda n, r: OK)
    Transport(p.url, "s3cret", timeout=5).call("POST", "/v1/close", {"env_ids": []})
    assert b"Authorization: Bearer s3cret" in p.requests[0]
    assert b"Content-Type: application/msgpack" in p.requests[0]


def test_no_reply_within_timeout_is_a_transport_error(peer_factory):
    p = peer_factory(lambda n, r: (time.sleep(1.5), OK)[1])
    with pytest.raises(shinken.TransportError) as ei:
        Transport(p.url, timeout=0.5).call("POST", "/v1/step", {"steps": []})
    assert ei.value.sent is True


def test_wrong_port_fails_fast_with_a_clear_message():
    t = Transport(f"http://127.0.0.1:{_free_port()}", timeout=5)
    start = time.monotonic()
    with pytest.raises(shinken.TransportError) as ei:
        t.call("GET", "/v1/spec", idempotent=True)
    assert time.monotonic() - start < 2, "a refused connection must not be retried by default"
    assert ei.value.sent is False and "cannot connect to envserver at" in str(ei.value)


def test_oversized_header_block_is_a_protocol_error(peer_factory):
    big = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (70 << 10) + b"\r\nContent-Length: 0\r\n\r\n"
    p = peer_factory(lambda n, r: big)
    with pytest.raises(shinken.ProtocolError):
        Transport(p.url, timeout=5).call("GET", "/v1/spec", idempotent=True)


def test_reply_over_the_body_cap_is_refused_before_reading(peer_factory):
    p = peer_factory(lambda n, r: b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n")
    t = Transport(p.url, timeout=5)
    with pytest.raises(shinken.ProtocolError):
        t.call("GET", "/v1/spec", idempotent=True)


def test_chunked_reply_is_read(peer_factory):
    body = wire.pack({"closed": ["a"]})
    chunked = (b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nTransfer-Encoding: chunked\r\n\r\n"
               + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    p = peer_factory(lambda n, r: chunked)
    assert Transport(p.url, timeout=5).call("POST", "/v1/close", {"env_ids": []}) == {"closed": ["a"]}


def test_requests_from_many_threads_run_concurrently(peer_factory):
    """No client-wide lock: while one request waits on a slow reply, others
    on the same transport complete."""
    import concurrent.futures as cf
    slow = threading.Event()

    def behave(n, r):
        if b"/slow" in r.split(b"\r\n", 1)[0]:
            slow.wait(5)
        return OK

    # The one-thread peer serves one connection at a time, so use two peers'
    # worth of behaviour through a threaded server instead.
    import socketserver

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                while len(rest) < n:
                    rest += self.request.recv(65536)
                buf = rest[n:]
                self.request.sendall(behave(0, head))

    class S(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        t = Transport(f"http://127.0.0.1:{srv.server_address[1]}", timeout=10)
        with cf.ThreadPoolExecutor(9) as ex:
            slow_f = ex.submit(t.call, "POST", "/slow", {})
            fast = [ex.submit(t.call, "POST", "/fast", {}) for _ in range(8)]
            for f in fast:
                assert f.result(5) == {"closed": []}
            assert not slow_f.done(), "the slow request finished first: the test proved nothing"
            slow.set()
            assert slow_f.result(5) == {"closed": []}
        t.close()
    finally:
        srv.shutdown()
        srv.server_close()
