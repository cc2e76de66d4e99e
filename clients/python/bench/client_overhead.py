"""Client-side overhead per step, beside the server's own step time, same run.

    SHINKEN_URL=http://127.0.0.1:8700 SHINKEN_TOKEN=... \
        python3 clients/python/bench/client_overhead.py --envs 1 4 --steps 20

For each (API, envs, format, decode) it steps `wait 1 ms` actions and reports,
per env-step: the wall time of the call, the server's time from
info.timings (the sum of its *_us entries for that env), and the difference
— what the client and the wire add. Decode is "eager" (every obs decoded to
an array before the call returns) or "lazy" (obs handed back as Frames,
never decoded here). Numbers are medians over the steps.
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

WAIT = {"verb": "wait", "ms": 1}


def server_us(infos, k):
    """The server's time for env k: the sum of its info.timings entries (µs)."""
    t = infos.get("timings")
    if t is None:
        return 0.0
    if any(isinstance(v, np.ndarray) for v in t.values()):  # VectorEnv: dict of arrays
        t = {key: v[k] for key, v in t.items() if not key.startswith("_") and t.get("_" + key, [True] * (k + 1))[k]}
    return float(sum(t.values()))


def bench_sync(task, n, fmt, mode, steps):
    walls, servers = [], []
    with shinken.VectorEnv(task=task, n=n, observe=fmt, obs_mode=mode) as vec:
        vec.reset()
        for j in range(steps):
            if j and j % 8 == 0:  # stay inside the task's max_steps
                vec.reset()
            t = time.perf_counter()
            obs, rew, term, trunc, infos = vec.step([WAIT] * n)
            if mode == "array":
                np.asarray(obs)
            walls.append((time.perf_counter() - t) * 1e6)
            servers.append(max(server_us(infos, k) for k in range(n)))
    return walls, servers


async def _bench_async(task, n, fmt, mode, steps):
    walls, servers = [], []
    async with shinken.AsyncClient() as c:
        envs = [shinken.AsyncEnv(c, task, observe=fmt, obs_mode=mode) for _ in range(n)]
        await asyncio.gather(*(e.reset() for e in envs))
        for j in range(steps):
            if j and j % 8 == 0:
                await asyncio.gather(*(e.reset() for e in envs))
            t = time.perf_counter()
            res = await asyncio.gather(*(e.step(WAIT) for e in envs))
            walls.append((time.perf_counter() - t) * 1e6)
            servers.append(max(server_us(r[4], 0) for r in res))
        await asyncio.gather(*(e.aclose() for e in envs))
    return walls, servers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="xterm-hello-file")
    ap.add_argument("--envs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--formats", nargs="+", default=["png", "raw"])
    a = ap.parse_args()
    print(f"{'api':6} {'envs':>4} {'fmt':4} {'decode':6} {'wall ms':>8} {'server ms':>9} {'client+wire ms':>14} "
          f"{'per env-step ms':>15}")
    for n in a.envs:
        for fmt in a.formats:
            for mode, label in (("array", "eager"), ("lazy", "lazy")):
                for api in ("sync", "async"):
                    if api == "sync":
                        w, s = bench_sync(a.task, n, fmt, mode, a.steps)
                    else:
                        w, s = asyncio.run(_bench_async(a.task, n, fmt, mode, a.steps))
                    wm, sm = statistics.median(w) / 1e3, statistics.median(s) / 1e3
                    print(f"{api:6} {n:>4} {fmt:4} {label:6} {wm:8.2f} {sm:9.2f} {wm - sm:14.2f} "
                          f"{(wm - sm) / n:15.2f}", flush=True)


if __name__ == "__main__":
    main()
