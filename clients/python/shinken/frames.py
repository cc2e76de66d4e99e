"""Frame decoding and the client-side frame cache.

The server sends each encoded image once per reply, keyed by its frame hash
(opaque, 32 hex chars: XXH3-128 of the raw pixels after scope/downscale), and
omits any hash the request listed in ``have``. FrameCache holds the encoded
bytes the client has seen (and, lazily, their decoded arrays) so that an
unchanged screen costs the wire only its hash.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import List, Optional

import numpy as np

from .errors import ProtocolError

try:  # Pillow is optional: needed only to decode png/jpeg.
    from PIL import Image as _PILImage
except ImportError:  # pragma: no cover - exercised only where Pillow is absent
    _PILImage = None


def decode(fmt: str, data: bytes, w: int, h: int) -> np.ndarray:
    """Decodes an encoded frame into a read-only uint8 array of shape (h, w, 3).

    ``raw`` is RGB24 rows with no padding and needs nothing but numpy; png and
    jpeg need Pillow.
    """
    if fmt == "raw":
        if len(data) != w * h * 3:
            raise ProtocolError(f"raw frame of {len(data)} bytes; want {w}x{h}x3 = {w * h * 3}")
        arr = np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3)
    elif fmt in ("png", "jpeg"):
        if _PILImage is None:
            raise ImportError(f"decoding {fmt} frames needs Pillow (Debian python3-pil); "
                              "install it, request observe={'format': 'raw'}, or use obs_mode='bytes'")
        with _PILImage.open(io.BytesIO(data)) as im:
            arr = np.asarray(im.convert("RGB"))
        if arr.shape != (h, w, 3):
            raise ProtocolError(f"{fmt} frame decodes to {arr.shape}; want {(h, w, 3)}")
    else:
        raise ProtocolError(f"unknown frame format {fmt!r}")
    arr.flags.writeable = False  # shared between envs showing the same frame
    return arr


class _Entry:
    __slots__ = ("fmt", "data", "array")

    def __init__(self, fmt: str, data: bytes):
        self.fmt, self.data, self.array = fmt, data, None

    def size(self) -> int:
        return len(self.data) + (self.array.nbytes if self.array is not None else 0)


class FrameCache:
    """A byte-bounded LRU of encoded frames, keyed by frame hash.

    ``have(fmt)`` lists the most recently used hashes held in that format: the
    client sends them so the server leaves those frames out of its reply.
    Decoded arrays are cached beside their bytes and returned read-only, so N
    envs on one identical screen share one array and one decode.
    """

    def __init__(self, max_bytes: int = 256 << 20, max_have: int = 64):
        self.max_bytes = max_bytes
        self.max_have = max_have
        self._d: "OrderedDict[str, _Entry]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0  # frames served from the cache instead of the wire
        self.misses = 0  # frames that crossed the wire

    def __len__(self) -> int:
        return len(self._d)

    @property
    def nbytes(self) -> int:
        """Bytes held (encoded plus decoded)."""
        return self._bytes

    def have(self, fmt: Optional[str], extra: int = 0) -> List[str]:
        """Most recent hashes (up to max_have + extra) held in fmt (any format if None)."""
        limit = self.max_have + extra
        out: List[str] = []
        with self._lock:
            for h in reversed(self._d):
                if fmt is None or self._d[h].fmt == fmt:
                    out.append(h)
                    if len(out) >= limit:
                        break
        return out

    def get(self, h: str) -> Optional[bytes]:
        """The encoded bytes for hash h, or None; marks h recently used."""
        with self._lock:
            e = self._d.get(h)
            if e is None:
                return None
            self._d.move_to_end(h)
            return e.data

    def format_of(self, h: str) -> Optional[str]:
        with self._lock:
            e = self._d.get(h)
            return e.fmt if e else None

    def put(self, h: str, fmt: str, data: bytes) -> None:
        """Stores an encoded frame and evicts the least recently used past max_bytes."""
        with self._lock:
            old = self._d.pop(h, None)
            if old is not None:
                self._bytes -= old.size()
            e = _Entry(fmt, bytes(data))
            self._d[h] = e
            self._bytes += e.size()
            self._evict()

    def array(self, h: str, w: int, hgt: int) -> np.ndarray:
        """The decoded frame for h (decoding once, then cached)."""
        with self._lock:
            e = self._d.get(h)
            if e is None:
                raise ProtocolError(f"frame {h} is not cached")
            if e.array is not None and e.array.shape == (hgt, w, 3):
                self._d.move_to_end(h)
                return e.array
            fmt, data = e.fmt, e.data
        arr = decode(fmt, data, w, hgt)
        with self._lock:
            e2 = self._d.get(h)
            if e2 is e and e.array is None:
                e.array = arr
                self._bytes += arr.nbytes
                self._evict()
        return arr

    def _evict(self) -> None:
        # Keep at least the newest entry even when it alone is over budget.
        while self._bytes > self.max_bytes and len(self._d) > 1:
            _, e = self._d.popitem(last=False)
            self._bytes -= e.size()

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._bytes = 0
