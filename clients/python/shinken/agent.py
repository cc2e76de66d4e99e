"""shinken.agent: a framework-free async multi-turn episode loop.

The loop drives one env (or a group forked from one state) with a token-level
model: it builds each turn's prompt from the instruction of the task instance
the reset drew (the reply's ``info["instruction"]``) and the screenshot,
calls ``generate(prompt_ids, images)``, decodes the model's text, steps the env
with that text, its dialect and its token ids, and appends the next
observation as the next user turn. What it returns has exactly the fields of
verl's ``AgentLoopOutput`` (see shinken.verl for the verl subclass):

    prompt_ids, response_ids, response_mask, response_logprobs,
    multi_modal_data {"images": [...]}, reward_score, num_turns, metrics,
    extra_fields

Token faithfulness. The sequence is built the way the model saw it, never
re-tokenized: the first prompt is the chat template of the opening messages;
each response is the model's own token ids (mask 1, its logprobs); each later
observation is the template of just the new user turn (mask 0, logprob 0.0),
appended to the context. So the prompt of turn k is exactly turn k-1's prompt
+ response + observation tokens, the same ids sent to the env in ``tokens``,
and ``response_mask`` is 1 on exactly the model's tokens. Images are listed
in ``multi_modal_data["images"]`` in the order their placeholders occur.

Per-step mode (``per_step=True``) returns one output per turn instead: the
turn's full prompt (the conversation so far re-rendered, with screenshots only
in the last ``window`` user turns when a window is set) and that turn's
response, as step-wise trainers take them. A sliding window drops old images
from the context, so it exists only per step: one growing sequence cannot
lose tokens it already holds.

Infrastructure failures (the sandbox died, the verifier failed, the server
or the env was lost, a step timed out) end the episode with a typed
``exit_reason``, ``extra_fields["drop"] = True`` and ``reward_score`` None:
the episode was not scored, and a trainer drops the sample rather than
training on a 0 (the verl row export does the same: a null reward_score).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from .aenv import AsyncEnv
from .aio import AsyncClient, Slot
from .errors import (EpisodeOver, NotFound, SandboxDied,
                     ShinkenError, StepTimeout, TransportError, Unsupported, error_from_wire)

# What ends an episode (flagged drop) instead of being raised: an error whose
# fault is the infrastructure's by the one error table (aci.Codes, mirrored
# in shinken.errors and checked against it by the golden test), and, for a
# step of an env the loop holds, the env being gone (not_found after a
# server restart, episode_over from a server that closed it): the loop
# cannot go on with it. Anything else (a bad request, an unknown task, an
# unsupported option) is the caller's bug and is raised.
def _infra(err: BaseException) -> bool:
    return isinstance(err, ShinkenError) and err.fault == "infrastructure"


def _lost(err: BaseException) -> bool:
    return _infra(err) or isinstance(err, (NotFound, EpisodeOver))


__all__ = ["Exit", "DROP_EXITS", "Generation", "Template", "AgentOutput", "AgentLoop", "adopt"]


class Exit:
    """Why an episode of the loop ended (``extra_fields["exit_reason"]``).

    The env's own reasons (the server's precedence applies among them) and the
    loop's: ``max_turns`` (the loop's turn budget, below the task's
    max_steps), ``response_length`` (the token budget), ``generation_aborted``
    (the model server aborted the request), ``env_lost`` (the env is gone:
    not_found), ``server_lost`` (no reply from the server), ``step_timeout``,
    ``infra_error`` (pool exhausted, a server-side timeout or internal error).
    """

    TASK_COMPLETE = "task_complete"
    MAX_STEPS = "max_steps"
    AGENT_ERROR = "agent_error"
    SCORER_ERROR = "scorer_error"
    SANDBOX_DIED = "sandbox_died"
    SETUP_ERROR = "setup_error"
    MAX_TURNS = "max_turns"
    RESPONSE_LENGTH = "response_length"
    GENERATION_ABORTED = "generation_aborted"
    ENV_LOST = "env_lost"
    SERVER_LOST = "server_lost"
    STEP_TIMEOUT = "step_timeout"
    INFRA_ERROR = "infra_error"


#: Exit reasons that are the infrastructure's, not the policy's: the sample is
#: flagged ``drop`` and its reward is not a score.
DROP_EXITS = frozenset({Exit.SCORER_ERROR, Exit.SANDBOX_DIED, Exit.SETUP_ERROR, Exit.GENERATION_ABORTED,
                        Exit.ENV_LOST, Exit.SERVER_LOST, Exit.STEP_TIMEOUT, Exit.INFRA_ERROR})


@dataclass
class Generation:
    """One model call's result: verl's TokenOutput fields."""

    token_ids: List[int]
    log_probs: Optional[List[float]] = None
    stop_reason: Optional[str] = None  # "completed", "aborted", a finish reason, or None


def as_generation(g: Any) -> Generation:
    """A Generation from what a generate function returned: a Generation, a
    (token_ids, log_probs?, stop_reason?) tuple, or any object with verl's
    TokenOutput attributes."""
    if isinstance(g, Generation):
        return g
    if isinstance(g, (tuple, list)):
        ids = list(g[0])
        lp = list(g[1]) if len(g) > 1 and g[1] is not None else None
        stop = g[2] if len(g) > 2 else None
        return Generation(ids, lp, stop)
    if hasattr(g, "token_ids"):
        lp = getattr(g, "log_probs", None)
        return Generation(list(g.token_ids), list(lp) if lp is not None else None,
                          getattr(g, "stop_reason", None))
    raise TypeError(f"generate returned {type(g).__name__}; want (token_ids, log_probs, stop_reason)")


class Template(Protocol):
    """The chat template: messages (+ their images, in order) to token ids,
    and token ids back to text. Either method may be a coroutine.

    ``encode(messages, images, first=True)`` renders the opening messages with
    the generation prompt; ``first=False`` renders only the given new turn(s)
    as a continuation (no system prompt), the tokens appended after the
    model's response.
    """

    def encode(self, messages: List[Dict[str, Any]], images: List[Any], *, first: bool) -> Any: ...

    def decode(self, token_ids: List[int]) -> Any: ...


GenerateFn = Callable[[List[int], List[Any]], Awaitable[Any]]


async def _maybe(v: Any) -> Any:
    return await v if inspect.isawaitable(v) else v


@dataclass
class AgentOutput:
    """One sample, with exactly the fields of verl's AgentLoopOutput."""

    prompt_ids: List[int]
    response_ids: List[int]
    response_mask: List[int]
    response_logprobs: Optional[List[float]] = None
    multi_modal_data: Dict[str, Any] = field(default_factory=dict)
    reward_score: Optional[float] = None
    num_turns: int = 0
    metrics: Dict[str, Any] = field(default_factory=dict)
    extra_fields: Dict[str, Any] = field(default_factory=dict)

    @property
    def drop(self) -> bool:
        """True when the episode failed for an infrastructure reason."""
        return bool(self.extra_fields.get("drop"))

    @property
    def exit_reason(self) -> str:
        return self.extra_fields.get("exit_reason", "")

    def to_dict(self) -> Dict[str, Any]:
        return {"prompt_ids": self.prompt_ids, "response_ids": self.response_ids,
                "response_mask": self.response_mask, "response_logprobs": self.response_logprobs,
                "multi_modal_data": self.multi_modal_data, "reward_score": self.reward_score,
                "num_turns": self.num_turns, "metrics": self.metrics, "extra_fields": self.extra_fields}


def adopt(client: AsyncClient, slot: Slot, *, task: Optional[str], instruction: Optional[str],
          observe: Any = None, dialect: str = "auto", coords: Any = None, split: Optional[str] = None) -> AsyncEnv:
    """An AsyncEnv holding an env a fork (or another call) already leased. Its
    instance (instruction, seed, version) is the one the slot's info names
    (a fork's is its parent's); ``instruction`` is the fallback for a reply
    that names none."""
    env = AsyncEnv(client, task, observe=observe, dialect=dialect, coords=coords, obs_mode="lazy", own=False,
                   split=split)
    env._lease.env_id = slot.env_id
    env._lease.loop = asyncio.get_running_loop()
    env.episode_id = slot.episode_id or None
    env.adopt_instance(slot)
    if not slot.info.get("instruction"):
        env.instruction = instruction
    env.steps = int(slot.info.get("step") or 0)
    env.last = slot
    return env


ImageSize = Union[None, Tuple[int, int], Callable[[int, int], Tuple[int, int]]]


def _frame_image(slot: Slot, size: ImageSize):
    """The slot's frame as an RGB PIL image, resized for the model's processor."""
    from PIL import Image
    f = slot.frame
    if f is None:
        raise ShinkenError("observation without a frame", env_id=slot.env_id)
    im = Image.fromarray(f.array())
    if size is not None:
        w, h = size(im.width, im.height) if callable(size) else size
        if (w, h) != (im.width, im.height):
            im = im.resize((int(w), int(h)), Image.BICUBIC)
    return im


@dataclass
class _Turn:
    """What one turn of the loop produced (kept for per-step outputs)."""

    prompt_ids: List[int]
    response_ids: List[int]
    log_probs: Optional[List[float]]
    images: List[Any]
    reward: float


@dataclass
class _Episode:
    messages: List[Dict[str, Any]]
    images: List[Any]
    env: Optional[AsyncEnv] = None
    context: List[int] = field(default_factory=list)  # the ids the model sees next
    prompt_len: int = 0
    mask: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    have_logprobs: bool = True
    turns: List[_Turn] = field(default_factory=list)
    user_turns: int = 0
    reward: float = 0.0
    exit_reason: str = ""
    env_exit_reason: str = ""
    error: Optional[ShinkenError] = None
    agent_errors: int = 0
    timings: Dict[str, float] = field(default_factory=lambda: {
        "reset_s": 0.0, "generate_s": 0.0, "env_s": 0.0, "server_s": 0.0, "template_s": 0.0, "image_s": 0.0,
        "total_s": 0.0})


class AgentLoop:
    """A multi-turn agent loop over envserver envs.

    ``generate(prompt_ids, images)`` is the token-level model (a coroutine
    returning a Generation, a (token_ids, log_probs, stop_reason) tuple or a
    verl TokenOutput); ``template`` renders and decodes (see Template).

    Options: ``dialect`` of the model's text (server-side parse); ``max_turns``
    (default: the task's max_steps, where the server truncates and scores; a
    lower budget ends the episode with a ``fail`` step so the verifier still
    scores the state reached); ``max_response_len`` the token budget of the
    response side (verl's response_length); ``image_size`` resizes each
    screenshot for the processor — a (w, h) or a function of the frame's
    (w, h) — and the steps then declare ``coords`` {w, h} so the model's
    points map back to the screen; ``coords`` declares a space explicitly
    instead; ``system_prompt`` opens the conversation when no messages are
    given; ``observation_text(turn, slot)`` is the text of each later user
    turn beside its screenshot; ``per_step``/``window`` as in the module doc;
    ``observe`` the observation request.
    """

    def __init__(self, generate: GenerateFn, template: Template, *, dialect: str = "auto",
                 max_turns: Optional[int] = None, max_response_len: Optional[int] = None,
                 image_size: ImageSize = None, coords: Any = None, system_prompt: Optional[str] = None,
                 observation_text: Optional[Callable[[int, Slot], str]] = None, per_step: bool = False,
                 window: Optional[int] = None, observe: Any = None):
        if window is not None and not per_step:
            raise ValueError("window needs per_step=True: one growing sequence cannot drop the images it holds")
        if window is not None and window < 1:
            raise ValueError("window: want at least 1 screenshot")
        self.generate = generate
        self.template = template
        self.dialect = dialect
        self.max_turns = max_turns
        self.max_response_len = max_response_len
        self.image_size = image_size
        self.coords = coords
        if coords is None and image_size is not None and not callable(image_size):
            self.coords = {"w": int(image_size[0]), "h": int(image_size[1])}
        self.system_prompt = system_prompt
        self.observation_text = observation_text or default_observation_text
        self.per_step = per_step
        self.window = window
        self.observe = observe

    # -- entry points ---------------------------------------------------------------------

    async def run(self, env: Union[AsyncEnv, AsyncClient], task: Optional[str] = None, *,
                  seed: Optional[int] = None, messages: Optional[Sequence[Dict[str, Any]]] = None,
                  split: Optional[str] = None, version: Optional[int] = None
                  ) -> Union[AgentOutput, List[AgentOutput]]:
        """Runs one episode: resets ``env`` (an AsyncEnv, or a client to lease
        a fresh env from and close after) on instance ``seed`` of ``task``'s
        ``split`` (None: the server draws one) and loops until the episode
        ends. The user turn is the instance's instruction, from the reset.
        ``messages`` are the opening messages (verl's raw_prompt); the first
        screenshot joins the last user message, and when they hold no user
        message the instance's instruction is added as one. ``version`` is
        the family version the messages were written for (a dataset row's
        ``extra_info["version"]``): a reset that draws another version
        raises, since the messages describe an instance the server no
        longer serves."""
        own = not isinstance(env, AsyncEnv)
        e = AsyncEnv(env, task, observe=self.observe, dialect=self.dialect, obs_mode="lazy", own=False) \
            if own else env
        t0 = time.perf_counter()
        ep = _Episode(messages=[dict(m) for m in messages or ()], images=[], env=e)
        options: Dict[str, Any] = {}
        if task:
            options["task"] = task
        if split:
            options["split"] = split
        try:
            try:
                slot = await e.reset_slot(seed, options or None)
            except ShinkenError as err:
                if not _infra(err):
                    raise
                return self._failed_start(ep, err, t0)
            finally:
                ep.timings["reset_s"] = time.perf_counter() - t0
            if version is not None and e.version is not None and int(version) != e.version:
                raise ShinkenError(f"task {e.task} is at version {e.version} on the server, but the opening "
                                   f"messages were written for version {version}: rebuild the dataset",
                                   env_id=e.env_id)
            return await self._episode(e, slot, ep, t0)
        finally:
            if own:
                await e.aclose()

    async def run_group(self, client: AsyncClient, task: str, n: int, *, seed: Optional[int] = None,
                        messages: Optional[Sequence[Dict[str, Any]]] = None, split: Optional[str] = None
                        ) -> List[Union[AgentOutput, List[AgentOutput]]]:
        """Runs n episodes from one start state (a GRPO group): one env is
        reset on instance ``seed`` of ``split``, forked n ways (the forks stay
        on its server, on the same instance) and closed, and the n children
        play concurrently. Where the server cannot fork, n envs are reset
        with the parent's seed instead, so the group still shares one
        instance (``extra_fields["group_start"]`` says which)."""
        parent = AsyncEnv(client, task, observe=self.observe, dialect=self.dialect, obs_mode="lazy", own=False,
                          split=split)
        t0 = time.perf_counter()
        try:
            await parent.reset_slot(seed)
            if seed is None:
                seed = parent.seed  # the drawn instance, for the reset fallback below
            slots = await parent.fork_slots(n)
        except ShinkenError as err:
            if not _lost(err):
                raise
            ep = _Episode(messages=[], images=[], error=err)
            return [self._failed_start(ep, err, t0) for _ in range(n)]
        except Unsupported:
            await parent.aclose()
            outs = await asyncio.gather(*(self.run(client, task, seed=seed, messages=messages, split=split)
                                          for _ in range(n)))
            for o in outs:
                for x in (o if isinstance(o, list) else [o]):
                    x.extra_fields["group_start"] = "reset"
            return list(outs)
        finally:
            await parent.aclose()

        async def child(s: Slot):
            ep = _Episode(messages=[dict(m) for m in messages or ()], images=[])
            if s.error is not None:
                return self._failed_start(ep, s.error, t0)
            env = adopt(client, s, task=task, instruction=parent.instruction, observe=self.observe,
                        dialect=self.dialect, split=split)
            ep.env = env
            try:
                out = await self._episode(env, s, ep, time.perf_counter())
            finally:
                await env.aclose()
            for x in (out if isinstance(out, list) else [out]):
                x.extra_fields["group_start"] = "fork"
                x.extra_fields["fork_of"] = parent.episode_id or ""
            return out

        return list(await asyncio.gather(*(child(s) for s in slots)))

    # -- the loop ---------------------------------------------------------------------------

    async def _episode(self, env: AsyncEnv, slot: Slot, ep: _Episode, t0: float):
        loop = asyncio.get_running_loop()
        max_turns = self.max_turns or _task_max_steps(await env.client.spec(), env.task) or 0
        ti = time.perf_counter()
        img = await loop.run_in_executor(None, _frame_image, slot, self.image_size)
        ep.timings["image_s"] += time.perf_counter() - ti
        self._open(ep, env.instruction or "", img)
        tt = time.perf_counter()
        ep.context = list(await _maybe(self.template.encode(ep.messages, list(ep.images), first=True)))
        ep.timings["template_s"] += time.perf_counter() - tt
        ep.prompt_len = len(ep.context)
        turn = 0
        while True:
            prompt = self._turn_prompt(ep) if self.per_step else None
            if self.per_step:
                tt = time.perf_counter()
                prompt_ids = list(await _maybe(self.template.encode(prompt[0], prompt[1], first=True)))
                ep.timings["template_s"] += time.perf_counter() - tt
            else:
                prompt_ids = list(ep.context)
            tg = time.perf_counter()
            gen = as_generation(await self.generate(prompt_ids, list(prompt[1] if prompt else ep.images)))
            ep.timings["generate_s"] += time.perf_counter() - tg
            if gen.stop_reason == "aborted":
                ep.exit_reason = Exit.GENERATION_ABORTED
                break
            ids = list(gen.token_ids)
            lp = list(gen.log_probs) if gen.log_probs is not None else None
            if lp is not None and len(lp) != len(ids):
                raise ShinkenError(f"generate returned {len(ids)} token ids and {len(lp)} logprobs")
            ep.have_logprobs = ep.have_logprobs and lp is not None
            tt = time.perf_counter()
            text = str(await _maybe(self.template.decode(ids)))
            ep.timings["template_s"] += time.perf_counter() - tt
            tokens = {"prompt_ids": prompt_ids, "response_ids": ids, "response_logprobs": lp,
                      "finish_reason": gen.stop_reason or ""}
            turn += 1
            te = time.perf_counter()
            try:
                s = await env.step_slot({"text": text, "dialect": self.dialect, "tokens": tokens,
                                         "coords": self.coords})
            except ShinkenError as err:
                if not _lost(err):
                    raise
                ep.timings["env_s"] += time.perf_counter() - te
                self._record(ep, prompt_ids, ids, lp, prompt, 0.0)
                ep.exit_reason, ep.error = _exit_of_error(err), err
                break
            ep.timings["env_s"] += time.perf_counter() - te
            ep.timings["server_s"] += _server_s(s)
            r = s.reward or 0.0  # None: an unscored end, which the exit reason drops
            ep.reward += r
            if s.info.get("error") is not None and not s.info.get("exit_reason") in DROP_EXITS:
                ep.agent_errors += 1
            self._record(ep, prompt_ids, ids, lp, prompt, r)
            ep.messages.append({"role": "assistant", "content": text})
            if s.terminated or s.truncated:
                ep.env_exit_reason = str(s.info.get("exit_reason") or "")
                ep.exit_reason = ep.env_exit_reason or (Exit.MAX_STEPS if s.truncated else Exit.TASK_COMPLETE)
                if isinstance(s.info.get("error"), dict) and ep.exit_reason in DROP_EXITS:
                    ep.error = error_from_wire(s.info["error"], env_id=s.env_id)
                break
            if max_turns and turn >= max_turns:  # no observation after the last response
                await self._stop(env, ep, Exit.MAX_TURNS)
                break
            ti = time.perf_counter()
            img = await loop.run_in_executor(None, _frame_image, s, self.image_size)
            ep.timings["image_s"] += time.perf_counter() - ti
            msg = self._user_turn(turn, s)
            if not self.per_step:
                tt = time.perf_counter()
                obs_ids = list(await _maybe(self.template.encode([msg], [img], first=False)))
                ep.timings["template_s"] += time.perf_counter() - tt
                if self.max_response_len is not None and \
                        len(ep.mask) + len(obs_ids) >= self.max_response_len:
                    await self._stop(env, ep, Exit.RESPONSE_LENGTH)
                    break
                ep.context += obs_ids
                ep.mask += [0] * len(obs_ids)
                ep.logprobs += [0.0] * len(obs_ids)
            ep.messages.append(msg)
            ep.images.append(img)
            ep.user_turns += 1
        ep.timings["total_s"] = time.perf_counter() - t0
        return self._outputs(env, ep)

    def _open(self, ep: _Episode, instruction: str, img: Any) -> None:
        """The opening messages with the first screenshot in the last user
        turn; without given messages (or without a user turn in them) the
        user turn is the instance's instruction."""
        if not ep.messages and self.system_prompt:
            ep.messages.append({"role": "system", "content": self.system_prompt})
        last = next((m for m in reversed(ep.messages) if m.get("role") == "user"), None)
        if last is None:
            last = {"role": "user", "content": [{"type": "text", "text": instruction}] if instruction else []}
            ep.messages.append(last)
        content = last.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content else []
        last["content"] = list(content or ()) + [{"type": "image"}]
        ep.images.append(img)

    def _user_turn(self, turn: int, s: Slot) -> Dict[str, Any]:
        text = self.observation_text(turn, s)
        content: List[Dict[str, Any]] = [{"type": "image"}]
        if text:
            content.append({"type": "text", "text": text})
        return {"role": "user", "content": content}

    def _turn_prompt(self, ep: _Episode) -> Tuple[List[Dict[str, Any]], List[Any]]:
        """Per-step mode: the conversation so far, with images only in the last
        ``window`` user turns that carry one."""
        msgs: List[Dict[str, Any]] = []
        k = 0
        keep = self.window or len(ep.images)
        n_img = len(ep.images)
        imgs: List[Any] = []
        for m in ep.messages:
            c = m.get("content")
            if isinstance(c, list) and any(p.get("type") == "image" for p in c):
                parts = []
                for p in c:
                    if p.get("type") == "image":
                        if k >= n_img - keep:
                            parts.append(p)
                            imgs.append(ep.images[k])
                        else:
                            parts.append({"type": "text", "text": "(earlier screenshot omitted)"})
                        k += 1
                    else:
                        parts.append(p)
                msgs.append({**m, "content": parts})
            else:
                msgs.append(m)
        return msgs, imgs

    def _record(self, ep: _Episode, prompt_ids: List[int], ids: List[int], lp: Optional[List[float]],
                prompt: Optional[Tuple[List[Any], List[Any]]], reward: float) -> None:
        ep.turns.append(_Turn(prompt_ids, ids, lp, list(prompt[1]) if prompt else [], reward))
        if not self.per_step:
            ep.context += ids
            ep.mask += [1] * len(ids)
            ep.logprobs += lp if lp is not None else [0.0] * len(ids)

    async def _stop(self, env: AsyncEnv, ep: _Episode, why: str) -> None:
        """Ends an episode the loop cut short with a ``fail`` step, so the
        verifier scores the state reached (its reward is real, not a 0)."""
        ep.exit_reason = why
        te = time.perf_counter()
        try:
            s = await env.step_slot({"verb": "fail"})
        except ShinkenError as err:
            if not _lost(err):
                raise
            ep.exit_reason, ep.error = _exit_of_error(err), err
            return
        finally:
            ep.timings["env_s"] += time.perf_counter() - te
        r = s.reward or 0.0  # None: an unscored end, which the exit reason drops
        ep.reward += r
        ep.env_exit_reason = str(s.info.get("exit_reason") or "")
        if ep.env_exit_reason in DROP_EXITS:
            ep.exit_reason = ep.env_exit_reason
        if ep.turns:
            ep.turns[-1].reward += r

    def _failed_start(self, ep: _Episode, err: ShinkenError, t0: float):
        ep.exit_reason, ep.error = _exit_of_error(err), err
        ep.timings["total_s"] = time.perf_counter() - t0
        out = AgentOutput(prompt_ids=[], response_ids=[], response_mask=[], multi_modal_data={"images": []},
                          reward_score=None, num_turns=0)
        out.metrics = _metrics(ep)
        out.extra_fields = self._extra(None, ep)
        return [out] if self.per_step else out

    def _extra(self, env: Optional[AsyncEnv], ep: _Episode) -> Dict[str, Any]:
        drop = ep.exit_reason in DROP_EXITS
        x: Dict[str, Any] = {
            "exit_reason": ep.exit_reason,
            "env_exit_reason": ep.env_exit_reason,
            "drop": drop,
            "episode_id": (env.episode_id if env else None) or "",
            "env_id": (env.env_id if env else None) or "",
            "task": (env.task if env else None) or "",
            # The instance the episode ran (None when the reset failed).
            "seed": env.seed if env else None,
            "split": env.instance.get("split") if env else None,
            "env_steps": len(ep.turns),
            "agent_errors": ep.agent_errors,
            "timings": dict(ep.timings),
        }
        if ep.error is not None:
            x["error"] = {"code": ep.error.code or type(ep.error).__name__, "message": ep.error.message}
        return x

    def _outputs(self, env: AsyncEnv, ep: _Episode):
        extra = self._extra(env, ep)
        reward = None if extra["drop"] else ep.reward
        metrics = _metrics(ep)
        if not self.per_step:
            n = ep.prompt_len
            return AgentOutput(
                prompt_ids=ep.context[:n], response_ids=ep.context[n:], response_mask=list(ep.mask),
                response_logprobs=list(ep.logprobs) if ep.have_logprobs and ep.turns else None,
                multi_modal_data={"images": list(ep.images)}, reward_score=reward,
                num_turns=1 + len(ep.turns) + ep.user_turns, metrics=metrics, extra_fields=extra)
        outs: List[AgentOutput] = []
        togo = reward
        rtg: List[Optional[float]] = []
        for t in ep.turns:  # return-to-go: this turn's reward and every later one
            rtg.append(togo)
            togo = None if togo is None else togo - t.reward
        for i, t in enumerate(ep.turns):
            outs.append(AgentOutput(
                prompt_ids=t.prompt_ids, response_ids=t.response_ids, response_mask=[1] * len(t.response_ids),
                response_logprobs=list(t.log_probs) if t.log_probs is not None else None,
                multi_modal_data={"images": list(t.images)}, reward_score=rtg[i], num_turns=2,
                metrics=metrics, extra_fields={**extra, "step_index": i, "episode_reward": reward}))
        return outs


def default_observation_text(turn: int, s: Slot) -> str:
    """The text beside a later screenshot: the refusal of the model's last
    action, when it was refused (its step still counted)."""
    err = s.info.get("error")
    if isinstance(err, dict):
        return f"Your last action was not run: {err.get('code')}: {err.get('message')}"
    return ""


def _task_max_steps(spec: Dict[str, Any], task: Optional[str]) -> Optional[int]:
    for t in spec.get("tasks") or ():
        if t.get("id") == task:
            return int(t.get("max_steps") or 0) or None
    return None


def _server_s(s: Slot) -> float:
    tm = s.info.get("timings") or {}
    return sum(float(v) for v in tm.values()) / 1e6


def _exit_of_error(err: ShinkenError) -> str:
    if isinstance(err, SandboxDied):
        return Exit.SANDBOX_DIED
    if isinstance(err, StepTimeout):
        return Exit.STEP_TIMEOUT
    if isinstance(err, TransportError):
        return Exit.SERVER_LOST
    if isinstance(err, (NotFound, EpisodeOver)):
        return Exit.ENV_LOST
    return Exit.INFRA_ERROR


def _metrics(ep: _Episode) -> Dict[str, Any]:
    """verl's AgentLoopMetrics fields: seconds generating, seconds in env
    steps (its "tool_calls"), preemptions unknown (-1)."""
    return {"generate_sequences": ep.timings["generate_s"], "tool_calls": ep.timings["env_s"],
            "num_preempted": -1}

