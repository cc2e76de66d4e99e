"""Action and observation space descriptions.

Shinken's action space is a structured vocabulary (typed action dicts, or model
text in a dialect), not a fixed tensor. ActionSpace describes it — the verbs
and dialects the server advertises — checks membership, and samples random
typed actions for smoke tests and random-agent baselines. When gymnasium is
importable both classes are gymnasium.spaces.Space subclasses.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

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


# Verbs a random agent can send safely (no app launches, no episode end).
_RANDOM_VERBS = ("click", "double_click", "right_click", "move", "scroll", "type_text", "key", "wait")
_RANDOM_KEYS = ("Return", "Tab", "Escape", "BackSpace", "ctrl+a", "ctrl+c", "ctrl+v", "Up", "Down")


class ActionSpace(_SpaceBase):
    """Typed action dicts over the server's verbs, or model text in its dialects.

    ``screen`` is the (w, h) of the last observation's screen, used by sample().
    """

    def __init__(self, verbs: Sequence[str], dialects: Sequence[str] = (),
                 screen: Optional[Tuple[int, int]] = None, seed: Optional[int] = None):
        super().__init__(None, None, seed)
        self.verbs = tuple(verbs)
        self.dialects = tuple(dialects)
        self.screen = screen

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        """True for a typed action (or a non-empty list of them) with a known verb, or a str."""
        if isinstance(x, str):
            return True
        if isinstance(x, dict):
            return x.get("verb") in self.verbs
        if isinstance(x, (list, tuple)) and x:
            return all(isinstance(a, dict) and a.get("verb") in self.verbs for a in x)
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
