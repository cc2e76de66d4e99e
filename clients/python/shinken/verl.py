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

The dataset converter (``task_rows``, ``write_dataset``, and
``python -m shinken.verl dataset``) needs no verl: it writes rows in the
format verl's RLHFDataset reads (``prompt`` messages, which the dataset hands
to the loop as ``raw_prompt``; ``agent_name``; ``extra_info.task``), as
parquet when pyarrow is importable and as JSON Lines (``.json``) otherwise.
``ShinkenAgentLoop`` exists only where verl is importable.

Episodes that failed for an infrastructure reason (``extra_fields["drop"]``,
see shinken.agent.DROP_EXITS) get ``reward_score`` 0.0 and, with
``mask_dropped`` (the default), an all-zero ``response_mask`` so that a stock
verl trainer takes no gradient from them; verl copies ``extra_fields`` into
``batch.non_tensor_batch``, so a trainer can also filter on ``drop`` before
computing group advantages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence

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


def task_rows(tasks: Iterable[Dict[str, Any]], *, agent_name: str = AGENT_NAME, data_source: str = "shinken",
              system_prompt: Optional[str] = None, seeds: Sequence[Optional[int]] = (None,)) -> List[Dict[str, Any]]:
    """Rows of verl's RL dataset, one per task and seed.

    ``tasks`` are /v1/spec task entries ({id, instruction, max_steps}) or task
    files' dicts. Each row: ``prompt`` (the opening messages: the system
    prompt, then the instruction as the user turn the first screenshot joins),
    ``agent_name`` (this loop's registered name), ``data_source``,
    ``ability``, ``reward_model`` (the env scores: style "env"), and
    ``extra_info`` {task, index, seed?, max_steps}.
    """
    rows: List[Dict[str, Any]] = []
    for t in tasks:
        for seed in seeds:
            msgs: List[Dict[str, Any]] = []
            if system_prompt:
                msgs.append({"role": "system", "content": system_prompt})
            msgs.append({"role": "user", "content": t.get("instruction") or ""})
            extra: Dict[str, Any] = {"task": t["id"], "index": len(rows), "max_steps": int(t.get("max_steps") or 0)}
            if seed is not None:
                extra["seed"] = int(seed)
            rows.append({"data_source": data_source, "agent_name": agent_name, "prompt": msgs,
                         "ability": "computer_use", "reward_model": {"style": "env", "ground_truth": ""},
                         "extra_info": extra})
    return rows


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
        """One Shinken episode per verl sample (see the module doc).

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
            out = await loop.run(client, task, seed=extra.get("seed"), messages=messages)
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


# -- command line ------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shinken.verl", description="verl dataset from a server's tasks")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dataset", help="write one row per task (and seed)")
    d.add_argument("--url", default=None, help="envserver URL (default $SHINKEN_URL)")
    d.add_argument("--token", default=None)
    d.add_argument("--out", required=True, help="a .parquet (needs pyarrow) or .json (JSON Lines) path")
    d.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    d.add_argument("--seeds", default="", help="comma-separated seeds (default: none)")
    d.add_argument("--system-prompt", default=None)
    d.add_argument("--agent-name", default=AGENT_NAME)
    a = ap.parse_args(argv)
    from .client import Client
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
    seeds: List[Optional[int]] = [int(s) for s in a.seeds.split(",") if s] or [None]
    rows = task_rows(tasks, agent_name=a.agent_name, system_prompt=a.system_prompt, seeds=seeds)
    print(f"{write_dataset(rows, a.out)}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
