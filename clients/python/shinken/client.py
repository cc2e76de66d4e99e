"""Client: the batch-first protocol-1 calls, with the frame cache applied.

Env and VectorEnv are built on it; trainers that want the raw batch results
(e.g. to shard envs over several hosts themselves) can use it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from . import wire
from .errors import ProtocolError, ShinkenError, error_from_wire
from .frames import FrameCache
from .transport import Transport


@dataclass
class Slot:
    """One env's result in a reset/step/fork reply, its frame resolved.

    ``frame`` is the encoded image (from this reply or the client's cache);
    ``cached`` says it did not cross the wire this time. When ``error`` is set
    the env failed this call and the other fields may be empty.
    """

    env_id: str
    episode_id: str = ""
    obs: Optional[Dict[str, Any]] = None
    frame: Optional[bytes] = None
    cached: bool = False
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: Dict[str, Any] = field(default_factory=dict)
    error: Optional[ShinkenError] = None


class Client:
    """A connection to one envserver plus its frame cache.

    ``cache_bytes`` bounds the frame cache; ``timeout`` bounds each socket wait
    of a call (a step runs actions, settles and may run a verifier, so it is
    generous); ``connect_retry_s`` bounds retries of a refused connection.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 300.0,
                 connect_retry_s: float = 30.0, cache_bytes: int = 256 << 20):
        self.transport = Transport(url, token, timeout=timeout, connect_retry_s=connect_retry_s)
        self.cache = FrameCache(cache_bytes)
        self._spec: Optional[Dict[str, Any]] = None

    @property
    def url(self) -> str:
        return self.transport.url

    @property
    def stats(self):
        """Transport counters (requests, bytes sent/received, retries)."""
        return self.transport.stats

    def close(self) -> None:
        """Closes the HTTP connection (envs stay leased; close them with close_envs)."""
        self.transport.close()

    # -- plain calls ---------------------------------------------------------

    def healthz(self) -> bool:
        """True when GET /healthz answers ok."""
        body = self.transport.call("GET", "/healthz", idempotent=True)
        return (body.decode() if isinstance(body, bytes) else str(body)).strip() == "ok"

    def spec(self, refresh: bool = False) -> Dict[str, Any]:
        """GET /v1/spec (cached after the first call)."""
        if self._spec is None or refresh:
            self._spec = self.transport.call("GET", "/v1/spec", idempotent=True)
        return self._spec

    def episode(self, episode_id: str) -> Dict[str, Any]:
        """GET /v1/episodes/{id}: the episode's trajectory as a wire map."""
        return self.transport.call("GET", f"/v1/episodes/{episode_id}", idempotent=True)

    def close_envs(self, env_ids: Sequence[str]) -> List[str]:
        """POST /v1/close; returns the ids actually closed (idempotent)."""
        if not env_ids:
            return []
        reply = self.transport.call("POST", "/v1/close", wire.close_request(env_ids), idempotent=True)
        return list((reply or {}).get("closed") or [])

    # -- batch calls -----------------------------------------------------------

    def reset(self, envs: Sequence[Dict[str, Any]], observe: Any = None) -> List[Slot]:
        """POST /v1/reset with wire.reset_env maps."""
        fmt, have = self._have(observe, len(envs))
        return self._batch("/v1/reset", wire.reset_request(envs, observe, have))

    def step(self, steps: Sequence[Dict[str, Any]], observe: Any = None) -> List[Slot]:
        """POST /v1/step with wire.step_env maps. Never retried once sent."""
        fmt, have = self._have(observe, len(steps))
        return self._batch("/v1/step", wire.step_request(steps, observe, have))

    def fork(self, env_id: str, n: int, observe: Any = None) -> List[Slot]:
        """POST /v1/fork: n new envs carrying env_id's state."""
        fmt, have = self._have(observe, n)
        return self._batch("/v1/fork", wire.fork_request(env_id, n, observe, have))

    def _have(self, observe: Any, n: int):
        o = wire.observe_map(observe) or {}
        fmt = o.get("format") or self._default_format()
        return fmt, self.cache.have(fmt, extra=n)

    def _default_format(self) -> Optional[str]:
        # Without an explicit format the server uses its default; once the spec
        # is known the cache can offer only hashes held in that format.
        if self._spec is not None:
            return ((self._spec.get("observation") or {}).get("default") or {}).get("format") or None
        return None

    def _batch(self, path: str, req: Dict[str, Any]) -> List[Slot]:
        return parse_batch(self.transport.call("POST", path, req), self.cache, path)


def parse_batch(reply: Any, cache: FrameCache, what: str = "reply") -> List[Slot]:
    """Turns a decoded api.BatchReply into slots, resolving each obs's frame
    from the reply or the cache and then caching the reply's new frames."""
    if not isinstance(reply, dict) or not isinstance(reply.get("results"), list):
        raise ProtocolError(f"{what}: reply has no results list")
    frames: Dict[str, bytes] = reply.get("frames") or {}
    slots: List[Slot] = []
    # Resolve every obs before inserting this reply's frames, so no eviction
    # can drop a frame this reply relies on the cache for.
    for r in reply["results"]:
        s = Slot(env_id=r.get("env_id", ""), episode_id=r.get("episode_id") or "",
                 reward=float(r.get("reward") or 0.0), terminated=bool(r.get("terminated")),
                 truncated=bool(r.get("truncated")), info=dict(r.get("info") or {}))
        if r.get("error"):
            s.error = error_from_wire(r["error"], env_id=s.env_id)
        obs = r.get("obs")
        if obs:
            s.obs = obs
            h = obs.get("frame", "")
            if h in frames:
                s.frame = frames[h]
            else:
                s.frame = cache.get(h)
                s.cached = True
                if s.frame is None:
                    raise ProtocolError(f"{what}: env {s.env_id}: frame {h} neither sent nor cached")
        slots.append(s)
    for h, data in frames.items():
        fmt = next((s.obs.get("format", "") for s in slots if s.obs and s.obs.get("frame") == h), "")
        cache.put(h, fmt, data)
    cache.hits += sum(1 for s in slots if s.obs is not None and s.cached)
    cache.misses += len(frames)
    return slots
