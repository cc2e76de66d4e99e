"""Transport: the sync face of the asyncio HTTP transport (see _http.py for
the connection pool, bounds and retry policy)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _loop
from ._http import AsyncTransport, Stats, decode_reply

__all__ = ["Transport", "Stats"]


class Transport:
    """A keep-alive connection pool to an envserver, safe to share between
    threads: calls from different threads run concurrently."""

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 300.0,
                 connect_timeout: float = 5.0, connect_retry_s: float = 0.0, max_conns: int = 256):
        self.aio = AsyncTransport(url, token, timeout=timeout, connect_timeout=connect_timeout,
                                  connect_retry_s=connect_retry_s, max_conns=max_conns)

    @classmethod
    def wrap(cls, aio: AsyncTransport) -> "Transport":
        t = cls.__new__(cls)
        t.aio = aio
        return t

    @property
    def url(self) -> str:
        return self.aio.url

    @property
    def stats(self) -> Stats:
        return self.aio.stats

    @property
    def timeout(self) -> float:
        return self.aio.timeout

    @property
    def open_connections(self) -> int:
        return self.aio.open_connections

    def close(self) -> None:
        """Closes every connection; later calls fail."""
        _loop.run(self.aio.aclose())

    def call(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
             raw_body: Optional[bytes] = None, content_type: Optional[str] = None,
             timeout: Optional[float] = None) -> Any:
        """Sends one request and returns its decoded reply body (see AsyncTransport.call)."""
        status, ctype, data = self.request(method, path, body, idempotent=idempotent, raw_body=raw_body,
                                           content_type=content_type, timeout=timeout)
        return decode_reply(status, ctype, data)

    def request(self, method: str, path: str, body: Any = None, *, idempotent: bool = False,
                raw_body: Optional[bytes] = None, content_type: Optional[str] = None,
                timeout: Optional[float] = None) -> Tuple[int, str, bytes]:
        return _loop.run(self.aio.request(method, path, body, idempotent=idempotent, raw_body=raw_body,
                                          content_type=content_type, timeout=timeout))
