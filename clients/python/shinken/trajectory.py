"""Trajectories (GET /v1/episodes/{id}) and their verl-style export."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Union

import msgpack

from .errors import ShinkenError, error_from_wire


def _time(v: Any) -> Optional[_dt.datetime]:
    if v is None:
        return None
    if isinstance(v, msgpack.Timestamp):
        return v.to_datetime()
    if isinstance(v, str):  # the JSON form: RFC 3339
        return _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    if isinstance(v, _dt.datetime):
        return v
    raise ShinkenError(f"unexpected time value {v!r}")


@dataclass
class Step:
    """One turn of an episode (trajectory.Step)."""

    index: int
    actions: List[Dict[str, Any]]
    prompt_ids: List[int]
    response_ids: List[int]
    response_mask: List[int]
    obs_frame: str
    reward: float
    t_ms: int
    text: str = ""
    dialect: str = ""
    response_logprobs: Optional[List[float]] = None
    finish_reason: str = ""
    error: Optional[ShinkenError] = None

    @classmethod
    def from_wire(cls, d: Dict[str, Any]) -> "Step":
        return cls(index=int(d.get("index", 0)), actions=list(d.get("actions") or []),
                   prompt_ids=list(d.get("prompt_ids") or []), response_ids=list(d.get("response_ids") or []),
                   response_mask=list(d.get("response_mask") or []), obs_frame=d.get("obs_frame") or "",
                   reward=float(d.get("reward") or 0.0), t_ms=int(d.get("t_ms") or 0),
                   text=d.get("text") or "", dialect=d.get("dialect") or "",
                   response_logprobs=d.get("response_logprobs"), finish_reason=d.get("finish_reason") or "",
                   error=error_from_wire(d["error"]) if d.get("error") else None)


@dataclass
class Trajectory:
    """One whole episode (trajectory.Trajectory)."""

    episode_id: str
    env_id: str
    task: str
    steps: List[Step]
    reward: float
    exit_reason: str
    num_turns: int
    started_at: Optional[_dt.datetime]
    ended_at: Optional[_dt.datetime] = None
    seed: Optional[int] = None
    fork_of: str = ""
    init_frame: str = ""
    # The task instance the episode ran: {version, hash, split, instruction,
    # params} (params: the values its seed drew, for the trainer).
    instance: Optional[Dict[str, Any]] = None
    # What the trainer did between the agent's steps ({kind: "exec",
    # after_step, t_ms, argv | shell, exit, timed_out, stdout_bytes, ...}):
    # never agent actions (docs/api.md, "Trainer exec").
    events: List[Dict[str, Any]] = field(default_factory=list)
    # What the episode was allowed to do ({apps, shell, clipboard,
    # trainer_exec, trainer_files, network, screen_w, screen_h}) and every
    # use of it ({by, kind, step, argv?, exit?, bytes?, path?, sha256?,
    # failed?}), as served (docs/api.md, "Capabilities and audit").
    envelope: Optional[Dict[str, Any]] = None
    audit: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_wire(cls, d: Dict[str, Any]) -> "Trajectory":
        if not isinstance(d, dict) or "episode_id" not in d:
            raise ShinkenError(f"not a trajectory: {str(d)[:100]}")
        return cls(episode_id=d["episode_id"], env_id=d.get("env_id") or "", task=d.get("task") or "",
                   steps=[Step.from_wire(s) for s in d.get("steps") or []],
                   reward=float(d.get("reward") or 0.0), exit_reason=d.get("exit_reason") or "",
                   num_turns=int(d.get("num_turns") or 0), started_at=_time(d.get("started_at")),
                   ended_at=_time(d.get("ended_at")), seed=d.get("seed"), fork_of=d.get("fork_of") or "",
                   init_frame=d.get("init_frame") or "", instance=d.get("instance"),
                   events=list(d.get("events") or []), envelope=d.get("envelope"),
                   audit=list(d.get("audit") or []), raw=d)


def episodes(url: Any, episode_id: str, token: Optional[str] = None) -> Trajectory:
    """Fetches one episode's trajectory. ``url`` is a base URL or a Client."""
    from .client import Client
    client = url if isinstance(url, Client) else Client(url, token)
    try:
        return Trajectory.from_wire(client.episode(episode_id))
    finally:
        if client is not url:
            client.close()


#: Exit reasons of episodes the infrastructure failed: not scored, so their
#: rows carry ``drop`` and a None reward_score (as the Go export's null).
DROPPED_EXITS = frozenset({"scorer_error", "sandbox_died", "setup_error"})


def to_verl_row(traj: Trajectory) -> Dict[str, Any]:
    """One verl-style row for a multi-turn episode (docs/architecture.md, "Trajectories").

    ``prompt_ids`` is turn 0's prompt; ``response_ids`` is every later token:
    each turn's response (mask 1) and the env tokens that the next turn's
    prompt appended (mask 0), derived from how each turn's prompt extends the
    previous prompt + response. A turn whose prompt does not extend that
    context is token drift: it is listed in extra_fields["token_drift_turns"],
    its prompt tail after the common prefix is appended as env tokens, and the
    row should not be trained on as-is. Steps without token ids (scripted
    actions) are skipped. ``multi_modal_data["images"]`` references the
    screenshots in placeholder order (the reset frame, then the observation
    after each token turn but the last); an episode the infrastructure failed
    has ``extra_fields["drop"]`` and reward_score None, never a stand-in 0.
    """
    turns = [s for s in traj.steps if s.prompt_ids or s.response_ids]
    prompt: List[int] = list(turns[0].prompt_ids) if turns else []
    response: List[int] = []
    mask: List[int] = []
    logprobs: List[float] = []
    have_logprobs = bool(turns) and all(s.response_logprobs for s in turns)
    drift: List[int] = []
    context: List[int] = list(prompt)
    for k, s in enumerate(turns):
        if k > 0:
            p = list(s.prompt_ids)
            n = len(context)
            if p[:n] == context:
                env_tokens = p[n:]
            else:
                common = 0
                for a, b in zip(p, context):
                    if a != b:
                        break
                    common += 1
                drift.append(s.index)
                env_tokens = p[common:]
            response += env_tokens
            mask += [0] * len(env_tokens)
            if have_logprobs:
                logprobs += [0.0] * len(env_tokens)
            context = p
        response += s.response_ids
        mask += [1] * len(s.response_ids)
        if have_logprobs:
            logprobs += list(s.response_logprobs)
        context = context + list(s.response_ids)
    drop = traj.exit_reason in DROPPED_EXITS
    images = ([{"frame": traj.init_frame}] if traj.init_frame else []) + \
        [{"frame": s.obs_frame} for s in turns[:-1] if s.obs_frame]
    row: Dict[str, Any] = {
        "prompt_ids": prompt,
        "response_ids": response,
        "response_mask": mask,
        "multi_modal_data": {"images": images},
        "reward_score": None if drop else traj.reward,
        "num_turns": traj.num_turns or len(traj.steps),
        "metrics": {"env_steps": len(traj.steps), "agent_errors": sum(1 for s in traj.steps if s.error),
                    "model_tokens": sum(mask), "env_tokens": len(mask) - sum(mask)},
        "extra_fields": {
            "traj_exit_reason": traj.exit_reason,
            "episode_id": traj.episode_id,
            "task": traj.task,
            "fork_of": traj.fork_of,
            "token_drift_turns": drift,
            "drop": drop,
        },
    }
    if have_logprobs:
        row["response_logprobs"] = logprobs
    return row


def to_verl_rows(trajs: Iterable[Union[Trajectory, Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """verl-style rows, one per episode (wire maps are accepted too)."""
    return [to_verl_row(t if isinstance(t, Trajectory) else Trajectory.from_wire(t)) for t in trajs]
