"""Frame decoding and the client-side frame cache.

The server sends each encoded image once per reply, keyed by its frame hash
(opaque, 32 hex chars: XXH3-128 of the raw pixels after scope/downscale), and
omits any hash the request listed in ``have``. FrameCache holds the frames the
client has seen so that an unchanged screen costs the wire only its hash.

The hash names pixels, not bytes: the same screen is different bytes as png,
as raw and as jpeg at each quality. The cache is therefore keyed by hash +
format + quality, and ``have`` lists only frames held in the format and
quality the request asks for.

A Frame is resolved once, when its reply is parsed: from the reply's own
frames, or from the Frame objects the request listed in ``have`` (the request
holds them, so no eviction in between can lose one). Nothing is read back from
the cache after the fact.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any, Iterable, List, Optional, Tuple

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


FrameKey = Tuple[str, str, int]  # (hash, format, jpeg quality or 0)


def frame_key(h: str, fmt: str, quality: int = 0) -> FrameKey:
    return (h, fmt, quality if fmt == "jpeg" else 0)


class Frame:
    """One encoded frame and, once asked for, its decoded array.

    ``array()`` decodes on first access (thread-safe: a race decodes twice and
    keeps one) and returns the same read-only array after; envs showing one
    screen share one Frame, so N identical frames cost one decode.
    """

    __slots__ = ("hash", "fmt", "quality", "w", "h", "data", "_array", "_cache", "_counted", "__weakref__")

    def __init__(self, h: str, fmt: str, quality: int, w: int, hgt: int, data: bytes):
        self.hash, self.fmt, self.quality = h, fmt, quality
        self.w, self.h, self.data = w, hgt, data
        self._array: Optional[np.ndarray] = None
        self._cache: Optional["FrameCache"] = None
        self._counted = 0  # bytes the cache holding it counts for it

    @property
    def key(self) -> FrameKey:
        return frame_key(self.hash, self.fmt, self.quality)

    @property
    def decoded(self) -> bool:
        return self._array is not None

    def array(self) -> np.ndarray:
        a = self._array
        if a is None:
            a = decode(self.fmt, self.data, self.w, self.h)
            self._array = a
            cache = self._cache
            if cache is not None and self.fmt != "raw":  # a raw array is a view of data
                cache._recount(self)
        return a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.array()
        return a if dtype is None else a.astype(dtype)

    @property
    def shape(self) -> Tuple[int, int, int]:
        return (self.h, self.w, 3)

    def nbytes(self) -> int:
        extra = self._array.nbytes if self._array is not None and self.fmt != "raw" else 0
        return len(self.data) + extra

    def __repr__(self) -> str:
        return f"<Frame {self.hash[:8]} {self.fmt} {self.w}x{self.h} {len(self.data)}B>"


class FrameCache:
    """A byte-bounded LRU of frames keyed by hash + format + quality.

    Thread- and task-safe (one short lock). Each frame's bytes count once; a
    decoded png/jpeg array counts too once decoded (a raw frame's array is a
    view of its bytes and costs nothing more). The newest frame is kept even
    when it alone is over budget; frames a request in flight listed in
    ``have`` stay alive through that request's own references, whatever the
    cache evicts meanwhile.
    """

    def __init__(self, max_bytes: int = 256 << 20, max_have: int = 64):
        self.max_bytes = max_bytes
        self.max_have = max_have
        self._d: "OrderedDict[FrameKey, Frame]" = OrderedDict()
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

    def have(self, fmt: str, quality: int, prefer: Iterable[str] = (), extra: int = 0) -> List[Frame]:
        """Frames held in fmt/quality to list in a request's ``have``: the
        hashes in ``prefer`` first (e.g. the envs' last frames), then the most
        recently used, up to max_have + extra."""
        limit = self.max_have + extra
        q = quality if fmt == "jpeg" else 0
        out: List[Frame] = []
        seen = set()
        with self._lock:
            for h in prefer:
                f = self._d.get((h, fmt, q))
                if f is not None and h not in seen:
                    seen.add(h)
                    out.append(f)
                    if len(out) >= limit:
                        return out
            for k in reversed(self._d):
                if k[1] == fmt and k[2] == q and k[0] not in seen:
                    seen.add(k[0])
                    out.append(self._d[k])
                    if len(out) >= limit:
                        break
        return out

    def get(self, h: str, fmt: str, quality: int = 0) -> Optional[Frame]:
        """The frame held under this key, or None; marks it recently used."""
        k = frame_key(h, fmt, quality)
        with self._lock:
            f = self._d.get(k)
            if f is not None:
                self._d.move_to_end(k)
            return f

    def put(self, f: Frame) -> Frame:
        """Stores f (or touches the equal frame already held, which it returns)."""
        k = f.key
        with self._lock:
            old = self._d.get(k)
            if old is not None:
                self._d.move_to_end(k)
                return old
            f._cache = self
            self._d[k] = f
            f._counted = f.nbytes()
            self._bytes += f._counted
            self._evict()
            return f

    def touch(self, f: Frame) -> None:
        with self._lock:
            if self._d.get(f.key) is f:
                self._d.move_to_end(f.key)

    def _recount(self, f: Frame) -> None:
        with self._lock:
            if self._d.get(f.key) is f:
                n = f.nbytes()
                self._bytes += n - f._counted
                f._counted = n
                self._evict()

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and len(self._d) > 1:
            _, f = self._d.popitem(last=False)
            self._bytes -= f._counted
            f._cache, f._counted = None, 0

    def clear(self) -> None:
        with self._lock:
            for f in self._d.values():
                f._cache = None
            self._d.clear()
            self._bytes = 0
