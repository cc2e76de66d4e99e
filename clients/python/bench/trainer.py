"""Trainer-side benchmarks, each against real envservers it starts itself.

    cd clients/python && /usr/bin/python3 bench/trainer.py [--episodes 8] [--steps 20] [--envs 8]

agent: shinken.agent episodes of xterm-hello-file with the token-level model
  double (tests/model_double.py; its generate costs ~nothing), per turn:
  the loop's own time (template, image decode and conversion, bookkeeping:
  total - reset - generate - env step), the env step as the client sees it (request,
  wire, reply decode) and, from the same replies, the server's own step time
  (info.timings: act + observe + verify). png and raw frames.
multi: step throughput of the same number of envs on one server (pool = envs)
  and spread over two servers (pool = envs / 2 each), wait actions, in the
  same run.

Prints one JSON object. Numbers on a shared 2-core host are noisy: read the
ratios beside each other, not as absolutes.
"""

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import shinken  # noqa: E402
from shinken.agent import AgentLoop  # noqa: E402
from conftest import start_server  # noqa: E402
from model_double import HELLO_SOLUTION, ScriptedModel, ToyTemplate  # noqa: E402

TASK = "xterm-hello-file"
WAIT = {"verb": "wait", "ms": 10}


async def agent_bench(srv, episodes: int, fmt: str):
    per_turn = {"reset_ms": [], "loop_ms": [], "env_ms": [], "server_ms": [], "client_ms": [], "image_ms": [], "template_ms": []}
    rewards = []
    async with shinken.AsyncClient(srv.url, srv.token) as c:
        for _ in range(episodes):
            model = ScriptedModel(HELLO_SOLUTION)
            out = await AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui",
                                  observe={"format": fmt}).run(c, TASK)
            t = out.extra_fields["timings"]
            n = out.extra_fields["env_steps"]
            rewards.append(out.reward_score)
            per_turn["loop_ms"].append((t["total_s"] - t["reset_s"] - t["generate_s"] - t["env_s"]) / n * 1e3)
            per_turn["reset_ms"].append(t["reset_s"] * 1e3)
            per_turn["env_ms"].append(t["env_s"] / n * 1e3)
            per_turn["server_ms"].append(t["server_s"] / n * 1e3)
            per_turn["client_ms"].append((t["env_s"] - t["server_s"]) / n * 1e3)
            per_turn["image_ms"].append(t["image_s"] / n * 1e3)
            per_turn["template_ms"].append(t["template_s"] / n * 1e3)
    med = {k: round(statistics.median(v), 2) for k, v in per_turn.items()}
    med["loop_over_server"] = round(med["loop_ms"] / med["server_ms"], 3) if med["server_ms"] else None
    med["episodes"], med["rewards"] = episodes, rewards
    return med


async def throughput(client, envs: int, steps: int) -> float:
    """Env-steps per second over ``steps`` steps of every env (the task allows
    9 steps an episode, so the envs are restarted in place, untimed, between
    rounds)."""
    ids = None
    timed = 0.0
    done = 0
    while done < steps:
        req = [{"task": TASK}] * envs if ids is None else [{"env_id": e, "task": TASK} for e in ids]
        slots = await client.reset(req)
        bad = [s.error for s in slots if s.error]
        if bad:
            raise RuntimeError(f"reset: {bad[0]}")
        ids = [s.env_id for s in slots]
        n = min(9, steps - done)
        t0 = time.perf_counter()
        for _ in range(n):
            out = await client.step([{"env_id": e, "action": WAIT} for e in ids])
            bad = [s.error for s in out if s.error]
            if bad:
                raise RuntimeError(f"step: {bad[0]}")
        timed += time.perf_counter() - t0
        done += n
    await client.close_envs(ids)
    return envs * steps / timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--envs", type=int, default=8)
    a = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="shkbench"))
    procs = []
    try:
        one = start_server(tmp, pool=a.envs)
        procs.append(one)
        result = {"agent_png": asyncio.run(agent_bench(one.srv, a.episodes, "png")),
                  "agent_raw": asyncio.run(agent_bench(one.srv, a.episodes, "raw"))}
        x = start_server(tmp, pool=a.envs // 2, token=one.srv.token)
        procs.append(x)
        y = start_server(tmp, pool=a.envs - a.envs // 2, token=one.srv.token)
        procs.append(y)

        async def both():
            async with shinken.AsyncClient(one.srv.url, one.srv.token) as c1:
                r1 = await throughput(c1, a.envs, a.steps)
            async with shinken.AsyncMultiClient([x.srv.url, y.srv.url], one.srv.token) as c2:
                r2 = await throughput(c2, a.envs, a.steps)
            async with shinken.AsyncClient(one.srv.url, one.srv.token) as c1:
                r1b = await throughput(c1, a.envs, a.steps)  # again, to see the drift between runs
            return r1, r2, r1b

        r1, r2, r1b = asyncio.run(both())
        result["multi"] = {"envs": a.envs, "steps": a.steps, "one_server_steps_per_s": round(r1, 1),
                           "two_servers_steps_per_s": round(r2, 1), "one_server_again_steps_per_s": round(r1b, 1),
                           "ratio_two_over_one": round(r2 / ((r1 + r1b) / 2), 3)}
        print(json.dumps(result, indent=2))
    finally:
        for p in procs:
            p.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
