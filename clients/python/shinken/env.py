"""Env and VectorEnv: Gymnasium-shaped environments backed by an envserver."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import wire
from .client import Client, Slot
from .errors import BatchError, ShinkenError, error_from_wire
from .spaces import ActionSpace, FrameSpace

try:
    import gymnasium as _gym
    _EnvBase: Any = _gym.Env
except ImportError:
    _gym = None

    class _EnvBase:  # type: ignore[no-redef]
        """Standalone stand-in for gymnasium.Env (same attribute surface)."""

        metadata: Dict[str, Any] = {}
        render_mode: Optional[str] = None
        np_random: Optional[np.random.Generator] = None

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
            if seed is not None or self.np_random is None:
                self.np_random = np.random.default_rng(seed)

        @property
        def unwrapped(self):
            return self

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

Action = Union[Dict[str, Any], Sequence[Dict[str, Any]], str]

_OBS_MODES = ("array", "bytes")


def _client(url_or_client: Union[str, Client], token: Optional[str], timeout: float) -> Client:
    if isinstance(url_or_client, Client):
        return url_or_client
    return Client(url_or_client, token, timeout=timeout)


# Dialects whose coordinates are pixels of the image the model saw.
_PIXEL_DIALECTS = frozenset(("pyautogui", "xml", "json"))


def _reshapes(observe: Optional[Dict[str, Any]]) -> bool:
    """Whether the observe request delivers something other than the whole
    screen at full size (a downscale or a crop)."""
    o = observe or {}
    return bool(o.get("max_long_edge")) or o.get("scope", "screen") != "screen"


def _step_map(env_id: str, action: Action, dialect: Optional[str], tokens: Any,
              observe: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One step's wire map. When the frame is downscaled or cropped, typed
    actions and pixel-dialect text are read in frame pixels (coords "frame"):
    the server maps them back through the frame's display descriptor. Text of
    other dialects keeps its family's own default space."""
    frame = _reshapes(observe)
    if isinstance(action, str):
        coords = "frame" if frame and (dialect or "auto") in _PIXEL_DIALECTS else None
        return wire.step_env(env_id, text=action, dialect=dialect, toks=tokens, coords=coords)
    return wire.step_env(env_id, action, toks=tokens, coords="frame" if frame else None)


def _info(s: Slot) -> Dict[str, Any]:
    """The Gymnasium info dict of one slot: the wire info plus ids and frame facts."""
    info: Dict[str, Any] = dict(s.info)
    if isinstance(info.get("error"), dict):  # an action's error that did not fail the call
        info["error"] = error_from_wire(info["error"], env_id=s.env_id)
    info["env_id"] = s.env_id
    if s.episode_id:
        info["episode_id"] = s.episode_id
    if s.obs is not None:
        info["frame"] = s.obs.get("frame")
        info["frame_format"] = s.obs.get("format")
        info["frame_cached"] = s.cached
        info["pointer"] = tuple(s.obs.get("pointer") or (0, 0))
        info["display"] = s.obs.get("display")
        if "tree_text" in s.obs or "a11y" in s.obs:  # observe a11y: the accessibility tree
            info["tree_text"] = s.obs.get("tree_text", "")
            info["elements"] = s.obs.get("elements") or []
            info["tree"] = s.obs.get("tree")
            info["a11y"] = s.obs.get("a11y")
    return info


class Env(_EnvBase):
    """One environment on an envserver, with Gymnasium's API shape.

    ``url`` is the server's base URL (or a shared Client). ``task`` is the task
    id (overridable per reset with ``options={"task": ...}``). ``observe`` is
    the observation request (a format string or a dict of format,
    max_long_edge, quality, scope, settle, a11y; None = the server's default;
    with a11y "tree" or "diff", info carries tree_text, elements, tree and a11y,
    and actions may target {"kind": "element_ref", "ref": "e12"}). When
    it downscales or crops, typed actions (and pyautogui/xml/json text) are
    given in pixels of the delivered frame: the server maps them back.
    ``obs_mode`` "array" returns the decoded frame as a read-only uint8 array
    (H, W, 3); "bytes" returns the encoded image as sent. ``dialect`` is the
    default dialect for model text passed to step().

    The env is leased on the first reset() and returned by close().
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": None}

    def __init__(self, url: Union[str, Client], task: Optional[str] = None, token: Optional[str] = None,
                 observe: Any = None, *, obs_mode: str = "array", dialect: str = "auto",
                 render_mode: Optional[str] = None, timeout: float = 300.0):
        if obs_mode not in _OBS_MODES:
            raise ValueError(f"obs_mode {obs_mode!r}: want one of {_OBS_MODES}")
        self.client = _client(url, token, timeout)
        self.task = task
        self.observe = wire.observe_map(observe)
        self.obs_mode = obs_mode
        self.dialect = dialect
        self.render_mode = render_mode
        self.env_id: Optional[str] = None
        self.episode_id: Optional[str] = None
        self._last: Optional[Slot] = None
        spec = self.client.spec()
        self.action_space = ActionSpace(spec.get("verbs") or (), spec.get("dialects") or ())
        self.observation_space = FrameSpace(obs_mode, fmt=(self.observe or {}).get("format"))
        self.spec_info = spec

    @classmethod
    def _attach(cls, client: Client, base: "Env", slot: Slot) -> "Env":
        env = cls.__new__(cls)
        env.client, env.task, env.observe = client, base.task, base.observe
        env.obs_mode, env.dialect, env.render_mode = base.obs_mode, base.dialect, base.render_mode
        env.spec_info = base.spec_info
        env.action_space = ActionSpace(base.action_space.verbs, base.action_space.dialects)
        env.observation_space = FrameSpace(base.obs_mode, fmt=base.observation_space.format)
        env.env_id, env.episode_id, env._last = slot.env_id, slot.episode_id, None
        env._observe_slot(slot)
        return env

    def _observe_slot(self, s: Slot) -> Any:
        self._last = s
        if s.episode_id:
            self.episode_id = s.episode_id
        if s.obs is None:
            return None
        d = s.obs.get("display") or {}
        if _reshapes(self.observe):  # actions are given in frame pixels
            self.action_space.screen = (s.obs["w"], s.obs["h"])
        elif d.get("w") and d.get("h"):
            self.action_space.screen = (d["w"], d["h"])
        if self.obs_mode == "bytes":
            return s.frame
        arr = self.client.cache.array(s.obs["frame"], s.obs["w"], s.obs["h"])
        self.observation_space._set_shape(arr.shape)
        return arr

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
              ) -> Tuple[Any, Dict[str, Any]]:
        """Starts an episode: leases an env on the first call, restarts it after.

        ``options`` may carry ``task`` (switch task) and ``observe``.
        """
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            self.task = options["task"]
        if "observe" in options:
            self.observe = wire.observe_map(options["observe"])
        if not self.task:
            raise ValueError("reset: no task (pass task= or options={'task': ...})")
        slot = self.client.reset([wire.reset_env(self.task, self.env_id, seed)], self.observe)[0]
        if slot.error is not None:
            raise slot.error
        self.env_id = slot.env_id
        obs = self._observe_slot(slot)
        return obs, _info(slot)

    def step(self, action: Action, *, dialect: Optional[str] = None, tokens: Any = None
             ) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        """Runs one turn: a typed action dict, a list of them, or raw model text.

        Model text is parsed on the server with ``dialect`` (default: the env's).
        A refused action (a parse failure, an unknown verb, an off-screen
        target) runs nothing but still counts as a step: it comes back as the
        typed exception in ``info["error"]``, not raised. ``tokens`` =
        {prompt_ids, response_ids, response_logprobs?, finish_reason?} is
        recorded into the trajectory. A step is never retried by the client.
        """
        if self.env_id is None:
            raise ShinkenError("step before reset")
        req = _step_map(self.env_id, action, dialect or self.dialect, tokens, self.observe)
        slot = self.client.step([req], self.observe)[0]
        if slot.error is not None:
            raise slot.error
        obs = self._observe_slot(slot)
        return obs, slot.reward, slot.terminated, slot.truncated, _info(slot)

    def fork(self, n: int) -> Tuple["VectorEnv", Any, List[Dict[str, Any]]]:
        """Branches this env into n new envs carrying its current state.

        Returns (VectorEnv over the n children, their obs, their infos); the
        children share this env's client and frame cache.
        """
        if self.env_id is None:
            raise ShinkenError("fork before reset")
        slots = self.client.fork(self.env_id, n, self.observe)
        vec = VectorEnv._from_slots(self.client, self, slots)
        obs, _, _, _, infos, _ = vec._collect(slots, range(len(slots)))
        return vec, obs, infos

    def render(self) -> Optional[np.ndarray]:
        """The last frame as an RGB array (render_mode "rgb_array")."""
        s = self._last
        if s is None or s.obs is None:
            return None
        return self.client.cache.array(s.obs["frame"], s.obs["w"], s.obs["h"])

    def trajectory(self):
        """The current episode's Trajectory (see shinken.episodes)."""
        from .trajectory import Trajectory
        if not self.episode_id:
            raise ShinkenError("no episode yet")
        return Trajectory.from_wire(self.client.episode(self.episode_id))

    def close(self) -> None:
        """Returns the env to the server (idempotent)."""
        if self.env_id is not None:
            env_id, self.env_id = self.env_id, None
            self.client.close_envs([env_id])

    def __repr__(self) -> str:
        return f"<shinken.Env {self.env_id or 'unleased'} task={self.task!r} at {self.client.url}>"


class VectorEnv:
    """n envs stepped together: one HTTP request per batched reset or step.

    ``task`` is one task id for all envs or a list of n. ``on_error`` says what
    happens when some envs of a call fail and the others succeed: "raise"
    (default) raises BatchError carrying the per-env errors and the whole
    result; "info" returns normally, with the exception in infos[i]["error"],
    obs None and truncated True for the failed envs.

    Autoreset (``autoreset="next_step"``, Gymnasium 1.x's default): an env
    that terminated or truncated is reset by the *next* step() call, which
    ignores its action and returns its new episode's first obs with reward 0,
    terminated = truncated = False and info["autoreset"] = True. Such a call
    sends one reset request for those envs and one step request for the rest.
    With ``autoreset=None`` a finished env stays finished and stepping it
    fails with EpisodeOver.

    Observations come back as one uint8 array (n, H, W, 3) when every env
    delivered a frame of the same shape in array mode, else as a list.
    Rewards, terminated and truncated are numpy arrays; infos is a list of
    per-env dicts.
    """

    def __init__(self, url: Union[str, Client], task: Union[str, Sequence[str], None] = None,
                 n: Optional[int] = None, *, token: Optional[str] = None, observe: Any = None,
                 obs_mode: str = "array", dialect: str = "auto", autoreset: Optional[str] = "next_step",
                 on_error: str = "raise", timeout: float = 300.0):
        if autoreset not in ("next_step", None):
            raise ValueError(f"autoreset {autoreset!r}: want 'next_step' or None")
        if on_error not in ("raise", "info"):
            raise ValueError(f"on_error {on_error!r}: want 'raise' or 'info'")
        if obs_mode not in _OBS_MODES:
            raise ValueError(f"obs_mode {obs_mode!r}: want one of {_OBS_MODES}")
        if task is None:
            task = []
        tasks = [task] * (n or 1) if isinstance(task, str) else list(task)
        if n is not None and len(tasks) != n:
            raise ValueError(f"{len(tasks)} tasks for n={n} envs")
        self.client = _client(url, token, timeout)
        self.tasks = tasks
        self.num_envs = len(tasks)
        self.observe = wire.observe_map(observe)
        self.obs_mode, self.dialect = obs_mode, dialect
        self.autoreset, self.on_error = autoreset, on_error
        self.env_ids: List[Optional[str]] = [None] * self.num_envs
        self.episode_ids: List[Optional[str]] = [None] * self.num_envs
        self._needs_reset = [False] * self.num_envs
        spec = self.client.spec()
        self.single_action_space = ActionSpace(spec.get("verbs") or (), spec.get("dialects") or ())
        self.single_observation_space = FrameSpace(obs_mode, fmt=(self.observe or {}).get("format"))
        self.spec_info = spec
        self.metadata = {"autoreset_mode": autoreset}

    @classmethod
    def _from_slots(cls, client: Client, base: Any, slots: List[Slot]) -> "VectorEnv":
        ok = [s for s in slots if s.error is None]
        task = base.task if isinstance(base, Env) else None
        vec = cls.__new__(cls)
        vec.client = client
        vec.tasks = [task or (s.info.get("task") or "") for s in ok]
        vec.num_envs = len(ok)
        vec.observe, vec.obs_mode, vec.dialect = base.observe, base.obs_mode, base.dialect
        vec.autoreset = getattr(base, "autoreset", "next_step")
        vec.on_error = getattr(base, "on_error", "raise")
        vec.env_ids = [s.env_id for s in ok]
        vec.episode_ids = [s.episode_id for s in ok]
        vec._needs_reset = [False] * vec.num_envs
        vec.spec_info = base.spec_info
        vec.single_action_space = ActionSpace(vec.spec_info.get("verbs") or (), vec.spec_info.get("dialects") or ())
        vec.single_observation_space = FrameSpace(base.obs_mode, fmt=(base.observe or {}).get("format"))
        vec.metadata = {"autoreset_mode": vec.autoreset}
        failed = {i: s.error for i, s in enumerate(slots) if s.error is not None}
        if failed:
            # Children that did fork are closed again: no lease is left unowned.
            client.close_envs(vec.env_ids)
            raise BatchError(failed, None)
        return vec

    # -- results ---------------------------------------------------------------

    def _obs(self, s: Slot) -> Any:
        if s.obs is None:
            return None
        if self.obs_mode == "bytes":
            return s.frame
        arr = self.client.cache.array(s.obs["frame"], s.obs["w"], s.obs["h"])
        self.single_observation_space._set_shape(arr.shape)
        return arr

    def _collect(self, slots: Sequence[Slot], idx: Sequence[int], autoreset: Sequence[bool] = ()):
        """Turns slots (for env indices idx) into the batched 5-tuple, updating state."""
        n = len(idx)
        obs: List[Any] = [None] * n
        rew = np.zeros(n, dtype=np.float64)
        term = np.zeros(n, dtype=bool)
        trunc = np.zeros(n, dtype=bool)
        infos: List[Dict[str, Any]] = [{} for _ in range(n)]
        errors: Dict[int, ShinkenError] = {}
        for k, (i, s) in enumerate(zip(idx, slots)):
            infos[k] = _info(s)
            if autoreset and autoreset[k]:
                infos[k]["autoreset"] = True
            if s.error is not None:
                errors[i] = s.error
                infos[k]["error"] = s.error
                trunc[k] = True
                self._needs_reset[i] = self.autoreset is not None
                continue
            self.env_ids[i] = s.env_id
            if s.episode_id:
                self.episode_ids[i] = s.episode_id
            obs[k] = self._obs(s)
            rew[k], term[k], trunc[k] = s.reward, s.terminated, s.truncated
            self._needs_reset[i] = self.autoreset is not None and (s.terminated or s.truncated)
            d = (s.obs or {}).get("display") or {}
            if s.obs is not None and _reshapes(self.observe):  # actions in frame pixels
                self.single_action_space.screen = (s.obs["w"], s.obs["h"])
            elif d.get("w"):
                self.single_action_space.screen = (d["w"], d["h"])
        batched: Any = obs
        if self.obs_mode == "array" and obs and all(o is not None for o in obs) \
                and len({o.shape for o in obs}) == 1:
            batched = np.stack(obs)
        return batched, rew, term, trunc, infos, errors

    def _finish(self, result):
        *out, errors = result
        if errors and self.on_error == "raise":
            raise BatchError(errors, tuple(out))
        return tuple(out)

    # -- calls -----------------------------------------------------------------

    def reset(self, *, seed: Union[int, Sequence[Optional[int]], None] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Any, List[Dict[str, Any]]]:
        """Resets every env in one request (leasing those not yet leased).

        ``seed`` is one int (env i gets seed + i) or a list of n.
        """
        if options and "observe" in options:
            self.observe = wire.observe_map(options["observe"])
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        envs = [wire.reset_env(self.tasks[i], self.env_ids[i], seeds[i]) for i in range(self.num_envs)]
        slots = self.client.reset(envs, self.observe)
        obs, _, _, _, infos, errors = self._collect(slots, range(self.num_envs))
        return self._finish((obs, infos, errors))

    def step(self, actions: Sequence[Action], *, dialect: Optional[str] = None,
             tokens: Optional[Sequence[Any]] = None):
        """Steps every env: one step request (plus one reset request for envs
        awaiting autoreset). Returns (obs, rewards, terminated, truncated, infos)."""
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        if tokens is not None and len(tokens) != self.num_envs:
            raise ValueError(f"{len(tokens)} token records for {self.num_envs} envs")
        if any(e is None for e in self.env_ids):
            raise ShinkenError("step before reset")
        again = [i for i in range(self.num_envs) if self._needs_reset[i]]
        live = [i for i in range(self.num_envs) if not self._needs_reset[i]]
        reqs = [_step_map(self.env_ids[i], actions[i], dialect or self.dialect,
                          tokens[i] if tokens is not None else None, self.observe) for i in live]
        slots: List[Optional[Slot]] = [None] * self.num_envs
        if again:
            reset = self.client.reset([wire.reset_env(self.tasks[i], self.env_ids[i]) for i in again],
                                      self.observe)
            for i, s in zip(again, reset):
                slots[i] = s
        if live:
            for i, s in zip(live, self.client.step(reqs, self.observe)):
                slots[i] = s
        flags = [i in again for i in range(self.num_envs)]
        for i in again:  # an autoreset slot reports the new episode's start
            s = slots[i]
            s.reward, s.terminated, s.truncated = 0.0, False, False
        obs, rew, term, trunc, infos, errors = self._collect(slots, range(self.num_envs), flags)
        return self._finish((obs, rew, term, trunc, infos, errors))

    def fork(self, i: int, n: int) -> Tuple["VectorEnv", Any, List[Dict[str, Any]]]:
        """Branches env i into n new envs carrying its current state.

        Returns (VectorEnv over the n children, their obs, their infos). The
        children share this VectorEnv's client and frame cache; replicas of one
        checkpoint are pixel-identical, so their first frame crosses the wire once.
        """
        if self.env_ids[i] is None:
            raise ShinkenError("fork before reset")
        slots = self.client.fork(self.env_ids[i], n, self.observe)
        vec = VectorEnv._from_slots(self.client, self, slots)
        vec.tasks = [self.tasks[i]] * vec.num_envs
        obs, _, _, _, infos, _ = vec._collect(slots, range(len(slots)))
        return vec, obs, infos

    def close(self) -> None:
        """Returns every leased env to the server in one request (idempotent)."""
        ids = [e for e in self.env_ids if e]
        self.env_ids = [None] * self.num_envs
        if ids:
            self.client.close_envs(ids)

    def __enter__(self) -> "VectorEnv":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __len__(self) -> int:
        return self.num_envs

    def __repr__(self) -> str:
        return f"<shinken.VectorEnv n={self.num_envs} at {self.client.url}>"
