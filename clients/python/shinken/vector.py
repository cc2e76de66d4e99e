"""VectorEnv: n envs on one envserver, a gymnasium.vector.VectorEnv (when
gymnasium is importable; a class with the same API otherwise).

Two ways to drive it:

* ``step(actions)`` / ``reset()``: Gymnasium's synchronous batch. One request
  per ``max_batch`` envs (chunks in flight together).
* ``send(actions, env_ids)`` / ``recv()``: envpool-style. Each env's step is
  its own request, so ``recv`` hands back whichever envs are ready and a slow
  env (a long verifier, a dying sandbox) never holds the others up.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import enum
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _loop, wire
from .aenv import OBS_MODES, instance_instruction, instruction_of, slot_info, split_arg, step_fate
from .aio import AsyncClient, Slot
from .client import Client
from .env import clients
from .errors import BadRequest, BatchError, NotFound, SandboxDied, ShinkenError, TransportError
from .frames import Frame
from .spaces import ActionSpace, observation_space

try:
    import gymnasium as _gym
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector.utils import batch_space as _batch_space
    _VecBase: Any = _gym.vector.VectorEnv
except ImportError:
    _gym = None

    class AutoresetMode(enum.Enum):  # type: ignore[no-redef]
        """gymnasium.vector.AutoresetMode's values."""
        NEXT_STEP = "NextStep"
        SAME_STEP = "SameStep"
        DISABLED = "Disabled"

    class _VecBase:  # type: ignore[no-redef]
        metadata: Dict[str, Any] = {}
        spec: Any = None
        render_mode: Optional[str] = None
        closed = False

        @property
        def unwrapped(self):
            return self

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()
            return False

    def _batch_space(space: Any, n: int) -> Any:
        from .spaces import _Box
        if isinstance(space, _Box):
            return _Box(0, 255, (n, *space.shape), np.uint8)
        return tuple(space for _ in range(n))

_decode_pool: Optional[cf.ThreadPoolExecutor] = None
_decode_lock = threading.Lock()


def decode_all(frames: Sequence[Frame]) -> None:
    """Decodes the frames not yet decoded, in parallel (Pillow releases the GIL
    while inflating), each distinct frame once."""
    todo = list({id(f): f for f in frames if not f.decoded}.values())
    if len(todo) <= 1:
        for f in todo:
            f.array()
        return
    global _decode_pool
    with _decode_lock:
        if _decode_pool is None:
            _decode_pool = cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="shinken-decode")
    list(_decode_pool.map(Frame.array, todo))


def add_info(infos: Dict[str, Any], info: Dict[str, Any], i: int, n: int) -> Dict[str, Any]:
    """Gymnasium's dict-of-arrays infos: infos[key][i] = info[key], with the
    boolean mask infos["_" + key] saying which envs carry the key."""
    for key, value in info.items():
        if isinstance(value, dict):
            arr: Any = add_info(infos.get(key, {}), value, i, n)
        else:
            arr = infos.get(key)
            if arr is None:
                if type(value) in (int, float, bool) or isinstance(value, np.number):
                    arr = np.zeros(n, dtype=type(value))
                elif isinstance(value, np.ndarray):
                    arr = np.zeros((n, *value.shape), dtype=value.dtype)
                else:
                    arr = np.full(n, None, dtype=object)
            arr[i] = value
        infos[key] = arr
        mask = infos.get("_" + key)
        if mask is None:
            mask = np.zeros(n, dtype=np.bool_)
        mask[i] = True
        infos["_" + key] = mask
    return infos


def _autoreset_mode(v: Any) -> Any:
    if isinstance(v, AutoresetMode):
        return v
    if v in (None, "disabled", "Disabled"):
        return AutoresetMode.DISABLED
    if v in ("next_step", "NextStep"):
        return AutoresetMode.NEXT_STEP
    raise ValueError(f"autoreset {v!r}: want next_step or disabled")


class VectorEnv(_VecBase):
    """n envs stepped together or independently.

    ``task`` is one task id for all envs or a list of n; ``num_envs`` (or
    ``n``) the count. ``split`` ("train", the server's default, or "test";
    one for all envs or a list of n) is the split their instances are drawn
    from, by reset and autoreset alike. ``observe``, ``obs_mode``,
    ``dialect`` and ``coords`` are as for Env. Each env's reset info names
    its instance (``seed``, ``split``, ``version``, ``instruction``: the
    instance's own instruction, the prompt); ``instructions[i]`` holds env
    i's for its episode. Observations in array mode are one uint8 array
    (num_envs, H, W, 3) in ``observation_space`` (a batched Box); in bytes
    or lazy mode a tuple of per-env bytes or Frames. Rewards, terminated and
    truncated are numpy arrays; infos are Gymnasium's dict of arrays with
    ``_key`` masks.

    ``copy=False`` (default) returns the env's own observation buffer,
    read-only, updated in place row by row only where an env's frame changed:
    a step costs no batch copy. Copy it to keep an observation past the next
    call, or pass ``copy=True``.

    Autoreset (``autoreset="next_step"``, Gymnasium's default): an env that
    terminated or truncated is reset by the next step, which ignores its
    action and returns its new episode's first obs with reward 0 and
    terminated = truncated = False. ``autoreset="disabled"``: finished envs
    stay finished until ``reset(options={"reset_mask": mask})``.

    ``on_error``: when some envs of a call fail, "raise" (default) raises
    BatchError carrying the per-env errors and the whole result; "info"
    returns normally with the exception in infos["error"] and truncated True
    for the failed envs (which then autoreset).
    """

    def __init__(self, url: Any = None, task: Union[str, Sequence[str], None] = None,
                 n: Optional[int] = None, *, num_envs: Optional[int] = None, token: Optional[str] = None,
                 observe: Any = None, obs_mode: str = "array", dialect: str = "auto", coords: Any = None,
                 autoreset: Any = "next_step", on_error: str = "raise", timeout: float = 300.0,
                 screen: Optional[Tuple[int, int]] = None, copy: bool = False, render_mode: Optional[str] = None,
                 split: Union[str, Sequence[Optional[str]], None] = None):
        if on_error not in ("raise", "info"):
            raise ValueError(f"on_error {on_error!r}: want 'raise' or 'info'")
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode {obs_mode!r}: want one of {OBS_MODES}")
        n = n if n is not None else num_envs
        tasks = [task] * (n or 1) if isinstance(task, str) or task is None else list(task)
        if n is not None and len(tasks) != n:
            raise ValueError(f"{len(tasks)} tasks for n={n} envs")
        splits = _splits(split, len(tasks))
        client, own = clients(url, token, timeout)
        self._setup(client, own, tasks, wire.observe_map(observe), obs_mode, dialect,
                    None if coords is None else wire.coords(coords), _autoreset_mode(autoreset),
                    on_error, screen, copy, splits)
        self.render_mode = render_mode

    def _setup(self, client: Client, own: bool, tasks: List[Optional[str]], observe: Any, obs_mode: str,
               dialect: str, coords: Any, autoreset: Any, on_error: str, screen: Any, copy: bool,
               splits: Optional[List[Optional[str]]] = None) -> None:
        self.client, self._own = client, own
        self.tasks = tasks
        self.splits: List[Optional[str]] = list(splits) if splits is not None else [None] * len(tasks)
        self.num_envs = len(tasks)
        self.observe, self.obs_mode, self.dialect, self.coords = observe, obs_mode, dialect, coords
        self.autoreset, self.on_error, self.copy = autoreset, on_error, copy
        self.metadata = {"autoreset_mode": autoreset, "render_modes": []}
        self.closed = False
        self.env_ids: List[Optional[str]] = [None] * self.num_envs
        self.episode_ids: List[Optional[str]] = [None] * self.num_envs
        self.instructions: List[Optional[str]] = [None] * self.num_envs
        self._needs_reset = [False] * self.num_envs
        self._inflight: Dict[int, "cf.Future[Any]"] = {}
        self._inflight_lock = threading.Lock()
        try:
            spec = client.spec()
            self.single_observation_space = observation_space(spec, observe, obs_mode, screen)
        except BaseException:
            if own:
                client.close()
            raise
        self.spec_info = spec
        self.single_action_space = ActionSpace(spec.get("verbs") or (), spec.get("dialects") or ())
        shape = getattr(self.single_observation_space, "shape", None)
        if shape:
            self.single_action_space.screen = (shape[1], shape[0])
        self.observation_space = _batch_space(self.single_observation_space, self.num_envs) if shape \
            else self.single_observation_space
        self.action_space = _batch_space(self.single_action_space, self.num_envs)
        self._buf: Optional[np.ndarray] = None
        self._view: Optional[np.ndarray] = None
        if shape and obs_mode == "array":
            self._buf = np.zeros((self.num_envs, *shape), dtype=np.uint8)
            self._view = self._buf.view()
            self._view.flags.writeable = False
        self._row: List[Optional[Frame]] = [None] * self.num_envs  # the frame in each buffer row
        self._objs: List[Any] = [None] * self.num_envs
        self._steps = [0] * self.num_envs  # each env's steps in its episode (its next step's index)

    @classmethod
    def _from_slots(cls, client: Client, base: Any, slots: List[Slot], tasks: List[Optional[str]],
                    splits: Optional[List[Optional[str]]] = None):
        """A VectorEnv over forked children; returns (vec, obs, infos). Each
        child's instruction is its fork reply's (the parent's instance)."""
        ok = [k for k, s in enumerate(slots) if s.error is None]
        failed = {k: s.error for k, s in enumerate(slots) if s.error is not None}
        if failed:
            # Children that did fork are closed again: no lease is left unowned.
            client.close_envs([slots[k].env_id for k in ok])
            raise BatchError(failed, None)
        vec = cls.__new__(cls)
        vec._setup(client, False, tasks, base.observe, base.obs_mode, base.dialect,
                   getattr(base, "coords", None), getattr(base, "autoreset", AutoresetMode.NEXT_STEP),
                   getattr(base, "on_error", "raise"), None, getattr(base, "copy", False), splits)
        vec.render_mode = None
        idx = list(range(len(slots)))
        for i, s in enumerate(slots):
            vec.instructions[i] = instance_instruction(s, vec.spec_info, tasks[i] or s.info.get("task"))
        obs, _, _, _, infos, _ = vec._collect(idx, slots, [False] * len(slots), full=True)
        return vec, obs, infos

    @property
    def aio(self) -> AsyncClient:
        return self.client.aio

    # -- the async work of one group of envs -------------------------------------------

    async def _reset_envs(self, idx: Sequence[int], seeds: Sequence[Optional[int]]) -> List[Slot]:
        c = self.aio
        envs = [wire.reset_env(self.tasks[i] or "", self.env_ids[i], seeds[k], coords_=self.coords,
                               split=self.splits[i])
                for k, i in enumerate(idx)]
        slots = await c.reset(envs, self.observe)
        gone = [k for k, (i, s) in enumerate(zip(idx, slots))
                if isinstance(s.error, (NotFound, SandboxDied) if self.env_ids[i] else SandboxDied)]
        if gone:  # the server restarted, a sandbox died or failed to boot: fresh leases
            again = await c.reset([wire.reset_env(self.tasks[idx[k]] or "", None, seeds[k], coords_=self.coords,
                                                  split=self.splits[idx[k]])
                                   for k in gone], self.observe)
            for k, s in zip(gone, again):
                slots[k] = s
        return slots

    async def _step_envs(self, idx: Sequence[int], actions: Sequence[Any], reset_idx: Sequence[int]
                         ) -> Dict[int, Slot]:
        """Steps idx and (autoreset) resets reset_idx, concurrently."""
        out: Dict[int, Slot] = {}

        async def steps() -> None:
            if not idx:
                return
            reqs = [wire.turn(self.env_ids[i] or "", a, self.dialect, None, self.coords,
                              reshaped=wire.reshapes(self.observe))
                    for i, a in zip(idx, actions)]
            try:
                slots = await self.aio.step(reqs, self.observe)
            except TransportError as e:
                if not e.sent:
                    raise
                errs = await asyncio.gather(*(self._fate(i, e) for i in idx))
                slots = [Slot(env_id=self.env_ids[i] or "", error=err) for i, err in zip(idx, errs)]
            out.update(zip(idx, slots))

        async def resets() -> None:
            if reset_idx:
                out.update(zip(reset_idx, await self._reset_envs(reset_idx, [None] * len(reset_idx))))

        await asyncio.gather(steps(), resets())
        return out

    async def _fate(self, i: int, e: TransportError) -> ShinkenError:
        """What became of env i's step when its request failed after sending."""
        if not e.timed_out or not self.episode_ids[i]:
            return e
        return await step_fate(self.aio, e, self.episode_ids[i], self._steps[i], self.env_ids[i])

    # -- results ------------------------------------------------------------------------

    def _collect(self, idx: Sequence[int], slots: Sequence[Slot], autoreset: Sequence[bool], full: bool):
        """Slots for env indices idx → (obs, rew, term, trunc, infos, errors), updating state.

        ``full``: idx is every env in order, and obs is the env's buffer."""
        k = len(idx)
        rew = np.zeros(k, dtype=np.float64)
        term = np.zeros(k, dtype=np.bool_)
        trunc = np.zeros(k, dtype=np.bool_)
        infos: Dict[str, Any] = {}
        errors: Dict[int, ShinkenError] = {}
        if self._buf is not None:
            decode_all([s.frame for s in slots if s.frame is not None and s.error is None])
        steps = self._steps
        for j, (i, s) in enumerate(zip(idx, slots)):
            if s.error is not None:
                errors[i] = s.error
                trunc[j] = True
                self._needs_reset[i] = self.autoreset is not AutoresetMode.DISABLED
                info = slot_info(s, self.instructions[i])
                info["error"] = s.error
                add_info(infos, info, j, k)
                continue
            if autoreset[j] or s.episode_id and s.episode_id != self.episode_ids[i]:
                # A new episode (a reset, an autoreset): its instance's instruction.
                self.instructions[i] = instance_instruction(s, self.spec_info, self.tasks[i] or s.info.get("task"))
            self.env_ids[i] = s.env_id
            if s.episode_id:
                self.episode_ids[i] = s.episode_id
            steps[i] = int(s.info.get("step") or 0)
            if autoreset[j]:
                s.reward, s.terminated, s.truncated = 0.0, False, False
            # An end that is not a score is NaN, never a 0 a trainer would
            # average (its info says exit_reason and scored False).
            rew[j], term[j], trunc[j] = np.nan if s.reward is None else s.reward, s.terminated, s.truncated
            self._needs_reset[i] = self.autoreset is not AutoresetMode.DISABLED and (s.terminated or s.truncated)
            info = slot_info(s, self.instructions[i])
            if s.reward is None:
                info["scored"] = False
            if autoreset[j]:
                info["autoreset"] = True
            add_info(infos, info, j, k)
            f = s.frame
            if f is None:
                continue
            if self._buf is not None:
                if self._row[i] is not f and (self._row[i] is None or self._row[i].key != f.key):
                    self._buf[i] = f.array()  # only rows whose frame changed are written
                self._row[i] = f
            else:
                self._objs[i] = f.data if self.obs_mode == "bytes" else f
        if self._buf is not None:
            if full:
                obs: Any = self._buf.copy() if self.copy else self._view
            else:
                obs = self._buf[list(idx)]  # fancy indexing: a new array
        else:
            obs = tuple(self._objs[i] for i in idx)
        return obs, rew, term, trunc, infos, errors

    def _finish(self, out: Tuple[Any, ...], errors: Dict[int, ShinkenError]) -> Tuple[Any, ...]:
        if errors and self.on_error == "raise":
            raise BatchError(errors, out)
        return out

    # -- Gymnasium ----------------------------------------------------------------------

    def reset(self, *, seed: Union[int, Sequence[Optional[int]], None] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        """Resets the envs in one request per max_batch (leasing those not yet
        leased; a fresh lease for any whose env is gone).

        ``seed`` picks each env's task instance: one int (env i gets
        instance seed + i), a list of n (None: drawn by the server), or None
        (every env's drawn by the server). ``options["reset_mask"]`` (bool
        array of n) resets only those envs; the others keep their episode
        and their observation, and infos carry only the reset envs.
        ``options`` may also carry ``task`` (one id or n) and ``split``
        ("train" or "test", one or n; kept for later resets and autoresets,
        like ``task``). infos["seed"], infos["split"] and
        infos["instruction"] name each env's instance.
        """
        self._check_idle()
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        tasks = self.tasks
        if "task" in options:
            t = options.pop("task")
            tasks = [t] * self.num_envs if isinstance(t, str) else list(t)
            if len(tasks) != self.num_envs:
                raise ValueError(f"{len(tasks)} tasks for {self.num_envs} envs")
        splits = _splits(options.pop("split"), self.num_envs) if "split" in options else self.splits
        if options:
            raise ValueError(f"reset: unknown option(s) {sorted(options)} (want reset_mask, task, split)")
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        if any(not t for t in tasks):
            raise ValueError("reset: no task (pass task= or options={'task': ...})")
        if any(instruction_of(self.spec_info, t) is None for t in tasks):
            self.spec_info = self.client.spec(refresh=True)
            unknown = sorted({t for t in tasks if instruction_of(self.spec_info, t) is None})
            if unknown:  # checked before anything changes: a bad task poisons nothing
                raise NotFound(f"unknown task(s) {unknown}", code="not_found")
        prev_splits = self.splits
        self.tasks, self.splits = tasks, splits
        idx = list(range(self.num_envs))
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (self.num_envs,):
                raise ValueError(f"reset_mask of shape {mask.shape}; want ({self.num_envs},)")
            idx = [i for i in idx if mask[i]]
        try:
            slots = _loop.run(self._reset_envs(idx, [seeds[i] for i in idx]))
        except BaseException:
            self.splits = prev_splits
            raise
        full = len(idx) == self.num_envs
        for i, s in zip(idx, slots):
            if s.error is None:
                self.instructions[i] = instance_instruction(s, self.spec_info, self.tasks[i])
            elif isinstance(s.error, BadRequest):  # e.g. a split the task lacks: autoreset keeps the old one
                self.splits[i] = prev_splits[i]
        obs, _, _, _, sub, errors = self._collect(idx, slots, [False] * len(idx), full=full)
        if not full:  # infos for the reset envs only, at their own indices
            obs = self._buf.copy() if self._buf is not None and self.copy else (
                self._view if self._buf is not None else tuple(self._objs))
            infos: Dict[str, Any] = {}
            for j, i in enumerate(idx):
                add_info(infos, _row_info(sub, j), i, self.num_envs)
            sub = infos
        return self._finish((obs, sub), errors)

    def step(self, actions: Sequence[Any]):
        """Steps every env (one request per max_batch envs, plus one reset
        request for the envs awaiting autoreset). Returns (obs, rewards,
        terminated, truncated, infos)."""
        self._check_idle()
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        if any(e is None for e in self.env_ids):
            raise ShinkenError("step before reset")
        again = [i for i in range(self.num_envs) if self._needs_reset[i]]
        live = [i for i in range(self.num_envs) if not self._needs_reset[i]]
        got = _loop.run(self._step_envs(live, [actions[i] for i in live], again))
        idx = list(range(self.num_envs))
        obs, rew, term, trunc, infos, errors = self._collect(
            idx, [got[i] for i in idx], [i in again for i in idx], full=True)
        return self._finish((obs, rew, term, trunc, infos), errors)

    # -- envpool-style --------------------------------------------------------------

    def send(self, actions: Sequence[Any], env_ids: Optional[Sequence[int]] = None) -> None:
        """Starts a step for each env index in env_ids (default: all) with its
        action, without waiting. Each env is its own request, so recv()
        returns each as soon as it is done. An env awaiting autoreset is reset
        instead (its action ignored)."""
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        actions = list(actions)
        if len(actions) != len(ids):
            raise ValueError(f"{len(actions)} actions for {len(ids)} envs")
        with self._inflight_lock:
            busy = [i for i in ids if i in self._inflight]
            if busy:
                raise ShinkenError(f"envs {busy} already have a step in flight; recv() it first")
            if any(self.env_ids[i] is None for i in ids):
                raise ShinkenError("send before reset")
            for i, a in zip(ids, actions):
                if self._needs_reset[i]:
                    fut = _loop.submit(self._step_envs([], [], [i]))
                else:
                    fut = _loop.submit(self._step_envs([i], [a], []))
                fut.autoreset = self._needs_reset[i]  # type: ignore[attr-defined]
                self._inflight[i] = fut

    def recv(self, min_ready: int = 1, timeout: Optional[float] = None):
        """Waits until at least min_ready (capped at the envs in flight) sent
        steps are done, and returns every done one: (obs, rewards, terminated,
        truncated, infos) over those envs, with infos["env_index"] naming
        each row's env index."""
        with self._inflight_lock:
            pending = dict(self._inflight)
        if not pending:
            raise ShinkenError("recv with nothing in flight; send() first")
        want = max(1, min(min_ready, len(pending)))
        done = {i for i, f in pending.items() if f.done()}
        futs = set(pending.values())
        while len(done) < want:
            finished, _ = _loop.wait_any([f for f in futs if not f.done()], timeout)
            if not finished:
                raise TimeoutError(f"recv: {len(done)} of {want} envs done within {timeout}s")
            done = {i for i, f in pending.items() if f.done()}
        idx = sorted(done)
        with self._inflight_lock:
            for i in idx:
                self._inflight.pop(i, None)
        slots, flags = [], []
        for i in idx:
            f = pending[i]
            slots.append(f.result()[i])  # a whole-request failure raises here
            flags.append(bool(getattr(f, "autoreset", False)))
        obs, rew, term, trunc, infos, errors = self._collect(idx, slots, flags, full=False)
        infos["env_index"] = np.asarray(idx, dtype=np.int64)
        infos["_env_index"] = np.ones(len(idx), dtype=np.bool_)
        return self._finish((obs, rew, term, trunc, infos), errors)

    def _check_idle(self) -> None:
        if self.closed:
            raise ShinkenError("VectorEnv is closed")
        if self._inflight:
            raise ShinkenError(f"{len(self._inflight)} sent steps not received; recv() them first")

    # -- the rest -------------------------------------------------------------------

    def fork(self, i: int, n: int):
        """Branches env i into n new envs carrying its current state: returns
        (VectorEnv over the n children, their obs, their infos). The children
        share this VectorEnv's client and frame cache."""
        if self.env_ids[i] is None:
            raise ShinkenError("fork before reset")
        slots = self.client.fork(self.env_ids[i], n, self.observe)
        return VectorEnv._from_slots(self.client, self, slots, [self.tasks[i]] * len(slots),
                                     [self.splits[i]] * len(slots))

    def close(self, **kwargs: Any) -> None:
        """Returns every leased env in one request and closes the connections
        of a client it created (idempotent)."""
        if getattr(self, "closed", True) and not getattr(self, "_own", False):
            return
        for f in list(self._inflight.values()):
            f.cancel()
        self._inflight.clear()
        ids = [e for e in self.env_ids if e]
        self.env_ids = [None] * self.num_envs
        self.closed = True
        try:
            if ids:
                self.client.close_envs(ids)
        finally:
            if self._own:
                self._own = False
                self.client.close()

    def __del__(self) -> None:
        # Unclosed: give the sandboxes back now rather than at the idle TTL.
        try:
            if not getattr(self, "closed", True) and not _loop.in_loop_thread():
                self.close()
        except Exception:
            pass

    def __enter__(self) -> "VectorEnv":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __len__(self) -> int:
        return self.num_envs

    def __repr__(self) -> str:
        return f"<shinken.VectorEnv n={self.num_envs} at {self.client.url}>"


def _splits(split: Any, n: int) -> List[Optional[str]]:
    """n envs' splits from one split (or None) or a list of n."""
    if split is None or isinstance(split, str):
        return [split_arg(split)] * n
    out = [split_arg(s) for s in split]
    if len(out) != n:
        raise ValueError(f"{len(out)} splits for {n} envs")
    return out


def _row_info(infos: Dict[str, Any], j: int) -> Dict[str, Any]:
    """Row j of a dict-of-arrays infos, as a plain dict."""
    out: Dict[str, Any] = {}
    for k, v in infos.items():
        if k.startswith("_"):
            continue
        if isinstance(v, dict):
            out[k] = _row_info(v, j)
        elif infos.get("_" + k) is not None and infos["_" + k][j]:
            out[k] = v[j].item() if isinstance(v, np.ndarray) and v.dtype != object and v.ndim == 1 else v[j]
    return out
