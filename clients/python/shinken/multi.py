"""Envs spread over several envservers.

One envserver runs one host's sandboxes; a GRPO run with hundreds of envs
needs several. ``AsyncMultiClient`` speaks the AsyncClient API over a list of
servers (one AsyncClient, connection pool and frame cache each), so AsyncEnv,
Env, VectorEnv and the agent loop take it unchanged; ``connect`` (and every
constructor taking a URL) builds one from a list of URLs.

Placement: a new env goes to the live server with the most room by its
``/v1/spec`` pool figures — the smallest share of its pool (``pool.size``)
that this client already holds there, the most ``pool.warm`` sandboxes on a
tie, then the lowest index — so one client fills servers evenly and
predictably. An env then stays where it was placed (sticky: every call with
its id goes to its server), and a fork's children stay on their parent's
server, since the parent's state is there. A batch is split per server, and
each server's part is split again over that server's own ``max_batch``; the
parts run concurrently.

Failure: a server that cannot be reached fails only its own envs' slots,
typed (TransportError, with ``env_id``), while the other servers' envs go on.
It is left out of placement until a health probe, at most every
``revive_s`` seconds, finds it back. New envs whose request was never sent
(connection refused) are placed again on the live servers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .aio import AsyncClient, Slot, resolve_url_token
from .errors import NotFound, ShinkenError, TransportError

__all__ = ["AsyncMultiClient", "connect"]


def connect(url: Any = None, token: Optional[str] = None, **kw: Any):
    """An AsyncClient for one URL, an AsyncMultiClient for a list (or a
    comma-separated string) of them, a K8sMultiClient for a
    k8s://<namespace>/<label selector> URL (shinken.k8s); None reads
    $SHINKEN_URL."""
    if isinstance(url, str) and url.startswith("k8s://"):
        from .k8s import connect_k8s
        return connect_k8s(url, token, **kw)
    if isinstance(url, str) and "," in url:
        url = [u.strip() for u in url.split(",") if u.strip()]
    if isinstance(url, (list, tuple)):
        return AsyncMultiClient(list(url), token, **kw) if len(url) > 1 else AsyncClient(url[0], token, **kw)
    if url is None:
        import os
        env = os.environ.get("SHINKEN_URL", "")
        if "," in env or env.startswith("k8s://"):
            return connect(env, token, **kw)
    return AsyncClient(url, token, **kw)


class _Stats:
    """Transport counters summed over the servers."""

    def __init__(self, clients: Sequence[AsyncClient]):
        self._clients = clients

    def __getattr__(self, name: str) -> Any:
        return sum(getattr(c.stats, name) for c in self._clients)


class AsyncMultiClient(AsyncClient):
    """The AsyncClient API over several envservers (see the module doc).

    ``urls`` are the servers' base URLs, all serving the same tasks; the
    other arguments are AsyncClient's, applied to each server. ``clients``
    holds the per-server AsyncClients, ``placement`` the server index of
    every env this client holds.
    """

    def __init__(self, urls: Sequence[str], token: Optional[str] = None, *, revive_s: float = 10.0,
                 **kw: Any):
        if not urls:
            raise ValueError("AsyncMultiClient: no server URLs")
        self.clients: List[AsyncClient] = []
        for u in urls:
            u, t = resolve_url_token(u, token)
            self.clients.append(AsyncClient(u, t, **kw))
        self.revive_s = revive_s
        self.placement: Dict[str, int] = {}  # env id → server index
        self._episodes: Dict[str, int] = {}  # episode id → server index
        self._dead: Dict[int, float] = {}  # server index → when it was found unreachable
        self._probing: Dict[int, asyncio.Future] = {}
        self._spec: Optional[Dict[str, Any]] = None

    # -- the AsyncClient surface ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return ",".join(c.url for c in self.clients)

    @property
    def token(self) -> Optional[str]:
        return self.clients[0].token

    @property
    def timeout(self) -> float:
        return self.clients[0].timeout

    @property
    def cache(self):
        """The first server's frame cache (each server has its own)."""
        return self.clients[0].cache

    @property
    def transport(self):
        return self.clients[0].transport

    @property
    def stats(self):
        return _Stats(self.clients)

    def load(self) -> List[int]:
        """Envs this client holds on each server."""
        n = [0] * len(self.clients)
        for i in self.placement.values():
            n[i] += 1
        return n

    def server_of(self, env_id: str) -> Optional[int]:
        return self.placement.get(env_id)

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.clients), return_exceptions=True)

    async def healthz(self) -> bool:
        """True when every server answers ok."""
        oks = await asyncio.gather(*(c.healthz() for c in self.clients), return_exceptions=True)
        return all(o is True for o in oks)

    async def spec(self, refresh: bool = False) -> Dict[str, Any]:
        """The spec of the first reachable server (the servers serve the same
        tasks; their pool figures are read per server for placement)."""
        if self._spec is not None and not refresh:
            return self._spec
        last: Optional[BaseException] = None
        for i, c in enumerate(self.clients):
            if i in self._dead and not refresh:
                continue
            try:
                self._spec = await c.spec(refresh)
                return self._spec
            except TransportError as e:
                self._mark_dead(i)
                last = e
        raise last or TransportError("no envserver reachable", sent=False)

    async def frame_format(self, observe: Optional[Dict[str, Any]]) -> Tuple[str, int]:
        return await self.clients[self._live()[0] if self._live() else 0].frame_format(observe)

    async def max_batch(self) -> int:
        """The largest batch one call takes: the servers' max_batch summed
        (each server's part is split over its own max_batch)."""
        total = 0
        for i in self._live() or range(len(self.clients)):
            try:
                total += await self.clients[i].max_batch()
            except TransportError:
                self._mark_dead(i)
        return total or 64

    async def episode(self, episode_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        i = self._episodes.get(episode_id)
        if i is not None:
            return await self.clients[i].episode(episode_id, timeout=timeout)
        for c in self.clients:  # an episode this client did not start: ask each server
            try:
                return await c.episode(episode_id, timeout=timeout)
            except (NotFound, TransportError):
                continue
        raise NotFound(f"episode {episode_id} is on none of the servers", code="not_found")

    async def close_envs(self, env_ids: Sequence[str], *, timeout: Optional[float] = None) -> List[str]:
        by: Dict[int, List[str]] = {}
        for e in env_ids:
            i = self.placement.pop(e, None)
            if i is not None:
                by.setdefault(i, []).append(e)
        done = await asyncio.gather(*(self.clients[i].close_envs(ids, timeout=timeout) for i, ids in by.items()),
                                    return_exceptions=True)
        closed: List[str] = []
        for (i, ids), r in zip(by.items(), done):
            if isinstance(r, TransportError):
                self._mark_dead(i)
            elif isinstance(r, BaseException):
                raise r
            else:
                closed += r
        return closed

    # -- batch calls ------------------------------------------------------------------------------

    async def reset(self, envs: Sequence[Dict[str, Any]], observe: Any = None, *,
                    timeout: Optional[float] = None) -> List[Slot]:
        """Restarts placed envs on their servers; leases new ones (no env_id)
        on the servers with the most room."""
        envs = list(envs)
        out: List[Optional[Slot]] = [None] * len(envs)
        route: Dict[int, List[int]] = {}
        new = [k for k, e in enumerate(envs) if not e.get("env_id")]
        for k, e in enumerate(envs):
            if e.get("env_id"):
                i = self.placement.get(e["env_id"])
                if i is None:
                    out[k] = _unplaced(e["env_id"])
                else:
                    route.setdefault(i, []).append(k)
        for _ in range(len(self.clients) + 1):  # each round loses at least one server or ends
            if new:
                await self._revive()
                live = self._live()
                if not live:
                    err = TransportError("no envserver is reachable", sent=False)
                    for k in new:
                        out[k] = Slot(env_id="", error=err)
                else:
                    for k, i in zip(new, await self._place(len(new), live)):
                        route.setdefault(i, []).append(k)
            if not route:
                break
            new = await self._send_resets(route, envs, observe, timeout, out)
            route = {}
        return [s if s is not None else Slot(env_id="", error=ShinkenError("not placed")) for s in out]

    async def _send_resets(self, route: Dict[int, List[int]], envs: List[Dict[str, Any]], observe: Any,
                           timeout: Optional[float], out: List[Optional[Slot]]) -> List[int]:
        """Sends each server its part; returns the new envs whose server
        could not be reached before anything was sent (to place again)."""
        parts = list(route.items())
        done = await asyncio.gather(*(self.clients[i].reset([envs[k] for k in ks], observe, timeout=timeout)
                                      for i, ks in parts), return_exceptions=True)
        again: List[int] = []
        for (i, ks), r in zip(parts, done):
            if isinstance(r, TransportError):
                self._mark_dead(i)
                for k in ks:
                    if not envs[k].get("env_id") and not r.sent:
                        again.append(k)
                    else:
                        out[k] = _failed(r, envs[k].get("env_id") or "")
                continue
            if isinstance(r, BaseException):
                raise r
            for k, s in zip(ks, r):
                out[k] = s
                self._track(i, s)
        return again

    async def step(self, steps: Sequence[Dict[str, Any]], observe: Any = None, *,
                   timeout: Optional[float] = None) -> List[Slot]:
        """Each env's step on its own server; a server that fails fails only its envs."""
        steps = list(steps)
        out: List[Optional[Slot]] = [None] * len(steps)
        route: Dict[int, List[int]] = {}
        for k, s in enumerate(steps):
            i = self.placement.get(s["env_id"])
            if i is None:
                out[k] = _unplaced(s["env_id"])
            else:
                route.setdefault(i, []).append(k)
        if len(route) == 1 and all(o is None for o in out):  # one server: its errors raise as they would
            (i, ks), = route.items()
            try:
                slots = await self.clients[i].step(steps, observe, timeout=timeout)
            except TransportError:
                self._mark_dead(i)
                raise
            for s in slots:
                self._track(i, s)
            return slots
        parts = list(route.items())
        done = await asyncio.gather(*(self.clients[i].step([steps[k] for k in ks], observe, timeout=timeout)
                                      for i, ks in parts), return_exceptions=True)
        for (i, ks), r in zip(parts, done):
            if isinstance(r, TransportError):
                self._mark_dead(i)
                for k in ks:
                    out[k] = _failed(r, steps[k]["env_id"])
                continue
            if isinstance(r, BaseException):
                raise r
            for k, s in zip(ks, r):
                out[k] = s
                self._track(i, s)
        return [s for s in out if s is not None]

    async def fork(self, env_id: str, n: int, observe: Any = None, *,
                   timeout: Optional[float] = None) -> List[Slot]:
        """n children of env_id, on env_id's server (in requests of at most
        its max_batch)."""
        i = self.placement.get(env_id)
        if i is None:
            raise _unplaced(env_id).error
        c = self.clients[i]
        try:
            mb = await c.max_batch()  # n over the server's max_batch: several forks of the same state
            parts = await asyncio.gather(*(c.fork(env_id, min(mb, n - k), observe, timeout=timeout)
                                           for k in range(0, n, mb)))
            slots = [s for p in parts for s in p]
        except TransportError:
            self._mark_dead(i)
            raise
        for s in slots:
            self._track(i, s)
        return slots

    # -- placement and health -----------------------------------------------------------------------

    def _track(self, i: int, s: Slot) -> None:
        if s.env_id and s.error is None:
            self.placement[s.env_id] = i
        if s.episode_id:
            self._episodes[s.episode_id] = i
        if len(self._episodes) > 65536:  # bounded: the oldest episodes are asked of every server
            for k in list(self._episodes)[:16384]:
                del self._episodes[k]

    def _live(self) -> List[int]:
        return [i for i in range(len(self.clients)) if i not in self._dead]

    def _mark_dead(self, i: int) -> None:
        self._dead.setdefault(i, time.monotonic())

    async def _revive(self) -> None:
        """Probes the dead servers whose last failure is revive_s old."""
        now = time.monotonic()
        due = [i for i, t in self._dead.items() if now - t >= self.revive_s]

        async def probe(i: int) -> None:
            try:
                ok = await self.clients[i].healthz()
            except ShinkenError:
                ok = False
            if ok:
                self._dead.pop(i, None)
            else:
                self._dead[i] = time.monotonic()

        if due:
            await asyncio.gather(*(probe(i) for i in due))

    async def _place(self, n: int, live: List[int]) -> List[int]:
        """Server indices for n new envs, filling by share of pool size."""
        async def figures(i: int) -> Tuple[int, int]:
            try:
                p = (await self.clients[i].spec(refresh=True)).get("pool") or {}
                return max(1, int(p.get("size") or 1)), int(p.get("warm") or 0)
            except TransportError:
                self._mark_dead(i)
                return 0, 0

        figs = dict(zip(live, await asyncio.gather(*(figures(i) for i in live))))
        live = [i for i in live if figs[i][0] > 0] or live
        load = self.load()
        out: List[int] = []
        for _ in range(n):
            i = min(live, key=lambda j: (load[j] / max(1, figs[j][0]), -figs[j][1], j))
            load[i] += 1
            size, warm = figs[i]
            figs[i] = (size, max(0, warm - 1))
            out.append(i)
        return out


def _unplaced(env_id: str) -> Slot:
    return Slot(env_id=env_id, error=NotFound(f"env {env_id} was not placed by this client", code="not_found",
                                              env_id=env_id))


def _failed(e: TransportError, env_id: str) -> Slot:
    err = TransportError(f"{e.message} (server of env {env_id or 'new'})", sent=e.sent, timed_out=e.timed_out,
                         env_id=env_id or None)
    return Slot(env_id=env_id, error=err)
