"""shinken.verl: Shinken envs inside verl's agent loop.

verl plugs environments in through its agent loop: a subclass of
``AgentLoopBase`` registered by name, listed in the yaml file at
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` and chosen per
dataset row by its ``agent_name``. ``ShinkenAgentLoop`` is that subclass, a
thin layer over shinken.agent: verl's ``server_manager.generate`` is the
model, verl's ``apply_chat_template`` (processor or tokenizer) is the
template, and the output is verl's ``AgentLoopOutput``. One instance runs one
episode (verl builds one per sample); they share one client per event loop.

Written against verl's ``verl/experimental/agent_loop/agent_loop.py`` at
commit b178a3cd (version 0.8.0.dev, 2026-01-29); the v0.7.0 release has the
same ``run``, ``generate`` and ``AgentLoopOutput`` (its ``dataset_config`` is
a plain DictConfig rather than a DictConfigWrap; this class passes it through
untouched either way).

The dataset converter (``task_rows``, ``resolve_instances``,
``write_dataset``, and ``python -m shinken.verl dataset``) needs no verl: it
writes rows in the format verl's RLHFDataset reads (``prompt`` messages,
which the dataset hands to the loop as ``raw_prompt``; ``agent_name``;
``extra_info`` naming the task instance: ``task``, ``seed``, ``split``), as
parquet when pyarrow is importable and as JSON Lines (``.json``) otherwise.
Tasks are families whose instances are drawn from a seed, so each seeded
row's user turn is its own instance's instruction, read from a reset of
that instance (the spec lists only the family's template); a row without a
seed lets the server draw an instance per episode, and the loop makes the
drawn instance's instruction its user turn. ``ShinkenAgentLoop`` exists
only where verl is importable.

Episodes that failed for an infrastructure reason (``extra_fields["drop"]``,
see shinken.agent.DROP_EXITS) get ``reward_score`` 0.0 and, with
``mask_dropped`` (the default), an all-zero ``response_mask`` so that a stock
verl trainer takes no gradient from them; verl copies ``extra_fields`` into
``batch.non_tensor_batch``, so a trainer can also filter on ``drop`` before
computing group advantages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .agent import AgentLoop, AgentOutput

#: The verl source this adapter was written against.
VERL_REFERENCE = "volcengine/verl b178a3cd (0.8.0.dev, 2026-01-29); interfaces unchanged from v0.7.0"

AGENT_NAME = "shinken_agent"

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
    HAVE_VERL = True
except ImportError:  # verl is optional: the converter works without it
    HAVE_VERL = False


# -- dataset -------------------------------------------------------------------------------


Instances = Mapping[Tuple[str, int], Mapping[str, Any]]


def task_rows(tasks: Iterable[Dict[str, Any]], *, agent_name: str = AGENT_NAME, data_source: str = "shinken",
              system_prompt: Optional[str] = None, seeds: Sequence[Optional[int]] = (None,),
              split: str = "train", instances: Optional[Instances] = None) -> List[Dict[str, Any]]:
    """Rows of verl's RL dataset, one per task instance: each task with each
    seed, in ``split`` ("train" or "test"), so ``seeds=[0, 1]`` names train
    instances 0 and 1 of every task.

    ``tasks`` are /v1/spec task entries ({id, max_steps, ...}) or task files'
    dicts; their ``instruction`` is the family's template and is never the
    prompt. ``instances`` maps (task id, seed) to what a reset of that
    instance named (``resolve_instances``): its ``instruction`` and
    ``version``. Each row: ``prompt`` (the opening messages: the system
    prompt, then the instance's instruction as the user turn the first
    screenshot joins; a row whose instance is not resolved here, a seedless
    one above all, has no user turn and the loop adds the instruction of the
    instance its reset draws), ``agent_name`` (this loop's registered name),
    ``data_source``, ``ability``, ``reward_model`` (the env scores: style
    "env"), and ``extra_info`` {task, index, max_steps, split, seed?,
    version?} (version: the family version the prompt was written for).
    """
    rows: List[Dict[str, Any]] = []
    for t in tasks:
        for seed in seeds:
            inst = (instances or {}).get((t["id"], int(seed))) if seed is not None else None
            msgs: List[Dict[str, Any]] = []
            if system_prompt:
                msgs.append({"role": "system", "content": system_prompt})
            if inst and inst.get("instruction"):
                msgs.append({"role": "user", "content": str(inst["instruction"])})
            extra: Dict[str, Any] = {"task": t["id"], "index": len(rows), "max_steps": int(t.get("max_steps") or 0),
                                     "split": split}
            if seed is not None:
                extra["seed"] = int(seed)
            if inst and inst.get("version") is not None:
                extra["version"] = int(inst["version"])
            rows.append({"data_source": data_source, "agent_name": agent_name, "prompt": msgs,
                         "ability": "computer_use", "reward_model": {"style": "env", "ground_truth": ""},
                         "extra_info": extra})
    return rows


#: The observation the converter's resets ask for: it reads only their info.
_PEEK_OBSERVE = {"format": "jpeg", "max_long_edge": 64}


async def resolve_instances(client: Any, pairs: Iterable[Tuple[str, int]], *, split: Optional[str] = None,
                            concurrency: int = 4) -> Dict[Tuple[str, int], Dict[str, Any]]:
    """What each (task, seed) instance of ``split`` is: an env is reset on it
    and its info read (``instruction``, ``version``, ``seed``, ``split``,
    ``task``), on ``concurrency`` envs that reset in place one instance
    after another and are closed at the end. ``client`` is an AsyncClient.
    A reset the server refuses (an unknown split, a family without a test
    split) raises its typed error (BadRequest)."""
    from .aenv import AsyncEnv
    todo = list(dict.fromkeys((str(t), int(s)) for t, s in pairs))
    out: Dict[Tuple[str, int], Dict[str, Any]] = {}
    queue = iter(todo)

    async def worker() -> None:
        env = AsyncEnv(client, observe=_PEEK_OBSERVE, obs_mode="bytes", own=False, split=split)
        try:
            for task, seed in queue:  # one shared iterator: each instance is reset once
                await env.reset_slot(seed, {"task": task})
                out[(task, seed)] = {**env.instance, "instruction": env.instruction}
        finally:
            await env.aclose()

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(concurrency, len(todo))))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:  # a failed reset stops the others too
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return out


def write_dataset(rows: Sequence[Dict[str, Any]], path: str) -> str:
    """Writes rows as parquet (path ending .parquet, needs pyarrow) or JSON
    Lines (.json, which verl reads with the datasets json loader); returns
    the path written."""
    if path.endswith(".parquet"):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError("writing parquet needs pyarrow; write a .json path instead "
                              "(verl reads JSON Lines too)") from None
        pq.write_table(pa.Table.from_pylist(list(rows)), path)
        return path
    if not path.endswith(".json"):
        raise ValueError(f"{path}: want a .parquet or .json path (the suffixes verl's RLHFDataset reads)")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


# -- the agent loop ----------------------------------------------------------------------------


def _cfg(c: Any, path: str, default: Any = None) -> Any:
    """A nested config value (OmegaConf or attribute objects), default when absent."""
    for k in path.split("."):
        if c is None:
            return default
        if isinstance(c, dict):
            c = c.get(k)
        else:
            try:
                c = getattr(c, k)
            except (AttributeError, KeyError):
                return default
    return default if c is None else c


def servers_from(servers: Any) -> List[str]:
    """The envserver URLs: a list, a comma-separated string, or $SHINKEN_URL."""
    if servers is None:
        servers = os.environ.get("SHINKEN_URL", "")
    if isinstance(servers, str):
        servers = [s.strip() for s in servers.split(",")]
    out = [str(s) for s in servers if s]
    if not out:
        raise ValueError("no envserver: set servers in the agent loop yaml or $SHINKEN_URL")
    return out


class _Clients:
    """One client per (servers, token, event loop), shared by every loop
    instance verl builds on that event loop."""

    _by_key: Dict[Any, Any] = {}

    @classmethod
    def get(cls, servers: List[str], token: Optional[str], timeout: float):
        import asyncio
        from .multi import connect
        key = (tuple(servers), token, id(asyncio.get_running_loop()))
        c = cls._by_key.get(key)
        if c is None:
            c = connect(servers if len(servers) > 1 else servers[0], token, timeout=timeout)
            cls._by_key[key] = c
        return c

    @classmethod
    async def aclose_all(cls) -> None:
        import asyncio
        me = id(asyncio.get_running_loop())
        for key in [k for k in cls._by_key if k[2] == me]:
            await cls._by_key.pop(key).aclose()


class VerlTemplate:
    """shinken.agent's Template over an AgentLoopBase: its own
    apply_chat_template (processor when it has one, tokenizer otherwise),
    continuation turns with the system prompt removed, as verl's tool loop
    renders tool responses."""

    def __init__(self, base: Any):
        self.base = base

    async def encode(self, messages, images, *, first):
        return await self.base.apply_chat_template(messages, images=list(images) or None,
                                                   remove_system_prompt=not first)

    async def decode(self, ids):
        tok = self.base.tokenizer
        return await self.base.loop.run_in_executor(None, lambda: tok.decode(ids, skip_special_tokens=True))


def verl_fields(out: AgentOutput, response_length: Optional[int], mask_dropped: bool) -> Dict[str, Any]:
    """AgentLoopOutput's keyword arguments from an AgentOutput, cut to
    response_length as verl's own loops cut theirs."""
    n = response_length if response_length else None
    mask = list(out.response_mask[:n])
    if out.drop and mask_dropped:
        mask = [0] * len(mask)
    # verl computes a reward itself for a None reward_score; an unscored
    # episode gets 0.0 with drop set (and, with mask_dropped, no trained tokens).
    score = 0.0 if out.reward_score is None else out.reward_score
    return {"prompt_ids": list(out.prompt_ids), "response_ids": list(out.response_ids[:n]), "response_mask": mask,
            "response_logprobs": list(out.response_logprobs[:n]) if out.response_logprobs is not None else None,
            "multi_modal_data": dict(out.multi_modal_data), "reward_score": score,
            "num_turns": out.num_turns, "metrics": dict(out.metrics), "extra_fields": dict(out.extra_fields)}


if HAVE_VERL:

    @register(AGENT_NAME)
    class ShinkenAgentLoop(AgentLoopBase):
        """One Shinken episode per verl sample (see the module doc): the
        row's instance (``extra_info`` task, seed, split; no seed: the
        server draws one) is reset and played, its ``raw_prompt`` the
        opening messages (without a user turn, the loop adds the instance's
        instruction). A row written for another family ``version`` than the
        server's raises: rebuild the dataset.

        Keyword arguments (from the agent loop yaml entry): ``servers`` (a
        URL list or comma-separated string; default $SHINKEN_URL), ``token``
        (default $SHINKEN_TOKEN), ``dialect``, ``max_turns`` (default the
        rollout's multi_turn.max_assistant_turns, else the task's max_steps),
        ``image_size`` [w, h], ``system_prompt``, ``observe``, ``per_step``
        and ``window`` (per_step returns a list of outputs, for a step-wise
        worker; verl's stock AgentLoopWorker takes one), ``mask_dropped``,
        ``timeout`` (seconds per env request).
        """

        def __init__(self, trainer_config, server_manager, tokenizer, processor, *, servers: Any = None,
                     token: Optional[str] = None, dialect: str = "auto", max_turns: Optional[int] = None,
                     image_size: Optional[Sequence[int]] = None, system_prompt: Optional[str] = None,
                     observe: Any = None, per_step: bool = False, window: Optional[int] = None,
                     mask_dropped: bool = True, timeout: float = 300.0, **kwargs):
            super().__init__(trainer_config, server_manager, tokenizer, processor, **kwargs)
            self.servers = servers_from(servers)
            self.token = token if token is not None else (os.environ.get("SHINKEN_TOKEN") or None)
            self.response_length = _cfg(self.config, "actor_rollout_ref.rollout.response_length")
            self.max_turns = max_turns or _cfg(self.config, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns")
            self.mask_dropped = mask_dropped
            self.timeout = timeout
            self.options = dict(dialect=dialect, image_size=tuple(image_size) if image_size else None,
                                system_prompt=system_prompt, observe=observe, per_step=per_step, window=window)

        async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
            extra = dict(kwargs.get("extra_info") or {})
            task = extra.get("task")
            if not task:
                raise ValueError("dataset row has no extra_info.task (see shinken.verl.task_rows)")
            request_id = uuid.uuid4().hex  # sticky: every turn of this episode on one model server

            async def generate(prompt_ids, images):
                return await self.server_manager.generate(request_id, prompt_ids=prompt_ids,
                                                          sampling_params=sampling_params,
                                                          image_data=list(images) or None)

            loop = AgentLoop(generate, VerlTemplate(self), max_turns=self.max_turns or None,
                             max_response_len=self.response_length, **self.options)
            client = _Clients.get(self.servers, self.token, self.timeout)
            messages = [dict(m) for m in (kwargs.get("raw_prompt") or ())]
            out = await loop.run(client, task, seed=_opt_int(extra.get("seed")), messages=messages,
                                 split=extra.get("split") or None, version=_opt_int(extra.get("version")))
            if isinstance(out, list):
                return [AgentLoopOutput(**verl_fields(o, self.response_length, self.mask_dropped)) for o in out]
            return AgentLoopOutput(**verl_fields(out, self.response_length, self.mask_dropped))

        @staticmethod
        async def aclose_clients() -> None:
            """Closes the clients the loops of this event loop share."""
            await _Clients.aclose_all()

else:

    def __getattr__(name: str) -> Any:
        if name == "ShinkenAgentLoop":
            raise ImportError("shinken.verl.ShinkenAgentLoop needs verl (verl.experimental.agent_loop); "
                              "the dataset converter works without it")
        raise AttributeError(name)


def _opt_int(v: Any) -> Optional[int]:
    """An optional integer field of a dataset row (a table may hold a
    missing one as None or NaN, and a present one as a float)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return int(v)


# -- command line ------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shinken.verl", description="verl dataset from a server's tasks")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dataset", help="write one row per task instance (task and seed)")
    d.add_argument("--url", default=None, help="envserver URL (default $SHINKEN_URL)")
    d.add_argument("--token", default=None)
    d.add_argument("--out", required=True, help="a .parquet (needs pyarrow) or .json (JSON Lines) path")
    d.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    d.add_argument("--seeds", default="",
                   help="comma-separated seeds: one row per instance of each task, its prompt the instance's "
                        "instruction (default: one seedless row per task; the server draws an instance "
                        "per episode)")
    d.add_argument("--split", default="train", choices=("train", "test"),
                   help="the split the instances are drawn from (default train)")
    d.add_argument("--concurrency", type=int, default=4, help="envs reading the instances' instructions")
    d.add_argument("--no-instructions", action="store_true",
                   help="write no user turn (no resets here): the loop adds each instance's instruction when "
                        "it resets it (cheaper for many rows; the prompt column then holds only the system "
                        "prompt)")
    d.add_argument("--system-prompt", default=None)
    d.add_argument("--agent-name", default=AGENT_NAME)
    a = ap.parse_args(argv)
    from .client import Client
    from .errors import ShinkenError
    try:
        seeds: List[Optional[int]] = [int(s) for s in a.seeds.split(",") if s.strip()] or [None]
    except ValueError:
        print(f"--seeds {a.seeds!r}: want comma-separated integers", file=sys.stderr)
        return 2
    with Client(a.url, a.token) as c:
        tasks = c.spec().get("tasks") or []
        want = [t for t in a.tasks.split(",") if t]
        if want:
            known = {t["id"] for t in tasks}
            missing = [t for t in want if t not in known]
            if missing:
                print(f"unknown task(s): {', '.join(missing)}", file=sys.stderr)
                return 2
            tasks = [t for t in tasks if t["id"] in want]
        # A family whose split is empty (one instance, always train) has no
        # rows in it: named, it is an error; otherwise it is left out.
        empty = [t["id"] for t in tasks if (t.get("splits") or {}).get(a.split, 1) == 0]
        if empty and want:
            print(f"task(s) without a {a.split} split: {', '.join(empty)}", file=sys.stderr)
            return 2
        if empty:
            print(f"left out (no {a.split} split): {', '.join(empty)}", file=sys.stderr)
            tasks = [t for t in tasks if t["id"] not in empty]
        pairs = [] if a.no_instructions else [(t["id"], s) for t in tasks for s in seeds if s is not None]
        try:
            instances = _loop_run(resolve_instances(c.aio, pairs, split=a.split, concurrency=a.concurrency)) \
                if pairs else {}
        except ShinkenError as e:
            print(f"reading the instances: {e}", file=sys.stderr)
            return 2
    if not tasks:
        print(f"no task has a {a.split} split", file=sys.stderr)
        return 2
    rows = task_rows(tasks, agent_name=a.agent_name, system_prompt=a.system_prompt, seeds=seeds, split=a.split,
                     instances=instances)
    print(f"{write_dataset(rows, a.out)}: {len(rows)} rows")
    return 0


def _loop_run(coro: Any) -> Any:
    from . import _loop
    return _loop.run(coro)


if __name__ == "__main__":
    sys.exit(main())
