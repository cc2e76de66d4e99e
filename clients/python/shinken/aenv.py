"""AsyncEnv: one environment on an envserver, on asyncio. The sync Env runs
the same coroutines on the private loop thread, so the episode logic —
leasing, recovery, the step index, timeouts — lives here once.

    env = shinken.AsyncEnv(client, task="xterm-count-lines")
    obs, info = await env.reset(seed=3)           # train instance 3 of the family
    info["instruction"], info["seed"], info["split"]   # the instance's own instruction
    obs, reward, terminated, truncated, info = await env.step("pyautogui.click(10, 20)")
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import wire
from .aio import AsyncClient, Slot
from .multi import connect
from .errors import (BadRequest, NotFound, NotScored, SandboxDied, ShinkenError, StepTimeout, TransportError,
                     error_from_wire)

OBS_MODES = ("array", "bytes", "lazy")

# How long a timed-out step's fate is looked for in its episode's trajectory.
OUTCOME_WAIT_S = 120.0


def slot_info(s: Slot, instruction: Optional[str] = None) -> Dict[str, Any]:
    """The Gymnasium info dict of one slot: the wire info (on a reset or fork:
    the instance's task, version, seed, split and instruction) plus ids,
    frame facts and the episode's instruction."""
    info: Dict[str, Any] = dict(s.info)
    if isinstance(info.get("error"), dict):  # an action's error that did not fail the call
        info["error"] = error_from_wire(info["error"], env_id=s.env_id)
    info["env_id"] = s.env_id
    if s.episode_id:
        info["episode_id"] = s.episode_id
    if instruction is not None:
        info["instruction"] = instruction
    if s.obs is not None:
        info["frame"] = s.obs.get("frame")
        info["frame_format"] = s.obs.get("format")
        info["frame_cached"] = s.cached
        info["pointer"] = tuple(s.obs.get("pointer") or (0, 0))
        info["display"] = s.obs.get("display")
        # The structured observation (observe.a11y tree|diff) and the
        # Set-of-Mark table (observe.som), when asked for.
        for key in ("tree_text", "elements", "tree", "a11y", "marks"):
            if s.obs.get(key) is not None:
                info[key] = s.obs[key]
    return info


def step_reward(s: Slot, obs: Any, info: Dict[str, Any]) -> float:
    """A step's reward for Gymnasium: a float, or NotScored raised when the
    step ended the episode without a score (the wire's null)."""
    if s.reward is not None:
        return s.reward
    reason = str(s.info.get("exit_reason") or "")
    raise NotScored(f"the episode ended {reason or 'unscored'}: its reward is not a score",
                    exit_reason=reason, obs=obs, info=info, terminated=s.terminated, truncated=s.truncated,
                    env_id=s.env_id)


def slot_obs(s: Slot, obs_mode: str) -> Any:
    """The observation of a slot in obs_mode: a read-only uint8 array (decoded
    here, once per distinct frame), the encoded bytes, or the lazy Frame."""
    f = s.frame
    if f is None:
        return None
    if obs_mode == "bytes":
        return f.data
    if obs_mode == "lazy":
        return f
    return f.array()


def instruction_of(spec: Dict[str, Any], task: Optional[str]) -> Optional[str]:
    """The spec's instruction of a task: the family's TEMPLATE (e.g. "Count
    the lines of ~/{{.file}}..."), not any instance's; None for a task the
    spec does not list. Use it to know a task exists; the prompt is
    ``instance_instruction``."""
    for t in spec.get("tasks") or ():
        if t.get("id") == task:
            return t.get("instruction")
    return None


def instance_instruction(s: Slot, spec: Dict[str, Any], task: Optional[str]) -> Optional[str]:
    """The instruction of the instance a reset or fork started: the reply's
    ``info["instruction"]``; the spec's only from a server that does not
    report one (before task families, when every task had one instance)."""
    got = s.info.get("instruction")
    if got:
        return str(got)
    return instruction_of(spec, task)


def split_arg(split: Any) -> Optional[str]:
    """A split as given (None: the server's default, train); the server
    judges the value (train or test) and answers bad_request otherwise."""
    if split is None or split == "":
        return None
    if not isinstance(split, str):
        raise BadRequest(f"split: want a string (train or test), got {type(split).__name__}")
    return split


async def step_fate(client: AsyncClient, e: TransportError, episode_id: Optional[str], idx: int,
                    env_id: Optional[str], wait_s: float = OUTCOME_WAIT_S) -> StepTimeout:
    """The StepTimeout for step idx of an episode whose request got no reply in
    time: whether it ran, read from the episode's trajectory (waiting up to
    wait_s for the server to record it)."""
    from .trajectory import Step
    ran: Optional[bool] = None
    record = None
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while episode_id:
        try:
            t = await client.episode(episode_id, timeout=10)
        except ShinkenError:
            break
        steps = (t or {}).get("steps") or []
        if len(steps) > idx:
            ran, record = True, Step.from_wire(steps[idx])
            break
        if time.monotonic() + delay > deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    how = "it ran" if ran else "its fate is unknown (the server recorded nothing in time)"
    return StepTimeout(f"{e.message}; step {idx} of episode {episode_id}: {how}; reset the env",
                       ran=ran, record=record, episode_id=episode_id, step_index=idx, env_id=env_id)


class _Lease:
    """The env id an env holds, shared with its finalizer (which must not
    reference the env itself)."""

    __slots__ = ("env_id", "client", "own", "loop", "done")

    def __init__(self, client: AsyncClient, own: bool):
        self.env_id: Optional[str] = None
        self.client, self.own = client, own
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.done = False  # the owned client is closed


async def _release(lease: _Lease) -> None:
    env_id, lease.env_id = lease.env_id, None
    try:
        if env_id:
            await lease.client.close_envs([env_id], timeout=10)
    finally:
        if lease.own and not lease.done:
            lease.done = True
            await lease.client.aclose()


def _finalize(lease: _Lease) -> None:
    """Garbage-collected without close(): give the sandbox back now, not at the
    server's idle TTL, and close the sockets of a client the env owned."""
    loop = lease.loop
    if loop is None or loop.is_closed() or not loop.is_running() \
            or not (lease.env_id or (lease.own and not lease.done)):
        return
    try:
        fut = asyncio.run_coroutine_threadsafe(_release(lease), loop)
    except RuntimeError:  # the loop is shutting down
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not loop:
        try:
            fut.result(5)
        except Exception:  # best effort: the server's idle TTL is the backstop
            pass


class AsyncEnv:
    """One environment on an envserver, with Gymnasium's reset/step shapes as
    coroutines.

    ``client`` is an AsyncClient or a URL (default $SHINKEN_URL), or a list of
    URLs to spread over (shinken.multi); the env then owns its client and
    closes it with itself. ``task`` is the task family's id
    (overridable per reset with ``options={"task": ...}``); ``split`` the
    split its instances are drawn from, "train" (the server's default) or
    "test" (overridable per reset with ``options={"split": ...}``, kept for
    later resets like ``task``). ``reset(seed=k)`` is instance k of the
    split; without a seed the server draws one. The reset's info names the
    instance (``task``, ``version``, ``seed``, ``split``, ``instruction``);
    ``env.instruction``, ``env.seed`` and ``env.version`` hold it for the
    episode. ``observe`` is
    the observation request (a format string or a dict of observe fields;
    None = the server's default). ``obs_mode``: "array" a decoded read-only
    uint8 array (H, W, 3), "bytes" the encoded image as sent, "lazy" a Frame
    that decodes on first access (np.asarray(frame)). ``dialect`` and
    ``coords`` are the defaults for model text and for the coordinate space
    of the actions' points.
    """

    def __init__(self, client: Any = None, task: Optional[str] = None, token: Optional[str] = None,
                 observe: Any = None, *, obs_mode: str = "array", dialect: str = "auto",
                 coords: Any = None, timeout: float = 300.0, outcome_wait_s: float = OUTCOME_WAIT_S,
                 own: Optional[bool] = None, split: Optional[str] = None,
                 screen: Optional[Tuple[int, int]] = None):
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode {obs_mode!r}: want one of {OBS_MODES}")
        if own is None:
            own = not isinstance(client, AsyncClient)
        self.client: AsyncClient = client if isinstance(client, AsyncClient) else \
            connect(client, token, timeout=timeout)
        self.task = task
        self.split = split_arg(split)
        self.observe = wire.observe_map(observe)
        self.obs_mode = obs_mode
        self.dialect = dialect
        self.coords = None if coords is None else wire.coords(coords)
        # The sandbox's screen (w, h) each reset asks for: one of the sizes
        # in spec.observation.screens; None, the server's default.
        self.screen = tuple(screen) if screen is not None else None
        self.outcome_wait_s = outcome_wait_s
        self.episode_id: Optional[str] = None
        # The current episode's instance (from the reset's or fork's info):
        # its instruction (the prompt), seed, family version, and all of what
        # the info names of it (task, version, seed, split).
        self.instruction: Optional[str] = None
        self.seed: Optional[int] = None
        self.version: Optional[int] = None
        self.instance: Dict[str, Any] = {}
        self.steps = 0  # steps taken in the current episode (the next step's index)
        self.last: Optional[Slot] = None
        self._stale: Optional[ShinkenError] = None  # set when the env must be reset first
        self._lease = _Lease(self.client, own)
        self._finalizer = weakref.finalize(self, _finalize, self._lease)

    @property
    def env_id(self) -> Optional[str]:
        return self._lease.env_id

    # -- the calls as slots (the sync Env shares these) ------------------------------

    async def reset_slot(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Slot:
        """Starts an episode: leases an env on the first call, restarts it
        after. A restart whose env is gone (server restarted, sandbox died,
        idle-closed) leases a fresh one. ``seed`` and ``options["split"]``
        pick the instance. Options are committed only when the reset
        succeeds, so a bad ``task`` or ``split`` does not poison later
        resets."""
        self._lease.loop = asyncio.get_running_loop()
        options = dict(options or {})
        task = options.pop("task", self.task)
        split = split_arg(options.pop("split")) if "split" in options else self.split
        observe = wire.observe_map(options.pop("observe")) if "observe" in options else self.observe
        coords = wire.coords(options.pop("coords")) if options.get("coords") is not None else self.coords
        options.pop("coords", None)
        if options:
            raise ValueError(f"reset: unknown option(s) {sorted(options)} (want task, split, observe, coords)")
        if not task:
            raise ValueError("reset: no task (pass task= or options={'task': ...})")
        spec = await self.client.spec()
        if instruction_of(spec, task) is None and instruction_of(await self.client.spec(True), task) is None:
            raise NotFound(f"unknown task {task!r}", code="not_found")
        env_id = self.env_id
        slot = (await self.client.reset([wire.reset_env(task, env_id, seed, coords_=coords, split=split,
                                                                       screen=self.screen)],
                                        observe))[0]
        if isinstance(slot.error, (NotFound, SandboxDied) if env_id else SandboxDied):
            # The env is gone (the server restarted or the sandbox died), or a
            # new sandbox failed to boot: the episode runs on a fresh lease.
            # Nothing of the trainer's can run twice: a reset takes no action.
            self._lease.env_id = None
            slot = (await self.client.reset([wire.reset_env(task, None, seed, coords_=coords, split=split,
                                                                          screen=self.screen)],
                                            observe))[0]
        if slot.error is not None:
            raise slot.error
        self.task, self.split, self.observe, self.coords = task, split, observe, coords
        self._lease.env_id = slot.env_id
        self.episode_id = slot.episode_id or None
        self.adopt_instance(slot, spec)
        self.steps = int(slot.info.get("step") or 0)
        self._stale = None
        self.last = slot
        return slot

    def adopt_instance(self, slot: Slot, spec: Optional[Dict[str, Any]] = None) -> None:
        """Takes the instance a reset or fork reply names (its info) as this
        env's episode: instruction, seed, version, split."""
        self.instruction = instance_instruction(slot, spec or {}, self.task)
        seed, version = slot.info.get("seed"), slot.info.get("version")
        self.seed = int(seed) if seed is not None else None
        self.version = int(version) if version is not None else None
        self.instance = {k: slot.info[k] for k in ("task", "version", "seed", "split")
                         if slot.info.get(k) is not None}

    async def step_slot(self, action: Any, *, dialect: Optional[str] = None, tokens: Any = None,
                        coords: Any = None, timeout: Optional[float] = None) -> Slot:
        """Runs one turn (see Env.step for the action forms). A step whose
        reply does not come is resent with its request_id for up to the
        client's ``step_retry_s``; the server runs it once and answers the
        resend with its stored reply. Only when no reply comes in that time
        (or the server does not replay steps) is the step's fate read from the
        episode's trajectory and raised as StepTimeout."""
        env_id = self.env_id
        if env_id is None:
            raise ShinkenError("step before reset")
        if self._stale is not None:
            raise ShinkenError(f"reset needed: {self._stale}")
        req = wire.turn(env_id, action, dialect or self.dialect, tokens,
                        coords if coords is not None else None, reshaped=wire.reshapes(self.observe))
        try:
            slot = (await self.client.step([req], self.observe, timeout=timeout))[0]
        except TransportError as e:
            if not e.sent:
                raise
            self._stale = e
            if e.timed_out:
                raise await self.resolve_timeout(e) from None
            raise
        if slot.error is not None:
            if isinstance(slot.error, (NotFound, SandboxDied)):
                self._stale = slot.error
            raise slot.error
        self.steps = int(slot.info.get("step") or self.steps + 1)
        self.last = slot
        return slot

    async def resolve_timeout(self, e: TransportError) -> StepTimeout:
        """Finds out from the trajectory whether a timed-out step ran."""
        return await step_fate(self.client, e, self.episode_id, self.steps, self.env_id, self.outcome_wait_s)

    # -- the Gymnasium shapes -------------------------------------------------------------

    async def _obs(self, s: Slot) -> Any:
        if self.obs_mode == "array" and s.frame is not None and not s.frame.decoded:
            return await asyncio.get_running_loop().run_in_executor(None, slot_obs, s, self.obs_mode)
        return slot_obs(s, self.obs_mode)

    async def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
                    ) -> Tuple[Any, Dict[str, Any]]:
        """Starts an episode on instance ``seed`` of the split (see
        reset_slot); ``info`` names the instance (``seed``, ``split``,
        ``version``, ``instruction``)."""
        s = await self.reset_slot(seed, options)
        return await self._obs(s), slot_info(s, self.instruction)

    async def step(self, action: Any, **kw: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        s = await self.step_slot(action, **kw)
        obs, info = await self._obs(s), slot_info(s, self.instruction)
        return obs, step_reward(s, obs, info), s.terminated, s.truncated, info

    async def trajectory(self):
        """The current episode's Trajectory."""
        from .trajectory import Trajectory
        if not self.episode_id:
            raise ShinkenError("no episode yet")
        return Trajectory.from_wire(await self.client.episode(self.episode_id))

    async def fork_slots(self, n: int) -> List[Slot]:
        if self.env_id is None:
            raise ShinkenError("fork before reset")
        return await self.client.fork(self.env_id, n, self.observe)

    async def aclose(self) -> None:
        """Returns the env to the server (idempotent) and closes the client if
        the env owns it."""
        await _release(self._lease)

    async def __aenter__(self) -> "AsyncEnv":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<shinken.AsyncEnv {self.env_id or 'unleased'} task={self.task!r} at {self.client.url}>"
