"""Client: the sync face of AsyncClient, for trainers that do not use asyncio.

Each call runs the AsyncClient coroutine on a private event-loop thread (see
_loop.py), so one Client is safe to share between threads and calls from
different threads are in flight together. Env and VectorEnv are built on it;
trainers that want the raw batch results (e.g. to shard envs over several
hosts themselves) can use it directly.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from . import _loop
from .aio import STEP_RETRY_S, AsyncClient, Slot, parse_batch
from .frames import FrameCache
from .transport import Transport

__all__ = ["Client", "Slot", "parse_batch"]


class Client:
    """A connection pool to one envserver plus its frame cache (see AsyncClient
    for the arguments; ``url``/``token`` default to $SHINKEN_URL/$SHINKEN_TOKEN)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = 300.0,
                 connect_timeout: float = 5.0, connect_retry_s: float = 0.0, cache_bytes: int = 256 << 20,
                 max_conns: int = 256, step_retry_s: float = STEP_RETRY_S):
        self.aio = AsyncClient(url, token, timeout=timeout, connect_timeout=connect_timeout,
                               connect_retry_s=connect_retry_s, cache_bytes=cache_bytes, max_conns=max_conns,
                               step_retry_s=step_retry_s)
        self.transport = Transport.wrap(self.aio.transport)

    @classmethod
    def wrap(cls, aio: AsyncClient) -> "Client":
        c = cls.__new__(cls)
        c.aio, c.transport = aio, Transport.wrap(aio.transport)
        return c

    @property
    def url(self) -> str:
        return self.aio.url

    @property
    def token(self) -> Optional[str]:
        return self.aio.token

    @property
    def cache(self) -> FrameCache:
        return self.aio.cache

    @property
    def stats(self):
        """Transport counters (requests, bytes sent/received, retries, connections)."""
        return self.aio.stats

    def close(self) -> None:
        """Closes every connection (envs stay leased; close them with close_envs)."""
        _loop.run(self.aio.aclose())

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def healthz(self) -> bool:
        """True when GET /healthz answers ok."""
        return _loop.run(self.aio.healthz())

    def spec(self, refresh: bool = False) -> Dict[str, Any]:
        """GET /v1/spec (kept after the first call)."""
        if self.aio._spec is not None and not refresh:
            return self.aio._spec
        return _loop.run(self.aio.spec(refresh))

    def episode(self, episode_id: str) -> Dict[str, Any]:
        """GET /v1/episodes/{id}: the episode's trajectory as a wire map."""
        return _loop.run(self.aio.episode(episode_id))

    def episode_video(self, episode_id: str, *, timeout: Optional[float] = None) -> bytes:
        """GET /v1/episodes/{id}/video.mp4: the episode's replay as H.264 MP4
        bytes (AsyncClient.episode_video; shinken.tracking hands it to W&B)."""
        return _loop.run(self.aio.episode_video(episode_id, timeout=timeout))

    def episode_gif(self, episode_id: str, *, timeout: Optional[float] = None) -> bytes:
        """The web UI's replay GIF of an episode (AsyncClient.episode_gif)."""
        return _loop.run(self.aio.episode_gif(episode_id, timeout=timeout))

    def close_envs(self, env_ids: Sequence[str]) -> List[str]:
        """POST /v1/close; returns the ids actually closed (idempotent)."""
        return _loop.run(self.aio.close_envs(env_ids))

    def reset(self, envs: Sequence[Dict[str, Any]], observe: Any = None, *,
              timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/reset with wire.reset_env maps."""
        return _loop.run(self.aio.reset(envs, observe, timeout=timeout))

    def step(self, steps: Sequence[Dict[str, Any]], observe: Any = None, *,
             timeout: Optional[float] = None, retry_s: Optional[float] = None) -> List[Slot]:
        """POST /v1/step with wire.step_env maps; a step whose reply did not
        come is resent with its request_id (see AsyncClient.step)."""
        return _loop.run(self.aio.step(steps, observe, timeout=timeout, retry_s=retry_s))

    def observe(self, env_ids: Sequence[str], observe: Any = None, *, windows: bool = False,
                timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/observe: each env's observation now, without a step."""
        return _loop.run(self.aio.observe(env_ids, observe, windows=windows, timeout=timeout))

    def fork(self, env_id: str, n: int, observe: Any = None, *, timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/fork: n new envs carrying env_id's state."""
        return _loop.run(self.aio.fork(env_id, n, observe, timeout=timeout))

    def checkpoint(self, env_id: str) -> Dict[str, Any]:
        """POST /v1/checkpoint: snapshots env_id's live episode; returns
        ``{checkpoint_id, env_id, episode_id, task, step, frame, bytes,
        expires_in_ms}`` (CheckpointLimit over the server's limits)."""
        return _loop.run(self.aio.checkpoint(env_id))

    def exec(self, env_id: str, argv: Optional[Sequence[str]] = None, shell: Optional[str] = None,
             **kw: Any) -> Dict[str, Any]:
        """POST /v1/exec: one command in env_id's sandbox (AsyncClient.exec)."""
        return _loop.run(self.aio.exec(env_id, argv, shell, **kw))

    def put_file(self, env_id: str, path: str, data: bytes, *, mode: Optional[int] = None, **kw: Any) -> Dict[str, Any]:
        """POST /v1/files/put, chunked above a size (AsyncClient.put_file)."""
        return _loop.run(self.aio.put_file(env_id, path, data, mode=mode, **kw))

    def get_file(self, env_id: str, path: str, **kw: Any) -> bytes:
        """POST /v1/files/get, chunk by chunk (AsyncClient.get_file)."""
        return _loop.run(self.aio.get_file(env_id, path, **kw))

    def put_dir(self, env_id: str, path: str, local_dir: str) -> Dict[str, Any]:
        """A local directory into the sandbox as a tar (AsyncClient.put_dir)."""
        return _loop.run(self.aio.put_dir(env_id, path, local_dir))

    def get_dir(self, env_id: str, path: str, local_dir: str) -> Dict[str, Any]:
        """A sandbox directory out as a tar into local_dir (AsyncClient.get_dir)."""
        return _loop.run(self.aio.get_dir(env_id, path, local_dir))

    def checkpoint_info(self, checkpoint_id: str) -> Dict[str, Any]:
        """GET /v1/checkpoint/{id} (NotFound once deleted or expired)."""
        return _loop.run(self.aio.checkpoint_info(checkpoint_id))

    def delete_checkpoint(self, checkpoint_id: str) -> bool:
        """DELETE /v1/checkpoint/{id}; True when it was live (idempotent)."""
        return _loop.run(self.aio.delete_checkpoint(checkpoint_id))

    def reset_from(self, checkpoint_id: str, n: int = 1, observe: Any = None, *,
                   max_steps: Optional[int] = None, timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/reset: n new envs, each starting from the named checkpoint."""
        return _loop.run(self.aio.reset_from(checkpoint_id, n, observe, max_steps=max_steps, timeout=timeout))

    def fork_checkpoint(self, checkpoint_id: str, n: int, observe: Any = None, *,
                        timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/fork {checkpoint, n}: n new envs from the named checkpoint."""
        return _loop.run(self.aio.fork_checkpoint(checkpoint_id, n, observe, timeout=timeout))
