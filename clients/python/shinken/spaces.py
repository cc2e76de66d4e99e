"""Action and observation space descriptions.

Shinken's action space is a structured vocabulary (typed action dicts, model
text in a dialect, or a turn dict carrying text, dialect, tokens and
coordinate space), not a fixed tensor. ActionSpace describes it — the verbs
and dialects the server advertises — checks membership, and samples random
typed actions for smoke tests and random-agent baselines. ModelText is a Text
space that admits any model output. The observation space of a full-screen
frame is a fixed Box(H, W, 3) computed from the server's screen size and the
observe request's max_long_edge. When gymnasium is importable these are
gymnasium.spaces classes.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .wire import TURN_KEYS

try:
    import gymnasium as _gym
    _SpaceBase: Any = _gym.spaces.Space
except ImportError:  # standalone: a minimal base with the same surface
    _gym = None

    class _SpaceBase:  # type: ignore[no-redef]
        def __init__(self, shape=None, dtype=None, seed=None):
            self._shape = shape
            self.dtype = None if dtype is None else np.dtype(dtype)
            self._np_random = None
            if seed is not None:
                self.seed(seed)

        @property
        def shape(self):
            return self._shape

        @property
        def np_random(self) -> np.random.Generator:
            if self._np_random is None:
                self.seed()
            return self._np_random

        def seed(self, seed: Optional[int] = None):
            self._np_random = np.random.default_rng(seed)
            return [seed]

        def __contains__(self, x: Any) -> bool:
            return self.contains(x)

    class _Box(_SpaceBase):  # type: ignore[no-redef]
        """Standalone stand-in for gymnasium.spaces.Box (uint8 frames only)."""

        def __init__(self, low: int, high: int, shape: Tuple[int, ...], dtype: Any = np.uint8,
                     seed: Optional[int] = None):
            super().__init__(tuple(shape), dtype, seed)
            self.low = np.full(shape, low, dtype=dtype)
            self.high = np.full(shape, high, dtype=dtype)

        def contains(self, x: Any) -> bool:
            return isinstance(x, np.ndarray) and x.shape == self.shape and x.dtype == self.dtype

        def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
            return self.np_random.integers(0, 256, size=self.shape, dtype=self.dtype)

        def __repr__(self) -> str:
            return f"Box(0, 255, {self.shape}, uint8)"

        def __eq__(self, other: Any) -> bool:
            return isinstance(other, _Box) and other.shape == self.shape

    class _Text(_SpaceBase):  # type: ignore[no-redef]
        def __init__(self, max_length: int, *, min_length: int = 0, charset: Any = None,
                     seed: Optional[int] = None):
            super().__init__(None, None, seed)
            self.min_length, self.max_length = min_length, max_length


if _gym is not None:
    _Box = _gym.spaces.Box
    _Text = _gym.spaces.Text

_PRINTABLE = "".join(chr(c) for c in range(32, 127))


class ModelText(_Text):
    """Model output: any str up to ``max_length`` characters (Gymnasium's Text
    admits only its charset; a model writes what it writes). sample() draws
    printable ASCII."""

    def __init__(self, max_length: int = 1 << 16, seed: Optional[int] = None):
        super().__init__(max_length, min_length=0, charset=_PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"ModelText(max_length={self.max_length})"


def scaled_size(w: int, h: int, max_long_edge: int) -> Tuple[int, int]:
    """The delivered frame size of a w x h screen under max_long_edge (the
    guest's rounding: half away from zero)."""
    long = max(w, h)
    if max_long_edge <= 0 or long <= max_long_edge:
        return w, h
    f = max_long_edge / long
    return max(1, int(math.floor(w * f + 0.5))), max(1, int(math.floor(h * f + 0.5)))


def screen_of(spec: Mapping[str, Any], screen: Optional[Tuple[int, int]] = None) -> Optional[Tuple[int, int]]:
    """The sandboxes' screen (w, h): as given, else from /v1/spec."""
    if screen is not None:
        return int(screen[0]), int(screen[1])
    s = (spec.get("observation") or {}).get("screen") or {}
    if s.get("w") and s.get("h"):
        return int(s["w"]), int(s["h"])
    return None


def observation_space(spec: Mapping[str, Any], observe: Optional[Mapping[str, Any]], obs_mode: str,
                      screen: Optional[Tuple[int, int]] = None) -> Any:
    """The fixed observation space for this observe request.

    Array mode on the whole screen is a Box(H, W, 3, uint8) known before any
    reset. Bytes mode, and the active-window scope (whose size follows the
    window), are FrameSpace (shape None: frames vary).
    """
    o = dict((spec.get("observation") or {}).get("default") or {})
    o.update(observe or {})
    if obs_mode not in ("array", "lazy") or (o.get("scope") or "screen") != "screen":
        return FrameSpace("bytes" if obs_mode == "bytes" else "array", fmt=o.get("format"))
    sc = screen_of(spec, screen)
    if sc is None:
        raise ValueError("the server's /v1/spec does not report its screen size: pass screen=(w, h)")
    w, h = scaled_size(sc[0], sc[1], int(o.get("max_long_edge") or 0))
    return _Box(0, 255, (h, w, 3), np.uint8)


# Verbs a random agent can send safely (no app launches, no episode end).
_RANDOM_VERBS = ("click", "double_click", "right_click", "move", "scroll", "type_text", "key", "wait")
_RANDOM_KEYS = ("Return", "Tab", "Escape", "BackSpace", "ctrl+a", "ctrl+c", "ctrl+v", "Up", "Down")


class ActionSpace(_SpaceBase):
    """Typed action dicts over the server's verbs, model text in its dialects,
    or a turn dict {action | actions | text, dialect?, tokens?, coords?}.

    ``screen`` is the (w, h) of the screen, used by sample(); ``text`` is the
    ModelText space of model output.
    """

    def __init__(self, verbs: Sequence[str], dialects: Sequence[str] = (),
                 screen: Optional[Tuple[int, int]] = None, seed: Optional[int] = None):
        super().__init__(None, None, seed)
        self.verbs = tuple(verbs)
        self.dialects = tuple(dialects)
        self.screen = screen
        self.text = ModelText()

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        """True for a typed action (or a non-empty list of them) with a known
        verb, model text, or a turn dict holding one of those."""
        if isinstance(x, str):
            return self.text.contains(x)
        if isinstance(x, Mapping) and "verb" not in x:
            if set(x) - TURN_KEYS:
                return False
            given = [k for k in ("action", "actions", "text") if x.get(k) is not None]
            if len(given) != 1 or (x.get("dialect") and x["dialect"] not in self.dialects):
                return False
            v = x[given[0]]
            return self.contains(v) and (given[0] != "action" or isinstance(v, Mapping))
        if isinstance(x, Mapping):
            return x.get("verb") in self.verbs
        if isinstance(x, (list, tuple)) and x:
            return all(isinstance(a, Mapping) and a.get("verb") in self.verbs for a in x)
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> Dict[str, Any]:
        """A random harmless typed action inside the screen."""
        rng = self.np_random
        verbs = [v for v in _RANDOM_VERBS if v in self.verbs] or list(self.verbs)
        verb = str(rng.choice(verbs))
        w, h = self.screen or (640, 480)
        a: Dict[str, Any] = {"verb": verb}
        if verb in ("click", "double_click", "right_click", "move", "scroll"):
            a["target"] = {"kind": "point_px", "x": float(rng.integers(0, w)), "y": float(rng.integers(0, h))}
        if verb == "scroll":
            a["dy"] = int(rng.choice([-3, -1, 1, 3]))
        elif verb == "type_text":
            a["text"] = "".join(rng.choice(list("abcdefghij klmnop"), size=int(rng.integers(1, 8))))
        elif verb == "key":
            a["keys"] = str(rng.choice(_RANDOM_KEYS))
        elif verb == "wait":
            a["ms"] = int(rng.integers(10, 200))
        return a

    def __repr__(self) -> str:
        return f"ActionSpace(verbs={len(self.verbs)}, dialects={list(self.dialects)})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ActionSpace) and (self.verbs, self.dialects) == (other.verbs, other.dialects)


class FrameSpace(_SpaceBase):
    """Screen frames: uint8 arrays (h, w, 3) in ``array`` mode, encoded bytes in ``bytes`` mode.

    The shape is None until the first observation tells the frame size (it
    depends on the task's screen and the observe request's max_long_edge).
    """

    def __init__(self, mode: str = "array", shape: Optional[Tuple[int, int, int]] = None,
                 fmt: Optional[str] = None, seed: Optional[int] = None):
        super().__init__(shape, np.uint8 if mode == "array" else None, seed)
        self.mode = mode
        self.format = fmt

    @property
    def is_np_flattenable(self) -> bool:
        return self.mode == "array" and self.shape is not None

    def _set_shape(self, shape: Tuple[int, int, int]) -> None:
        self._shape = shape

    def contains(self, x: Any) -> bool:
        if self.mode == "bytes":
            return isinstance(x, (bytes, bytearray, memoryview))
        return (isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 3 and x.shape[2] == 3
                and (self.shape is None or x.shape == self.shape))

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        if self.mode == "bytes" or self.shape is None:
            raise NotImplementedError("FrameSpace.sample needs array mode and a known shape")
        return self.np_random.integers(0, 256, size=self.shape, dtype=np.uint8)

    def __repr__(self) -> str:
        return f"FrameSpace(mode={self.mode!r}, shape={self.shape}, format={self.format!r})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FrameSpace) and (self.mode, self.shape) == (other.mode, other.shape)
