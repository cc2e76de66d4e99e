"""The client's own HTTP/1.1 transport (shinken/_http.py) against httpx and
aiohttp, on the same envserver, in the same run, in interleaved rounds.

    SHINKEN_URL=http://127.0.0.1:8795 python3 clients/python/bench/http_clients.py

Every client sends the same bytes (msgpack bodies built once by shinken.wire)
and every reply is decoded by the same function (shinken._http.decode_reply),
so what differs is only the HTTP exchange: writing the request, parsing the
reply, the keep-alive pool. httpx and aiohttp are measured only where they are
installed (Debian: python3-httpx, python3-aiohttp); they are not dependencies
of the client, and a missing one is skipped.

Cases (the envs are leased by the script, xterm desktops, and closed at the end):

  healthz     GET /healthz, one at a time
  spec        GET /v1/spec (msgpack, decoded), one at a time
  observe     POST /v1/observe of one env, settle off, its frame in `have`
              (a small msgpack body both ways), one at a time
  observe-raw POST /v1/observe of one env, settle off, a raw RGB frame
              (a reply of a few MB), one at a time
  step64      POST /v1/step of all --envs envs in one batch, a 1 ms `wait`,
              settle off, their frames in `have`
  step64x     --envs concurrent POST /v1/step requests of one env each (the
              same step): as many connections in flight

Before each step block every env's episode is restarted (untimed), so the
block's steps fit in the task's step budget. Each round runs every case on
every client, the clients in a rotating order, so load drifting on a shared
host falls on all of them alike. Reported per client and case: the median
wall time of one request (of one batch of --envs requests for step64x) over
all rounds, its p90, the client process's CPU per request (per batch for
step64x; the server is another process, so this is the client's own work),
and the ratio of each to the hand-written client's; the paired ratio is the
median over rounds of the round's median wall time against shinken's in the
same round. Replies are checked (no slot may fail); a frame a reply carried
although `have` listed the env's last one (a desktop that drew after its
reset) is counted and printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shinken import wire  # noqa: E402
from shinken._http import AsyncTransport, decode_reply  # noqa: E402

MAX_CONNS = 256
CT = wire.CONTENT_TYPE


class Shinken:
    name = "shinken"

    def __init__(self, url, token):
        self.t = AsyncTransport(url, token, max_conns=MAX_CONNS)

    async def request(self, method, path, body):
        status, ctype, data = await self.t.request(method, path, raw_body=body)
        return decode_reply(status, ctype, data)

    async def aclose(self):
        await self.t.aclose()


class Httpx:
    name = "httpx"

    def __init__(self, url, token):
        import httpx
        self.version = httpx.__version__
        hdr = {"Accept": CT, "Content-Type": CT}
        if token:
            hdr["Authorization"] = f"Bearer {token}"
        lim = httpx.Limits(max_connections=MAX_CONNS, max_keepalive_connections=MAX_CONNS)
        self.c = httpx.AsyncClient(base_url=url, headers=hdr, limits=lim, timeout=300.0)

    async def request(self, method, path, body):
        r = await self.c.request(method, path, content=body or None)
        return decode_reply(r.status_code, r.headers.get("content-type", ""), r.content)

    async def aclose(self):
        await self.c.aclose()


class Aiohttp:
    name = "aiohttp"

    def __init__(self, url, token):
        import aiohttp
        self.version = aiohttp.__version__
        hdr = {"Accept": CT, "Content-Type": CT}
        if token:
            hdr["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self.s = aiohttp.ClientSession(
            headers=hdr, connector=aiohttp.TCPConnector(limit=MAX_CONNS),
            timeout=aiohttp.ClientTimeout(total=300.0), skip_auto_headers=("User-Agent",))

    async def request(self, method, path, body):
        async with self.s.request(method, self.url + path, data=body or None) as r:
            data = await r.read()
            return decode_reply(r.status, r.headers.get("Content-Type", ""), data)

    async def aclose(self):
        await self.s.close()


def make_clients(url, token):
    out = []
    for cls in (Shinken, Httpx, Aiohttp):
        try:
            out.append(cls(url, token))
        except ImportError as e:
            print(f"# {cls.name}: not installed ({e}), skipped", flush=True)
    return out


async def timed(fn, n):
    """n sequential calls of fn: per-call wall times (s) and the process's CPU per call (s)."""
    walls = []
    c0 = time.process_time()
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        walls.append(time.perf_counter() - t)
    return walls, (time.process_time() - c0) / n


async def main_async(a):
    url = (a.url or os.environ.get("SHINKEN_URL") or "http://127.0.0.1:8700").rstrip("/")
    token = a.token or os.environ.get("SHINKEN_TOKEN")
    setup = AsyncTransport(url, token, connect_retry_s=10)
    clients = make_clients(url, token)
    envs = []
    try:
        off = {"max_ms": 0}
        # Lease the envs: batches of 8, as a trainer's burst would.
        for i in range(0, a.envs, 8):
            n = min(8, a.envs - i)
            rep = await setup.call("POST", "/v1/reset", wire.reset_request(
                [wire.reset_env(a.task, seed=i + k) for k in range(n)], {"settle": off}))
            envs += [r["env_id"] for r in rep["results"]]
        one = envs[0]
        wait = {"verb": "wait", "ms": 1}
        bodies = {}
        spec = await setup.call("GET", "/v1/spec")
        budget = {t["id"]: t["max_steps"] for t in spec["tasks"]}.get(a.task)
        if budget and a.n_big > budget:
            raise SystemExit(f"--n-big {a.n_big} is over {a.task}'s step budget of {budget}")

        async def refresh():
            """Restarts every env's episode (a step block must fit in the task's
            step budget: a step after the end is episode_over, a cheap error)
            and rebuilds the bodies, with the envs' frames in `have`."""
            rep = await setup.call("POST", "/v1/reset", wire.reset_request(
                [wire.reset_env(a.task, env_id=e, seed=i) for i, e in enumerate(envs)]))
            frames = {r["env_id"]: r["obs"]["frame"] for r in rep["results"]}
            have = sorted(set(frames.values()))
            bodies["observe"] = wire.pack(wire.observe_request([one], {"settle": off}, [frames[one]]))
            bodies["raw"] = wire.pack(wire.observe_request([one], {"format": "raw", "settle": off}))
            bodies["step"] = wire.pack(wire.step_request([wire.step_env(e, wait) for e in envs],
                                                         {"settle": off}, have))
            bodies["one"] = {e: wire.pack(wire.step_request([wire.step_env(e, wait)], {"settle": off},
                                                            [frames[e]])) for e in envs}

        sent_frames = {}

        def ok(rep, n, what):
            """Checks a reply and counts the frames it carried (a desktop that
            drew after its settled reset sends one; expected: none)."""
            rs = rep["results"]
            bad = [r.get("error") for r in rs if r.get("error")]
            if len(rs) != n or bad:
                raise SystemExit(f"{what}: unexpected reply: {len(rs)} results of {n}, errors {bad[:3]}")
            sent_frames[what] = sent_frames.get(what, 0) + len(rep.get("frames") or {})

        await refresh()
        spec_len = len((await setup.request("GET", "/v1/spec"))[2])
        raw_len = len((await setup.request("POST", "/v1/observe", raw_body=bodies["raw"]))[2])
        await refresh()  # the raw frame became the env's last: `have` is rebuilt

        def cases(c):
            async def step_batch():
                ok(await c.request("POST", "/v1/step", bodies["step"]), len(envs), f"{c.name} step64")

            async def step_each():
                reps = await asyncio.gather(*(c.request("POST", "/v1/step", bodies["one"][e])
                                              for e in envs))
                for r in reps:
                    ok(r, 1, f"{c.name} step64x")

            async def observe():
                ok(await c.request("POST", "/v1/observe", bodies["observe"]), 1, f"{c.name} observe")

            return {
                "healthz": (a.n, lambda: c.request("GET", "/healthz", None)),
                "spec": (a.n // 2, lambda: c.request("GET", "/v1/spec", None)),
                "observe": (a.n, observe),
                "observe-raw": (a.n_big, lambda: c.request("POST", "/v1/observe", bodies["raw"])),
                "step64": (a.n_big, step_batch),
                "step64x": (a.n_big, step_each),
            }
        stepping = ("step64", "step64x")

        names = list(cases(clients[0]))
        # Warm-up: open the connections (step64x opens --envs of them) and check replies.
        for c in clients:
            for name, (n, fn) in cases(c).items():
                if name in stepping:
                    await refresh()
                await fn()
        await refresh()
        walls = {(c.name, k): [] for c in clients for k in names}
        cpus = {(c.name, k): [] for c in clients for k in names}
        round_meds = {(c.name, k): [] for c in clients for k in names}
        for rnd in range(a.rounds):
            order = clients[rnd % len(clients):] + clients[:rnd % len(clients)]
            for name in names:
                for c in order:
                    n, fn = cases(c)[name]
                    if name in stepping:
                        await refresh()  # untimed
                    w, cpu = await timed(fn, n)
                    walls[c.name, name] += w
                    cpus[c.name, name].append(cpu)
                    round_meds[c.name, name].append(statistics.median(w))
            await refresh()
            print(f"# round {rnd + 1}/{a.rounds} done", file=sys.stderr, flush=True)

        if any(sent_frames.values()):
            print(f"# frames sent where none were expected: {sent_frames}")
        load = os.getloadavg()
        vers = ", ".join(f"{c.name} {getattr(c, 'version', '(this tree)')}" for c in clients)
        print(f"# {platform.python_implementation()} {platform.python_version()}; {vers}; "
              f"{os.cpu_count()} cores, load average {load[0]:.1f} at the end; {a.rounds} rounds; "
              f"{len(envs)} envs of {a.task}; spec reply {spec_len} B, raw observe reply {raw_len} B")
        print(f"{'case':12} {'client':8} {'requests':>8} {'median ms':>10} {'p90 ms':>8} "
              f"{'CPU us/req':>10} {'x wall':>7} {'x paired':>8} {'x CPU':>6}")
        for name in names:
            base_w = statistics.median(walls["shinken", name])
            base_c = statistics.median(cpus["shinken", name])
            for c in clients:
                w = walls[c.name, name]
                med = statistics.median(w)
                p90 = sorted(w)[int(0.9 * (len(w) - 1))]
                cpu = statistics.median(cpus[c.name, name])
                paired = statistics.median(x / y for x, y in zip(round_meds[c.name, name],
                                                                  round_meds["shinken", name]))
                print(f"{name:12} {c.name:8} {len(w):>8} {med * 1e3:10.3f} {p90 * 1e3:8.3f} "
                      f"{cpu * 1e6:10.0f} {med / base_w:7.2f} {paired:8.2f} {cpu / base_c:6.2f}",
                      flush=True)
    finally:
        for c in clients:
            await c.aclose()
        if envs:
            try:
                await setup.call("POST", "/v1/close", wire.close_request(envs))
            except Exception as e:  # the server may be gone; its leases expire
                print(f"# close: {e}", file=sys.stderr)
        await setup.aclose()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="envserver URL (default $SHINKEN_URL)")
    ap.add_argument("--token", help="bearer token (default $SHINKEN_TOKEN)")
    ap.add_argument("--task", default="xterm-hello-file")
    ap.add_argument("--envs", type=int, default=64, help="envs of the step cases (at most max_batch)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("-n", type=int, default=200, help="requests per round of each small case")
    ap.add_argument("--n-big", type=int, default=10, help="requests per round of observe-raw and the steps")
    a = ap.parse_args()
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
