"""Env: one environment on an envserver, a gymnasium.Env (when gymnasium is
importable; a class with the same surface otherwise).

It is the sync face of AsyncEnv: each call runs AsyncEnv's coroutine on the
private loop thread, and decodes the frame in the calling thread.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _loop
from .aenv import AsyncEnv, slot_info, slot_obs, step_reward
from .aio import AsyncClient
from .client import Client
from .errors import ShinkenError
from .multi import connect
from .spaces import ActionSpace, ModelText, observation_space

try:
    import gymnasium as _gym
    _EnvBase: Any = _gym.Env
except ImportError:
    _gym = None

    class _EnvBase:  # type: ignore[no-redef]
        """Standalone stand-in for gymnasium.Env (same attribute surface)."""

        metadata: Dict[str, Any] = {}
        render_mode: Optional[str] = None
        spec: Any = None
        _np_random: Optional[np.random.Generator] = None

        @property
        def np_random(self) -> np.random.Generator:
            if self._np_random is None:
                self._np_random = np.random.default_rng()
            return self._np_random

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
            if seed is not None:
                self._np_random = np.random.default_rng(seed)

        @property
        def unwrapped(self):
            return self

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

Action = Union[Dict[str, Any], List[Dict[str, Any]], str]


def clients(url: Any, token: Optional[str], timeout: float) -> Tuple[Client, bool]:
    """(sync Client, owned) for a URL (None: $SHINKEN_URL), a list of URLs, a
    Client or an AsyncClient."""
    if isinstance(url, Client):
        return url, False
    if isinstance(url, AsyncClient):
        return Client.wrap(url), False
    if isinstance(url, (list, tuple)) or (isinstance(url, str) and ("," in url or url.startswith("k8s://"))):
        return Client.wrap(connect(url, token, timeout=timeout)), True  # several servers (shinken.multi, shinken.k8s)
    return Client(url, token, timeout=timeout), True



def served_screen(spec: Dict[str, Any], screen: Optional[Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """The screen a reset asks the server for: ``screen`` where the server
    lists it in ``spec.observation.screens`` (None where it is the
    default); a ValueError where the server reports its sizes and
    ``screen`` is not one of them. A server that reports no screen takes
    ``screen`` as the observation space's size only."""
    if screen is None:
        return None
    w, h = (int(v) for v in screen)
    ob = spec.get("observation") or {}
    sizes = [(s["w"], s["h"]) for s in ob.get("screens") or []]
    default = ob.get("screen")
    if default and not sizes:
        sizes = [(default["w"], default["h"])]
    if not sizes:
        return None
    if (w, h) not in sizes:
        raise ValueError(f"screen {w}x{h}: this server serves " + ", ".join(f"{a}x{b}" for a, b in sizes))
    if default and (w, h) == (default["w"], default["h"]):
        return None
    return (w, h)

class Env(_EnvBase):
    """One environment on an envserver, exactly Gymnasium's API.

    ``url`` is the server's base URL (default $SHINKEN_URL; the token defaults
    to $SHINKEN_TOKEN), or a shared Client. ``task`` is the task family's id
    (overridable per reset with ``options={"task": ...}``). A family draws
    its instances from a seed: ``reset(seed=k)`` is instance k of the env's
    ``split`` ("train", the default, or "test"; overridable per reset with
    ``options={"split": ...}``, kept for later resets like ``task``);
    without a seed the server draws one. ``observe`` is
    the observation request (a format string or a dict of observe fields;
    None = the server's default).

    ``obs_mode`` "array" returns the decoded frame as a read-only uint8 array
    in ``observation_space``, a fixed Box(H, W, 3) known at construction (the
    server's screen scaled to max_long_edge); "bytes" returns the encoded
    image as sent; "lazy" a Frame that decodes on first np.asarray().
    ``screen`` (w, h) asks for a sandbox of that size on every reset: one
    of the sizes the server lists (``spec.observation.screens``; the server
    keeps warm sandboxes of each), else a ValueError naming them.

    Actions (``action_space``): a typed action dict, a list of them, model
    text, or a turn dict {"action" | "actions" | "text", "dialect"?,
    "tokens"?, "coords"?} — the form that carries model text, its dialect,
    its token ids and its coordinate space through any Gymnasium wrapper.
    ``action="text"`` makes the action space ModelText (model output only).
    ``dialect`` and ``coords`` are the defaults for every step.

    The env is leased on the first reset() and returned by close() (or, if
    it is garbage-collected unclosed, by its finalizer). The reset's
    ``info`` names the instance: ``task``, ``version``, ``seed`` (the one
    given or the one the server drew), ``split`` and ``instruction``, the
    instance's own instruction (the prompt; the spec lists only the
    family's template). ``env.instruction`` and ``env.seed`` hold it for
    the episode, and every step's info carries the instruction too.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": None}

    def __init__(self, url: Any = None, task: Optional[str] = None, token: Optional[str] = None,
                 observe: Any = None, *, obs_mode: str = "array", dialect: str = "auto", coords: Any = None,
                 action: str = "any", render_mode: Optional[str] = None, timeout: float = 300.0,
                 screen: Optional[Tuple[int, int]] = None, split: Optional[str] = None):
        if action not in ("any", "text"):
            raise ValueError(f"action {action!r}: want 'any' or 'text'")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r}: want None or 'rgb_array'")
        self.client, own = clients(url, token, timeout)
        try:
            self._a = AsyncEnv(self.client.aio, task, observe=observe, obs_mode=obs_mode, dialect=dialect,
                               coords=coords, own=own, split=split)
        except BaseException:
            if own:
                self.client.close()
            raise
        self.render_mode = render_mode
        try:
            spec = self.client.spec()
            self._a.screen = served_screen(spec, screen)
            self.observation_space = observation_space(spec, self._a.observe, obs_mode, screen)
        except BaseException:
            self.close()
            raise
        self.spec_info = spec
        self._screen = screen
        shape = getattr(self.observation_space, "shape", None)
        self.action_space: Any = ActionSpace(spec.get("verbs") or (), spec.get("dialects") or ())
        sc = (spec.get("observation") or {}).get("screen") or {}
        if screen or sc:
            self.action_space.screen = tuple(screen) if screen else (sc["w"], sc["h"])
        elif shape:
            self.action_space.screen = (shape[1], shape[0])
        if action == "text":
            self.action_space = ModelText()

    # -- state (held by the AsyncEnv) ---------------------------------------------------

    @property
    def env_id(self) -> Optional[str]:
        return self._a.env_id

    @property
    def episode_id(self) -> Optional[str]:
        return self._a.episode_id

    @property
    def task(self) -> Optional[str]:
        return self._a.task

    @property
    def instruction(self) -> Optional[str]:
        """The current instance's instruction (the prompt: the reset's
        ``info["instruction"]``); None before reset."""
        return self._a.instruction

    @property
    def seed(self) -> Optional[int]:
        """The current instance's seed (given to reset or drawn by the
        server); None before reset."""
        return self._a.seed

    @property
    def split(self) -> Optional[str]:
        """The split resets draw from (None: the server's default, train);
        the current instance's is ``info["split"]``."""
        return self._a.split

    @property
    def observe(self) -> Optional[Dict[str, Any]]:
        return self._a.observe

    @property
    def obs_mode(self) -> str:
        return self._a.obs_mode

    @property
    def dialect(self) -> str:
        return self._a.dialect

    # -- Gymnasium ------------------------------------------------------------------------

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
              ) -> Tuple[Any, Dict[str, Any]]:
        """Starts an episode: leases an env on the first call, restarts it
        after (leasing a fresh one when the old one is gone).

        ``seed`` picks the task family's instance (instance ``seed`` of the
        split; None: the server draws one) and also seeds ``np_random``.
        ``options`` may carry ``task`` (switch task), ``split`` ("train" or
        "test"; an unknown one raises BadRequest), ``observe`` (the
        observation space must stay the same shape) and ``coords``. The
        info names the instance: ``seed``, ``split``, ``version``,
        ``instruction``.
        """
        super().reset(seed=seed)
        s = _loop.run(self._a.reset_slot(seed, options))
        if options and "observe" in options:  # a new observe request may change the frame size
            self.observation_space = observation_space(self.spec_info, self._a.observe, self.obs_mode,
                                                       self._screen)
        return slot_obs(s, self.obs_mode), slot_info(s, self.instruction)

    def step(self, action: Action, *, dialect: Optional[str] = None, tokens: Any = None,
             coords: Any = None) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        """Runs one turn: a typed action dict, a list of them, model text, or a
        turn dict (see the class doc).

        Model text is parsed on the server with its dialect (default: the
        env's). A refused action (a parse failure, an unknown verb, an
        off-screen target) runs nothing but still counts as a step: it comes
        back as the typed exception in ``info["error"]``, not raised.
        ``tokens`` = {prompt_ids, response_ids, response_logprobs?,
        finish_reason?} is recorded into the trajectory. A step whose reply
        does not come within the client's timeout is resent with the same
        request_id, which the server answers with the reply of the step that
        already ran (it never runs twice); only when no reply comes within the
        client's ``step_retry_s`` does it raise StepTimeout, which says
        whether the step ran.
        """
        s = _loop.run(self._a.step_slot(action, dialect=dialect, tokens=tokens, coords=coords))
        obs, info = slot_obs(s, self.obs_mode), slot_info(s, self.instruction)
        return obs, step_reward(s, obs, info), s.terminated, s.truncated, info

    def observe_now(self, *, windows: bool = False, observe: Any = None) -> Tuple[Any, Dict[str, Any]]:
        """The env's observation now, without a step (no budget spent, no
        agent action recorded): (obs, info) in this env's obs_mode and
        observe settings (or ``observe``); ``windows=True`` adds the window
        list as ``info["windows"]``."""
        if self.env_id is None:
            raise ShinkenError("observe_now before reset")
        s = self.client.observe([self.env_id], observe if observe is not None else self._a.observe,
                                windows=windows)[0]
        if s.error is not None:
            raise s.error
        info = slot_info(s, self.instruction)
        if "windows" in s.info:
            info["windows"] = s.info["windows"]
        return slot_obs(s, self.obs_mode), info

    def exec(self, argv: Optional[List[str]] = None, shell: Optional[str] = None, **kw: Any) -> Dict[str, Any]:
        """Runs one command in this env's sandbox for the trainer (a state
        probe, a custom setup): ``exec(shell="cat ~/out.txt")`` or
        ``exec(["ls", "-l"], stdin=b"...", cwd=..., env={...},
        timeout_ms=...)``. See AsyncClient.exec; the env must be reset."""
        if self.env_id is None:
            raise ShinkenError("exec before reset")
        return self.client.exec(self.env_id, argv, shell, **kw)

    def put_file(self, path: str, data: bytes, *, mode: Optional[int] = None, **kw: Any) -> Dict[str, Any]:
        """Writes a file into this env's sandbox with the agent's rights
        ("~/..." or absolute), checksummed, in chunks above ``chunk``
        bytes: ``{path, sha256, size, chunks}``."""
        if self.env_id is None:
            raise ShinkenError("put_file before reset")
        return self.client.put_file(self.env_id, path, data, mode=mode, **kw)

    def get_file(self, path: str, **kw: Any) -> bytes:
        """Reads one of the agent's files from this env's sandbox (no link
        followed, bounded), checksummed on arrival."""
        if self.env_id is None:
            raise ShinkenError("get_file before reset")
        return self.client.get_file(self.env_id, path, **kw)

    def put_dir(self, path: str, local_dir: str) -> Dict[str, Any]:
        """Copies a local directory (directories and regular files) below
        path in this env's sandbox with the agent's rights, as one tar."""
        if self.env_id is None:
            raise ShinkenError("put_dir before reset")
        return self.client.put_dir(self.env_id, path, local_dir)

    def get_dir(self, path: str, local_dir: str) -> Dict[str, Any]:
        """Copies the agent's directory at path into local_dir, as one tar
        (links listed, not made; FIFOs and devices skipped)."""
        if self.env_id is None:
            raise ShinkenError("get_dir before reset")
        return self.client.get_dir(self.env_id, path, local_dir)

    def fork(self, n: int) -> Tuple[Any, Any, Dict[str, Any]]:
        """Branches this env into n new envs carrying its current state.

        Returns (VectorEnv over the n children, their obs, their infos); the
        children share this env's client and frame cache, play this env's
        instance (its instruction is in their infos) and autoreset from its
        split.
        """
        from .vector import VectorEnv
        slots = _loop.run(self._a.fork_slots(n))
        return VectorEnv._from_slots(self.client, self, slots, [self.task] * len(slots), [self.split] * len(slots))

    def render(self) -> Optional[np.ndarray]:
        """The last frame as an RGB array (render_mode "rgb_array")."""
        s = self._a.last
        if s is None or s.frame is None:
            return None
        return s.frame.array()

    def trajectory(self):
        """The current episode's Trajectory (see shinken.episodes)."""
        return _loop.run(self._a.trajectory())

    def close(self) -> None:
        """Returns the env to the server and closes the connections of a
        client the env created (idempotent)."""
        a = getattr(self, "_a", None)
        if a is not None:
            _loop.run(a.aclose())

    def __repr__(self) -> str:
        return f"<shinken.Env {self.env_id or 'unleased'} task={self.task!r} at {self.client.url}>"
