"""Client-side overhead per step, beside the server's own step time, same run.

    SHINKEN_URL=http://127.0.0.1:8700 SHINKEN_TOKEN=... \
        python3 clients/python/bench/client_overhead.py --envs 1 4 --steps 20

For each (API, envs, format, decode) it steps actions that type one character
into the task's terminal (so every step is a new frame that crosses the wire
and, eagerly, gets decoded) and reports, per call: the wall time; the
round trip (request written → whole reply read, measured in the transport:
the wire plus all of the server's work); the server's own step time as it
reports it in info.timings (sum of the *_us entries, slowest env of the
call); and the client's overhead = wall − round trip (building the request,
msgpack decode, frame resolution, decode, Python), per call and per env-step. Decode is "eager"
(every obs decoded to an array before the call returns) or "lazy" (obs
handed back as Frames, not decoded). Numbers are medians over the steps;
episodes are restarted every 8 steps (outside the timed calls).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import shinken  # noqa: E402

TYPE = {"verb": "type_text", "text": "x"}


def retry(f, tries=3):
    """A reset on a loaded host can meet a sandbox that failed to boot."""
    for k in range(tries):
        try:
            return f()
        except shinken.ShinkenError:
            if k == tries - 1:
                raise


async def aretry(f, tries=3):
    for k in range(tries):
        try:
            return await f()
        except shinken.ShinkenError:
            if k == tries - 1:
                raise


def server_us(infos, k):
    """The server's time for env k: the sum of its info.timings entries (µs)."""
    t = infos.get("timings")
    if t is None:
        return 0.0
    if any(isinstance(v, np.ndarray) for v in t.values()):  # VectorEnv: dict of arrays
        t = {key: v[k] for key, v in t.items() if not key.startswith("_") and t.get("_" + key, [True] * (k + 1))[k]}
    return float(sum(t.values()))


def bench_sync(task, n, fmt, mode, steps):
    walls, servers, rtts = [], [], []
    with shinken.VectorEnv(task=task, n=n, observe=fmt, obs_mode=mode, on_error="info") as vec:
        retry(vec.reset)
        for j in range(steps):
            if j and j % 8 == 0:  # stay inside the task's max_steps
                retry(vec.reset)
            t = time.perf_counter()
            obs, rew, term, trunc, infos = vec.step([TYPE] * n)
            if mode == "array":
                np.asarray(obs)
            walls.append((time.perf_counter() - t) * 1e6)
            rtts.append(vec.client.stats.rtts[-1] * 1e6)
            servers.append(max(server_us(infos, k) for k in range(n)))
    return walls, servers, rtts


async def _bench_async(task, n, fmt, mode, steps):
    walls, servers, rtts = [], [], []
    async with shinken.AsyncClient() as c:
        envs = [shinken.AsyncEnv(c, task, observe=fmt, obs_mode=mode) for _ in range(n)]
        await asyncio.gather(*(aretry(e.reset) for e in envs))
        for j in range(steps):
            if j and j % 8 == 0:
                await asyncio.gather(*(aretry(e.reset) for e in envs))
            t = time.perf_counter()
            res = await asyncio.gather(*(e.step(TYPE) for e in envs))
            walls.append((time.perf_counter() - t) * 1e6)
            rtts.append(max(list(c.stats.rtts)[-n:]) * 1e6)  # the call's n requests, in flight together
            servers.append(max(server_us(r[4], 0) for r in res))
        await asyncio.gather(*(e.aclose() for e in envs))
    return walls, servers, rtts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="xterm-hello-file")
    ap.add_argument("--envs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--formats", nargs="+", default=["png", "raw"])
    a = ap.parse_args()
    print(f"{'api':6} {'envs':>4} {'fmt':4} {'decode':6} {'wall ms':>8} {'rtt ms':>7} {'server ms':>9} "
          f"{'client ms':>9} {'client/env-step ms':>18}")
    for n in a.envs:
        for fmt in a.formats:
            for mode, label in (("array", "eager"), ("lazy", "lazy")):
                for api in ("sync", "async"):
                    if api == "sync":
                        w, s, r = bench_sync(a.task, n, fmt, mode, a.steps)
                    else:
                        w, s, r = asyncio.run(_bench_async(a.task, n, fmt, mode, a.steps))
                    over = statistics.median(x - y for x, y in zip(w, r)) / 1e3
                    wm, rm, sm = (statistics.median(v) / 1e3 for v in (w, r, s))
                    print(f"{api:6} {n:>4} {fmt:4} {label:6} {wm:8.2f} {rm:7.2f} {sm:9.2f} {over:9.2f} "
                          f"{over / n:18.2f}", flush=True)


if __name__ == "__main__":
    main()
