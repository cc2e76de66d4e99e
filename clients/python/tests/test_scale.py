"""The client at scale against a server of its own: 64 envs on one asyncio
client where slow envs (a verifier that blocks until the test releases it)
never hold up fast ones, and thousands of steps from many threads and many
asyncio tasks on one client with zero errors and bounded memory.

The server runs small screens (320x200) and two tasks of its own: ``idle``
(an empty desktop, an episode long enough never to end here) and ``slow``
(every step ends the episode and its verifier waits for a release file in
the sandbox's /tmp). SHINKEN_TEST_SCALE_ENVS sets the env count (default 64)
and SHINKEN_TEST_SCALE_STEPS the steps of each concurrency test (default 2000).
"""

import asyncio
import concurrent.futures as cf
import json
import os
import pathlib
import threading
import tracemalloc

import pytest

import shinken
from shinken import wire

from conftest import start_server

N_ENVS = int(os.environ.get("SHINKEN_TEST_SCALE_ENVS", "64"))
N_SLOW = max(1, N_ENVS // 8)
STEPS = int(os.environ.get("SHINKEN_TEST_SCALE_STEPS", "2000"))
WAIT = {"verb": "wait", "ms": 1}
# The server's default settle waits for a quiet screen; an empty desktop is quiet.
OBS = {"format": "png", "settle": {"first_ms": 0, "quiet_ms": 0, "max_ms": 0}}
RELEASE = "shinken-test-release"
DEADLINE_S = 300


def _task(tid, max_steps, verifier):
    return {"id": tid, "instruction": f"the {tid} test task", "apps": [], "setup": [],
            "verifier": {"shell": verifier, "timeout_ms": 60000}, "max_steps": max_steps}


@pytest.fixture(scope="module")
def scale(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    tasks = tmp / "tasks"
    tasks.mkdir()
    for t in (_task("idle", 100000, "echo 1"),
              # Polls every 50 ms, for at most 55 s: the release is an event.
              _task("slow", 1, f"i=0; while [ ! -e /tmp/{RELEASE} ] && [ $i -lt 1100 ]; "
                               f"do sleep 0.05; i=$((i+1)); done; echo 1")):
        (tasks / f"{t['id']}.json").write_text(json.dumps(t))
    cfg = json.loads((pathlib.Path(__file__).resolve().parents[3] / "configs" / "envserver.json").read_text())
    cfg.update(screen="320x200x24", pool=8, replicas_per_golden=1, max_sandboxes=N_ENVS + 24,
               max_concurrent_boots=8, lease_timeout="240s", reset_timeout="240s", step_timeout="120s", concurrency=N_ENVS + 8,
               record_frames=False, max_batch=64)
    (tmp / "envserver.json").write_text(json.dumps(cfg))
    p = start_server(tmp, pool=8, tasks=tasks, config=tmp / "envserver.json")
    try:
        yield p
    finally:
        p.cleanup()


def _release(state):
    """Lets every slow verifier finish: the release file in each sandbox's
    /tmp, which is the tmp directory beside its home in the server's state."""
    n = 0
    for d, subdirs, _ in os.walk(state):
        if "tmp" in subdirs and "home" in subdirs:
            pathlib.Path(d, "tmp", RELEASE).touch()
            n += 1
            subdirs[:] = []  # a sandbox's own tree is not searched
    return n


def test_64_async_envs_slow_ones_never_hold_up_fast_ones(scale):
    """N_ENVS AsyncEnvs on one AsyncClient: N_SLOW step into a verifier that
    blocks until released; meanwhile every fast env completes its steps. Only
    after all of them did is anything released, and the slow steps then come
    back with their rewards."""
    srv = scale.srv
    fast_steps = 3

    async def main():
        async with shinken.AsyncClient(srv.url, srv.token) as c:
            fast = [shinken.AsyncEnv(c, task="idle", observe=OBS, obs_mode="lazy") for _ in range(N_ENVS - N_SLOW)]
            slow = [shinken.AsyncEnv(c, task="slow", observe=OBS, obs_mode="lazy") for _ in range(N_SLOW)]
            try:
                await asyncio.wait_for(asyncio.gather(*(e.reset() for e in fast + slow)), DEADLINE_S)
                assert len({e.env_id for e in fast + slow}) == N_ENVS
                held = [asyncio.ensure_future(e.step(WAIT)) for e in slow]

                async def run(e):
                    for k in range(fast_steps):
                        *_, info = await e.step(WAIT)
                        assert info.get("error") is None and info["step"] == k + 1

                await asyncio.wait_for(asyncio.gather(*(run(e) for e in fast)), DEADLINE_S)
                waiting = sum(not h.done() for h in held)
                assert waiting == N_SLOW, f"{N_SLOW - waiting} slow steps returned before their release"
                assert _release(scale.state) >= N_ENVS
                for h in await asyncio.wait_for(asyncio.gather(*held), DEADLINE_S):
                    obs, reward, terminated, truncated, info = h
                    assert (terminated or truncated) and reward == 1.0, info
                assert c.transport.open_connections <= N_ENVS
            finally:
                await asyncio.gather(*(e.aclose() for e in fast + slow), return_exceptions=True)

    asyncio.run(main())


@pytest.fixture(scope="module")
def idle_envs(scale):
    """16 idle envs leased on a fresh client for the concurrency tests."""
    c = shinken.Client(scale.srv.url, scale.srv.token)
    slots = c.reset([wire.reset_env("idle") for _ in range(16)], OBS)
    try:
        assert all(s.error is None for s in slots), [s.error for s in slots]
        yield [s.env_id for s in slots]
    finally:
        c.close_envs([s.env_id for s in slots if s.error is None])
        c.close()


def _check(s):
    assert s.error is None, s.error
    assert s.frame is not None and s.frame.hash == s.obs["frame"] and s.frame.fmt == s.obs["format"]


class Heap:
    """Python heap growth between warm-up and the end of a run (tracemalloc)."""

    def __enter__(self):
        tracemalloc.start()
        return self

    def mark(self):
        self.base = tracemalloc.get_traced_memory()[0]

    def growth(self):
        return tracemalloc.get_traced_memory()[0] - self.base

    def __exit__(self, *exc):
        tracemalloc.stop()


def test_thousands_of_steps_from_many_threads_on_one_client(scale, idle_envs):
    """STEPS steps from 16 threads through one Client and its 4 MiB frame
    cache: every result is whole (zero protocol errors), connections stay at
    most one per thread, and the heap does not grow with the step count."""
    budget = 4 << 20
    c = shinken.Client(scale.srv.url, scale.srv.token, cache_bytes=budget)
    threads, per = 16, STEPS // 16
    lock = threading.Lock()
    done = []
    try:
        with Heap() as heap:
            def worker(k, n):
                for j in range(n):
                    for s in c.step([wire.step_env(idle_envs[(k + j) % len(idle_envs)], WAIT)], OBS):
                        _check(s)
                        s.frame.array()
                with lock:
                    done.append(n)

            with cf.ThreadPoolExecutor(threads) as ex:
                list(ex.map(worker, range(threads), [4] * threads))  # warm-up: connections, cache
                heap.mark()
                list(ex.map(worker, range(threads), [per] * threads))
            grew = heap.growth()
        assert sum(done) == threads * (4 + per)
        assert c.cache.nbytes <= budget and c.transport.open_connections <= threads
        assert grew < budget + (4 << 20), f"heap grew {grew} bytes over {threads * per} steps"
    finally:
        c.close()


def test_thousands_of_steps_from_many_asyncio_tasks_on_one_client(scale, idle_envs):
    """STEPS steps from 64 asyncio tasks on one AsyncClient, raw 320x200
    frames (192000 bytes) through a cache smaller than one frame: every
    result keeps its frame, zero errors, bounded heap."""
    tasks, per = 64, STEPS // 64

    async def main():
        async with shinken.AsyncClient(scale.srv.url, scale.srv.token, cache_bytes=150_000) as c:
            obs = dict(OBS, format="raw")

            async def task(k, n):
                for j in range(n):
                    ids = [idle_envs[(k + j + i) % len(idle_envs)] for i in range(1 + j % 2)]
                    for s in await c.step([wire.step_env(e, WAIT) for e in ids], obs):
                        _check(s)
                        assert s.frame.array().shape == (s.obs["h"], s.obs["w"], 3)
                return n

            with Heap() as heap:
                await asyncio.gather(*(task(k, 2) for k in range(tasks)))
                heap.mark()
                got = await asyncio.wait_for(asyncio.gather(*(task(k, per) for k in range(tasks))), DEADLINE_S)
                grew = heap.growth()
            assert sum(got) == tasks * per
            # The cache keeps its budget, or the one newest frame when that alone is over it.
            assert c.cache.nbytes <= c.cache.max_bytes or len(c.cache) == 1
            assert c.transport.open_connections <= tasks
            assert grew < (8 << 20), f"heap grew {grew} bytes over {tasks * per} requests"

    asyncio.run(main())
