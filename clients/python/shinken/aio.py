"""AsyncClient: the batch-first protocol-1 calls on asyncio, the core of the client.

Many calls may be in flight at once from many tasks: each holds its own
keep-alive connection from a bounded pool, and nothing is serialized behind a
client-wide lock. A batch larger than the server's ``max_batch`` is split into
requests sent concurrently. The sync Client, Env and VectorEnv run these same
coroutines on a private event-loop thread.

    async with shinken.AsyncClient("http://127.0.0.1:8700") as c:
        env = shinken.AsyncEnv(c, task="xterm-hello-file")
        obs, info = await env.reset()
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

from . import wire
from ._http import AsyncTransport
from .errors import ChecksumMismatch, ProtocolError, ShinkenError, TooLarge, TransportError, error_from_wire
from .frames import Frame, FrameCache

DEFAULT_URL_ENV = "SHINKEN_URL"
DEFAULT_TOKEN_ENV = "SHINKEN_TOKEN"
# How long a step whose reply never came is resent (with its request_id).
STEP_RETRY_S = 120.0


def resolve_url_token(url: Optional[str], token: Optional[str]) -> Tuple[str, Optional[str]]:
    """url/token, defaulting to $SHINKEN_URL and $SHINKEN_TOKEN."""
    url = url or os.environ.get(DEFAULT_URL_ENV)
    if not url:
        raise ValueError(f"no envserver url: pass url= or set ${DEFAULT_URL_ENV}")
    if token is None:
        token = os.environ.get(DEFAULT_TOKEN_ENV) or None
    return url, token


@dataclass
class Slot:
    """One env's result in a reset/step/fork reply, its frame resolved.

    ``frame`` is this result's Frame (from this reply, or the frame the
    request listed in ``have``); ``cached`` says it did not cross the wire this
    time. When ``error`` is set the env failed this call and the other fields
    may be empty.
    """

    env_id: str
    episode_id: str = ""
    obs: Optional[Dict[str, Any]] = None
    frame: Optional[Frame] = None
    cached: bool = False
    reward: Optional[float] = 0.0  # None: not a score (a reset, a fork, an unscored end)
    terminated: bool = False
    truncated: bool = False
    info: Dict[str, Any] = field(default_factory=dict)
    error: Optional[ShinkenError] = None


# FILE_CHUNK is what one put request carries (under the default 8 MiB
# request body); GET_CHUNK what one get reads (the server's max_get_bytes).
FILE_CHUNK = 4 << 20
GET_CHUNK = 1 << 20


class AsyncClient:
    """A connection pool to one envserver plus its frame cache.

    ``url``/``token`` default to $SHINKEN_URL/$SHINKEN_TOKEN. ``timeout`` is
    each request's deadline (a step runs actions, settles and may run a
    verifier, so it is generous); a connection that cannot be opened fails at
    once unless ``connect_retry_s`` allows retrying refusals. ``max_conns``
    bounds the connections open at once (= requests in flight).
    ``step_retry_s`` is how long a step whose reply did not come (the deadline
    passed, the connection dropped) is resent with its request_id, which the
    server answers with the reply of the step that already ran (0: never).
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 300.0, connect_timeout: float = 5.0, connect_retry_s: float = 0.0,
                 cache_bytes: int = 256 << 20, max_conns: int = 256, step_retry_s: float = STEP_RETRY_S):
        url, token = resolve_url_token(url, token)
        self.step_retry_s = step_retry_s
        self.transport = AsyncTransport(url, token, timeout=timeout, connect_timeout=connect_timeout,
                                        connect_retry_s=connect_retry_s, max_conns=max_conns)
        self.cache = FrameCache(cache_bytes)
        self._spec: Optional[Dict[str, Any]] = None
        self._last: Dict[str, str] = {}  # env id → hash of its last frame (preferred in have)

    @property
    def url(self) -> str:
        return self.transport.url

    @property
    def token(self) -> Optional[str]:
        return self.transport.token

    @property
    def timeout(self) -> float:
        return self.transport.timeout

    @property
    def stats(self):
        """Transport counters (requests, bytes sent/received, retries, connections)."""
        return self.transport.stats

    async def aclose(self) -> None:
        """Closes every connection (envs stay leased; close them with close_envs)."""
        await self.transport.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- plain calls ---------------------------------------------------------------

    async def healthz(self) -> bool:
        body = await self.transport.call("GET", "/healthz", idempotent=True)
        return (body.decode() if isinstance(body, bytes) else str(body)).strip() == "ok"

    async def spec(self, refresh: bool = False) -> Dict[str, Any]:
        """GET /v1/spec (kept after the first call)."""
        if self._spec is None or refresh:
            self._spec = await self.transport.call("GET", "/v1/spec", idempotent=True)
        return self._spec

    async def episode(self, episode_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /v1/episodes/{id}: the episode's trajectory as a wire map."""
        return await self.transport.call("GET", f"/v1/episodes/{episode_id}", idempotent=True,
                                         timeout=timeout)

    async def episode_video(self, episode_id: str, *, timeout: Optional[float] = None) -> bytes:
        """GET /v1/episodes/{id}/video.mp4: the episode's replay as H.264 MP4
        bytes (the server's spec lists ``trainer.video`` where it has ffmpeg;
        Unsupported where not, Busy while its encodes are all taken, NotFound
        for an unknown episode). A finished episode's video is encoded once
        and kept; a running one's is encoded from the steps so far."""
        data = await self.transport.call("GET", f"/v1/episodes/{quote(episode_id, safe='')}/video.mp4",
                                         idempotent=True, timeout=timeout)
        if not isinstance(data, (bytes, bytearray)):
            raise ProtocolError(f"episode video: a {type(data).__name__} reply, not MP4 bytes")
        return bytes(data)

    async def episode_gif(self, episode_id: str, *, timeout: Optional[float] = None) -> bytes:
        """The web UI's replay GIF of an episode (the same marks as the
        video; what TensorBoard's image dashboard animates)."""
        data = await self.transport.call("GET", f"/ui/api/episodes/{quote(episode_id, safe='')}/replay.gif",
                                         idempotent=True, timeout=timeout)
        if not isinstance(data, (bytes, bytearray)):
            raise ProtocolError(f"episode gif: a {type(data).__name__} reply, not GIF bytes")
        return bytes(data)

    async def close_envs(self, env_ids: Sequence[str], *, timeout: Optional[float] = None) -> List[str]:
        """POST /v1/close (split over max_batch); returns the ids actually
        closed (idempotent)."""
        ids = [e for e in env_ids if e]
        for e in ids:
            self._last.pop(e, None)
        if not ids:
            return []
        mb = await self.max_batch()  # the server refuses a longer id list (batch_too_large)
        replies = await asyncio.gather(*(
            self.transport.call("POST", "/v1/close", wire.close_request(ids[i:i + mb]), idempotent=True,
                                timeout=timeout) for i in range(0, len(ids), mb)))
        return [e for r in replies for e in ((r or {}).get("closed") or [])]

    # -- batch calls -----------------------------------------------------------------

    async def reset(self, envs: Sequence[Dict[str, Any]], observe: Any = None, *,
                    timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/reset with wire.reset_env maps (split over max_batch)."""
        return await self._split("/v1/reset", list(envs), observe, timeout,
                                 lambda part, o, have: wire.reset_request(part, o, have),
                                 lambda part: [e.get("env_id") for e in part])

    async def step(self, steps: Sequence[Dict[str, Any]], observe: Any = None, *,
                   timeout: Optional[float] = None, retry_s: Optional[float] = None) -> List[Slot]:
        """POST /v1/step with wire.step_env maps (split over max_batch).

        Where the server replays steps (spec limits.max_request_id_bytes),
        each step without a ``request_id`` gets a fresh one, and a request
        whose reply did not come (deadline passed, connection dropped) is
        resent with the same ids for up to ``retry_s`` (default the client's
        ``step_retry_s``): the server runs each step once and answers a resend
        with the stored reply (docs/api.md, "Retrying a step"). Against a
        server without replay a sent step is never resent."""
        steps = list(steps)
        budget = self.step_retry_s if retry_s is None else retry_s
        if await self.replays_steps():
            steps = [s if s.get("request_id") else {**s, "request_id": wire.new_request_id()} for s in steps]
        else:
            budget = 0.0
        return await self._split("/v1/step", steps, observe, timeout,
                                 lambda part, o, have: wire.step_request(part, o, have),
                                 lambda part: [s["env_id"] for s in part], retry_s=budget)

    async def observe(self, env_ids: Sequence[str], observe: Any = None, *, windows: bool = False,
                      timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/observe: each env's current observation (its frame, the
        a11y tree where ``observe`` asks for it, the window list in
        ``info["windows"]`` with ``windows``), between steps and without
        spending one (Busy while a step runs). Recorded in the trajectory's
        ``events``, never as an agent action."""
        return await self._split("/v1/observe", list(env_ids), observe, timeout,
                                 lambda part, o, have: wire.observe_request(part, o, have, windows),
                                 lambda part: list(part))

    async def replays_steps(self) -> bool:
        """Whether the server answers a resent step's request_id with its stored reply."""
        return int(((await self.spec()).get("limits") or {}).get("max_request_id_bytes") or 0) > 0

    async def fork(self, env_id: str, n: int, observe: Any = None, *,
                   timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/fork: n new envs carrying env_id's state."""
        o = wire.observe_map(observe)
        fmt, q = await self.frame_format(o)
        listed = self.cache.have(fmt, q, [self._last.get(env_id, "")], extra=1)
        req = wire.fork_request(env_id, n, o, [f.hash for f in listed])
        return await self._call("/v1/fork", req, listed, fmt, q, timeout)

    # -- named checkpoints (docs/api.md, "Checkpoints") --------------------------------

    async def checkpoint(self, env_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/checkpoint: snapshots env_id's live episode into a named
        checkpoint; returns ``{checkpoint_id, env_id, episode_id, task, step,
        frame, bytes, expires_in_ms}``. Over the server's count or bytes of
        checkpoints it raises CheckpointLimit."""
        return await self.transport.call("POST", "/v1/checkpoint", wire.checkpoint_request(env_id),
                                         timeout=timeout)

    async def exec(self, env_id: str, argv: Optional[Sequence[str]] = None, shell: Optional[str] = None, *,
                   stdin: Optional[bytes] = None, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_ms: Optional[int] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/exec (where the server allows it; Unsupported otherwise):
        runs one command in env_id's sandbox as the agent's user, between
        steps (Busy while a step runs, EpisodeOver once the episode ended).
        Returns ``{exit, signal?, stdout, stderr, truncated, timed_out,
        duration_ms}``; ``exit`` is None when it was killed. Recorded in the
        trajectory's ``events``, never as an agent action."""
        return await self.transport.call("POST", "/v1/exec", wire.exec_request(
            env_id, argv, shell, stdin=stdin, cwd=cwd, env=env, timeout_ms=timeout_ms), timeout=timeout)

    async def put_file(self, env_id: str, path: str, data: bytes, *, mode: Optional[int] = None,
                       chunk: int = FILE_CHUNK, timeout: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/files/put: writes data to path ("~/..." or absolute) in
        env_id's sandbox with the agent's rights, each request's sha256
        checked by the server (ChecksumMismatch). Data over ``chunk`` bytes
        travels in order, chunk by chunk (offset). Returns ``{path, sha256,
        size, chunks}`` for the whole file."""
        import hashlib

        if isinstance(data, str):
            data = data.encode()
        data = bytes(data)
        if chunk <= 0:
            raise ValueError("chunk must be positive")
        off, n = 0, 0
        while True:
            part = data[off:off + chunk]
            await self.transport.call("POST", "/v1/files/put",
                                      wire.file_put_request(env_id, path, part, mode, offset=off), timeout=timeout)
            off, n = off + len(part), n + 1
            if off >= len(data):
                break
        return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "chunks": n}

    async def get_file(self, env_id: str, path: str, *, chunk: int = GET_CHUNK,
                       max_bytes: int = 1 << 30, timeout: Optional[float] = None) -> bytes:
        """POST /v1/files/get: the agent's regular file at path (no link
        followed; NotFound when missing), ``chunk`` bytes (at most
        ``spec.trainer.max_get_bytes``) a request, each chunk's sha256
        checked on arrival (ChecksumMismatch); a file over ``max_bytes`` is
        TooLarge before it is read."""
        out = bytearray()
        while True:
            r = await self.transport.call("POST", "/v1/files/get",
                                          {"env_id": env_id, "path": path, "offset": len(out), "length": chunk},
                                          timeout=timeout)
            data = _checked(r, env_id, path)
            total = int(r.get("total") or 0)
            if total > max_bytes:
                raise TooLarge(f"get {path}: {total} bytes, over max_bytes {max_bytes}", env_id=env_id)
            out += data
            if len(out) >= total or not data:
                return bytes(out)

    async def put_dir(self, env_id: str, path: str, local_dir: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/files/put {kind: "tar"}: the local directory's files
        and directories unpacked below path in env_id's sandbox with the
        agent's rights (a link or any other kind of entry locally is a
        ValueError: the server takes directories and regular files only).
        Returns ``{path, sha256, size}`` of the archive sent."""
        data = _tar_dir(local_dir)
        r = await self.transport.call("POST", "/v1/files/put",
                                      wire.file_put_request(env_id, path, data, kind="tar"), timeout=timeout)
        return {"path": path, "sha256": r.get("sha256"), "size": r.get("size")}

    async def get_dir(self, env_id: str, path: str, local_dir: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """POST /v1/files/get {kind: "tar"}: the agent's directory at path,
        its archive checked by sha256, unpacked into local_dir (created):
        directories and regular files; links are not made locally and are
        listed in ``links``; ``skipped`` names what the server left out
        (FIFOs, sockets, devices). TooLarge past the server's bounds."""
        r = await self.transport.call("POST", "/v1/files/get", {"env_id": env_id, "path": path, "kind": "tar"},
                                      timeout=timeout)
        data = _checked(r, env_id, path)
        files, links = _untar(data, local_dir)
        return {"path": path, "files": files, "links": links, "skipped": list(r.get("skipped") or []),
                "sha256": r.get("sha256"), "size": len(data)}

    async def checkpoint_info(self, checkpoint_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /v1/checkpoint/{id}: the checkpoint as POST returned it, its TTL
        left now; NotFound once deleted or expired."""
        return await self.transport.call("GET", f"/v1/checkpoint/{_path_id(checkpoint_id)}",
                                         idempotent=True, timeout=timeout)

    async def delete_checkpoint(self, checkpoint_id: str, *, timeout: Optional[float] = None) -> bool:
        """DELETE /v1/checkpoint/{id}; True when it was live (idempotent)."""
        r = await self.transport.call("DELETE", f"/v1/checkpoint/{_path_id(checkpoint_id)}",
                                      idempotent=True, timeout=timeout)
        return bool((r or {}).get("deleted"))

    async def reset_from(self, checkpoint_id: str, n: int = 1, observe: Any = None, *,
                         max_steps: Optional[int] = None, timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/reset of n new envs, each starting an episode from the
        named checkpoint (a new sandbox per env, queued like any reset)."""
        return await self.reset([wire.reset_env("", checkpoint=checkpoint_id, max_steps=max_steps)
                                 for _ in range(n)], observe, timeout=timeout)

    async def fork_checkpoint(self, checkpoint_id: str, n: int, observe: Any = None, *,
                              timeout: Optional[float] = None) -> List[Slot]:
        """POST /v1/fork {checkpoint, n}: n new envs starting from the named
        checkpoint, started together."""
        o = wire.observe_map(observe)
        fmt, q = await self.frame_format(o)
        listed = self.cache.have(fmt, q, [], extra=1)
        req = wire.checkpoint_fork_request(checkpoint_id, n, o, [f.hash for f in listed])
        return await self._call("/v1/fork", req, listed, fmt, q, timeout)

    async def frame_format(self, observe: Optional[Dict[str, Any]]) -> Tuple[str, int]:
        """The (format, quality) a request with this observe map gets."""
        o = observe or {}
        d = ((await self.spec()).get("observation") or {}).get("default") or {}
        return (o.get("format") or d.get("format") or "png", int(o.get("quality") or d.get("quality") or 0))

    async def max_batch(self) -> int:
        return int(((await self.spec()).get("limits") or {}).get("max_batch") or 64)

    async def _split(self, path, items, observe, timeout, build, ids_of, retry_s: float = 0.0) -> List[Slot]:
        if not items:
            return []  # nothing to ask (the server answers an empty batch with bad_request)
        o = wire.observe_map(observe)
        fmt, q = await self.frame_format(o)
        mb = await self.max_batch()
        parts = [items[i:i + mb] for i in range(0, len(items), mb)]

        async def one(part):
            deadline: Optional[float] = None
            delay = 0.05
            while True:
                prefer = [self._last.get(e or "", "") for e in ids_of(part)]
                listed = self.cache.have(fmt, q, prefer, extra=len(part))
                limit = timeout
                if deadline is not None:
                    left = deadline - time.monotonic()
                    limit = left if limit is None else min(limit, left)
                try:
                    return await self._call(path, build(part, o, [f.hash for f in listed]), listed, fmt, q, limit)
                except TransportError as e:
                    # Only a request that may have reached the server and
                    # carries request ids is resent (a refused connection
                    # means the server is gone, and its envs with it).
                    if not e.sent or retry_s <= 0:
                        raise
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + retry_s
                    if now + (0 if e.timed_out else delay) >= deadline:
                        raise
                    self.transport.stats.step_retries += 1
                    if not e.timed_out:  # the connection dropped: give the server a moment
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 1.0)

        if len(parts) == 1:
            return await one(parts[0])
        done = await asyncio.gather(*(one(p) for p in parts))
        return [s for slots in done for s in slots]

    async def _call(self, path: str, req: Dict[str, Any], listed: List[Frame], fmt: str, q: int,
                    timeout: Optional[float]) -> List[Slot]:
        reply = await self.transport.call("POST", path, req, timeout=timeout)
        slots = parse_batch(reply, self.cache, path, listed, fmt, q)
        for s in slots:
            if s.frame is not None and s.env_id:
                self._last[s.env_id] = s.frame.hash
        return slots


def _path_id(v: str) -> str:
    """An id as a path segment: the server's ids are plain tokens."""
    v = wire._str("checkpoint_id", v)
    if not v or not all(c.isalnum() or c in "-_" for c in v):
        raise wire.BadRequest(f"checkpoint id {v!r}: want letters, digits, '-' or '_'")
    return v


def parse_batch(reply: Any, cache: FrameCache, what: str = "reply", listed: Sequence[Frame] = (),
                fmt: str = "png", quality: int = 0) -> List[Slot]:
    """Turns a decoded api.BatchReply into slots.

    Each obs's frame comes from this reply's frames or from ``listed`` (the
    frames its request named in ``have``, held by the request), never from a
    cache lookup that an eviction could have emptied. New frames are then
    cached. A frame neither sent nor listed (a server bug) fails only that
    env's slot, with its reward and flags kept.
    """
    if not isinstance(reply, dict) or not isinstance(reply.get("results"), list):
        raise ProtocolError(f"{what}: reply has no results list")
    sent: Dict[str, bytes] = reply.get("frames") or {}
    held = {f.hash: f for f in listed}
    made: Dict[str, Frame] = {}
    slots: List[Slot] = []
    hits = 0
    for r in reply["results"]:
        if not isinstance(r, dict):
            raise ProtocolError(f"{what}: result is not a map")
        rw = r.get("reward")
        s = Slot(env_id=r.get("env_id", ""), episode_id=r.get("episode_id") or "",
                 reward=None if rw is None else float(rw), terminated=bool(r.get("terminated")),
                 truncated=bool(r.get("truncated")), info=dict(r.get("info") or {}))
        if r.get("error"):
            s.error = error_from_wire(r["error"], env_id=s.env_id)
        obs = r.get("obs")
        if obs:
            s.obs = obs
            h = obs.get("frame", "")
            f = made.get(h)
            if f is None and h in sent:
                f = Frame(h, obs.get("format") or fmt, quality, int(obs.get("w") or 0),
                          int(obs.get("h") or 0), sent[h])
                made[h] = f
            elif f is None and h in held:
                f = held[h]
                s.cached = True
                hits += 1
                cache.touch(f)
            if f is None and s.error is None:
                s.error = ProtocolError(f"{what}: frame {h} neither sent nor listed in have",
                                        env_id=s.env_id)
            s.frame = f
        slots.append(s)
    for h, f in made.items():
        kept = cache.put(f)
        if kept is not f:  # an equal frame was already held: share its decode
            for s in slots:
                if s.frame is f:
                    s.frame = kept
    cache.hits += hits
    cache.misses += len(made)
    return slots



def _checked(r: Dict[str, Any], env_id: str, path: str) -> bytes:
    """A get reply's bytes, their sha256 and size checked."""
    import hashlib

    data = bytes(r.get("data") or b"")
    if hashlib.sha256(data).hexdigest() != r.get("sha256") or len(data) != r.get("size"):
        raise ChecksumMismatch(f"get {path}: {len(data)} bytes arrived that do not match the server's sha256",
                               env_id=env_id)
    return data


def _tar_dir(local_dir: str) -> bytes:
    """An uncompressed tar of local_dir's directories and regular files."""
    import io
    import os
    import stat
    import tarfile

    if not os.path.isdir(local_dir):
        raise ValueError(f"{local_dir}: not a directory")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for root, dirs, files in os.walk(local_dir):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(root, name)
                rel = os.path.relpath(full, local_dir)
                st = os.lstat(full)
                if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    raise ValueError(f"{full}: not a directory or a regular file (a directory travels with those only)")
                info = tarfile.TarInfo(rel + ("/" if stat.S_ISDIR(st.st_mode) else ""))
                info.mode, info.mtime = st.st_mode & 0o777, int(st.st_mtime)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    tf.addfile(info)
                else:
                    info.size = st.st_size
                    with open(full, "rb") as f:
                        tf.addfile(info, f)
    return buf.getvalue()


def _untar(data: bytes, local_dir: str) -> "tuple[int, List[str]]":
    """Unpacks a directory's archive into local_dir: directories and
    regular files whose names stay inside it, no existing link followed;
    links are listed, not made."""
    import io
    import os
    import tarfile

    os.makedirs(local_dir, exist_ok=True)
    base = os.path.realpath(local_dir)
    files, links = 0, []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for m in tf:
            name = os.path.normpath(m.name)
            dest = os.path.join(base, name)
            if os.path.isabs(m.name) or name == ".." or name.startswith("../") or \
                    os.path.realpath(os.path.dirname(dest)) != os.path.dirname(dest) or os.path.islink(dest):
                raise ValueError(f"archive entry {m.name!r} would land outside {local_dir}")
            if m.issym() or m.islnk():
                links.append(m.name)
            elif m.isdir():
                os.makedirs(dest, exist_ok=True)
            elif m.isfile():
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                src = tf.extractfile(m)
                with open(dest, "wb") as f:
                    f.write(src.read() if src else b"")
                os.chmod(dest, m.mode & 0o777 or 0o644)
                files += 1
    return files, links
