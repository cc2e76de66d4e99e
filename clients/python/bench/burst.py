"""A burst of resets and a slow stepping phase against a running envserver,
the load a trainer puts on a host (docs/architecture.md, "Bursts").

    SHINKEN_URL=http://127.0.0.1:8700 SHINKEN_TOKEN=... \
        python3 clients/python/bench/burst.py --envs 64 --rounds 5 --period 3 --pid $(pgrep -o envserver)

Sends --envs resets of one task at once (each its own request, as many
trainer workers would) and reports how many succeeded, the error codes of
those that did not, and the reset latency p50/p95 (client wall time). Then
every live env steps once per --period seconds for --rounds rounds (a wait
action: the policy is slow, the host holds many live episodes) and the step
latency p50/p95 is reported. With --pid (the envserver's process) the
memory of its whole process tree (RSS and PSS summed over the server, the
sandboxes' inits, Xvfb, window managers, guestd and apps) is reported per
live desktop, and the host's load average beside it: on a shared host the
numbers are only as good as the load they ran under. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import shinken  # noqa: E402
from shinken import wire  # noqa: E402


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def tree_memory(root):
    """RSS and PSS in bytes summed over root and its descendants."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    kids = {}
    for p, pp in parent.items():
        kids.setdefault(pp, []).append(p)
    todo, rss, pss, n = [root], 0, 0, 0
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k == "Rss":
                        rss += int(v.split()[0]) << 10
                    elif k == "Pss":
                        pss += int(v.split()[0]) << 10
            n += 1
        except OSError:
            pass
    return rss, pss, n


def live_sandboxes(url, token):
    """Warm, leased, booting and replica sandboxes, from /metrics."""
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
    n = 0
    for line in urllib.request.urlopen(req, timeout=30).read().decode().splitlines():
        if line.startswith("shinken_pool_sandboxes{"):
            n += int(float(line.split()[-1]))
    return n


async def main(a):
    async with shinken.AsyncClient(timeout=600, max_conns=min(a.envs + 8, 192)) as c:  # the server allows 256 per address
        spec = await c.spec()

        async def one():
            t0 = time.perf_counter()
            try:
                [s] = await c.reset([wire.reset_env(a.task)])
                return s, time.perf_counter() - t0, None
            except shinken.ShinkenError as e:
                return None, time.perf_counter() - t0, e

        load0 = os.getloadavg()
        t0 = time.perf_counter()
        got = await asyncio.gather(*(one() for _ in range(a.envs)))
        burst_s = time.perf_counter() - t0
        live, lat, codes = [], [], {}
        for s, dt, err in got:
            err = err or (s.error if s else None)
            if err is None:
                live.append(s.env_id)
                lat.append(dt)
            else:
                codes[err.code or type(err).__name__] = codes.get(err.code or type(err).__name__, 0) + 1
        out = {"envs": a.envs, "pool": spec["pool"].get("size"), "max_sandboxes": spec["pool"].get("max_sandboxes"),
               "reset_ok": len(live), "reset_errors": codes, "burst_wall_s": round(burst_s, 2),
               "reset_p50_s": pct(lat, 0.5), "reset_p95_s": pct(lat, 0.95), "load_before": load0,
               "load_after_burst": os.getloadavg()}
        steps = []

        async def tick(env):
            t = time.perf_counter()
            [s] = await c.step([wire.step_env(env, {"verb": "wait", "ms": 1})])
            if s.error is None:
                steps.append(time.perf_counter() - t)

        for r in range(a.rounds):
            t = time.perf_counter()
            # Each env steps once per period, spread over the period.
            async def paced(i, env):
                await asyncio.sleep(a.period * i / max(1, len(live)))
                await tick(env)
            await asyncio.gather(*(paced(i, e) for i, e in enumerate(live)))
            await asyncio.sleep(max(0.0, a.period - (time.perf_counter() - t)))
        out.update({"steps": len(steps), "step_p50_ms": pct([x * 1000 for x in steps], 0.5),
                    "step_p95_ms": pct([x * 1000 for x in steps], 0.95), "load_after_steps": os.getloadavg()})
        if a.pid:
            rss, pss, n = tree_memory(a.pid)
            out.update({"tree_procs": n, "tree_rss_mib": round(rss / 2**20), "tree_pss_mib": round(pss / 2**20)})
            n = live_sandboxes(c.url, c.token)
            out["live_sandboxes"] = n
            if n:
                out["pss_per_desktop_mib"] = round(pss / 2**20 / n, 1)
                out["rss_per_desktop_mib"] = round(rss / 2**20 / n, 1)
        await c.close_envs(live)
        print(json.dumps(out))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--task", default="xterm-hello-file")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--period", type=float, default=3.0)
    ap.add_argument("--pid", type=int, default=0)
    asyncio.run(main(ap.parse_args()))
