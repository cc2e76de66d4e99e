"""One client shared by many threads and many asyncio tasks against a real
envserver: no protocol errors, bounded memory, and a slow env never holds a
fast one up."""

import asyncio
import concurrent.futures as cf
import os
import threading
import time

import numpy as np
import pytest

import shinken
from shinken import wire

WAIT = {"verb": "wait", "ms": 1}
# Envs leased at once: the test server's pool is 4 and other modules hold one.
# On a host with room for them, SHINKEN_TEST_ENVS=64 (and SHINKEN_TEST_POOL)
# runs the send/recv test over 64 envs.
N_ENVS = int(os.environ.get("SHINKEN_TEST_ENVS", "3"))
# Steps per test. The shipped tasks end after 10 steps and a reset boots a
# sandbox, so the default keeps the suite short on a small host; raise it
# (e.g. 5000) on a bigger one.
STEPS = int(os.environ.get("SHINKEN_TEST_STEPS", "160"))


@pytest.fixture
def leased(server, task_id):
    """N_ENVS env ids leased on a fresh client; closed after the test."""
    c = shinken.Client(server.url, server.token)
    slots = c.reset([wire.reset_env(task_id) for _ in range(N_ENVS)])
    for _ in range(2):  # a sandbox that failed to boot on a loaded host: lease another
        bad = [k for k, s in enumerate(slots) if isinstance(s.error, shinken.SandboxDied)]
        for k, s in zip(bad, c.reset([wire.reset_env(task_id) for _ in bad])):
            slots[k] = s
    assert all(s.error is None for s in slots), [s.error for s in slots]
    yield c, [s.env_id for s in slots]
    c.close_envs([s.env_id for s in slots])
    c.close()


def _check(slot):
    assert slot.error is None, slot.error
    assert slot.frame is not None and slot.frame.hash == slot.obs["frame"]
    assert slot.frame.fmt == slot.obs["format"]


# Errors of env churn, not of the protocol: an episode another worker ran to
# its end (EpisodeOver), or a sandbox that failed to boot on reset.
CHURN = (shinken.EpisodeOver, shinken.SandboxDied, shinken.NotFound)
_resetting = set()
_resetting_lock = threading.Lock()


def _to_reset(slots):
    again = []
    for s in slots:
        if isinstance(s.error, CHURN):
            again.append(s.env_id)
            continue
        _check(s)
        if s.terminated or s.truncated:
            again.append(s.env_id)
    with _resetting_lock:  # one worker restarts a given env at a time
        again = [e for e in again if e not in _resetting]
        _resetting.update(again)
    return again


def _done_resetting(again, results, ids):
    for e, r in zip(again, results):
        if r.error is None:
            _check(r)
        elif not isinstance(r.error, CHURN):
            raise AssertionError(r.error)
        elif isinstance(r.error, shinken.SandboxDied) and r.env_id in ids:
            pass  # its next step says NotFound; the env is left out from then on
    with _resetting_lock:
        _resetting.difference_update(again)


def _settle(c, slots, task, ids=()):
    """Checks step results and restarts episodes that ended (the shipped tasks
    end after 10 steps). Returns how many steps succeeded."""
    again = _to_reset(slots)
    if again:
        _done_resetting(again, c.reset([wire.reset_env(task, e) for e in again]), ids)
    return sum(1 for s in slots if s.error is None)


async def _asettle(c, slots, task, ids=()):
    again = _to_reset(slots)
    if again:
        _done_resetting(again, await c.reset([wire.reset_env(task, e) for e in again]), ids)
    return sum(1 for s in slots if s.error is None)


def test_many_threads_one_client(server, leased, task_id):
    c, ids = leased
    shared = shinken.Client(server.url, server.token, cache_bytes=8 << 20)
    per_thread = STEPS // 8

    def worker(k):
        n = 0
        for j in range(per_thread):
            n += _settle(shared, shared.step([wire.step_env(ids[(k + j) % len(ids)], WAIT)]), task_id)
        return n

    with cf.ThreadPoolExecutor(8) as ex:
        assert sum(ex.map(worker, range(8))) > per_thread * 8 * 0.5
    # Memory stays bounded: the cache holds its budget (plus at most one frame).
    assert shared.cache.nbytes <= shared.cache.max_bytes + (8 << 20)
    assert shared.transport.open_connections <= 8
    shared.close()
    assert shared.transport.open_connections == 0


def test_many_asyncio_tasks_one_client(server, leased, task_id):
    _, ids = leased

    async def main():
        async with shinken.AsyncClient(server.url, server.token) as c:
            per_task = STEPS // 16

            async def task(k):
                n = 0
                for j in range(per_task):
                    slots = await c.step([wire.step_env(ids[(k + j) % len(ids)], WAIT)], "raw")
                    n += await _asettle(c, slots, task_id)
                    if slots[0].frame is not None:
                        assert slots[0].frame.array().shape == (slots[0].obs["h"], slots[0].obs["w"], 3)
                return n

            done = await asyncio.gather(*(task(k) for k in range(16)))
            assert sum(done) > per_task * 16 * 0.5
            assert c.transport.open_connections <= 16
            return c.cache

    cache = asyncio.run(main())
    assert cache.nbytes <= cache.max_bytes


def test_cache_smaller_than_one_frame_loses_nothing(server, leased, task_id):
    """Raw 1280x800 frames against a 1-byte budget, from 4 threads: every
    result still carries its frame (from its own reply or its request's have)."""
    _, ids = leased
    c = shinken.Client(server.url, server.token, cache_bytes=1)

    def worker(k):
        for j in range(STEPS // 40):
            slots = c.step([wire.step_env(i, WAIT) for i in ids], "raw")
            _settle(c, slots, task_id)
            for s in slots:
                if s.frame is not None:
                    assert s.frame.array().shape == (s.obs["h"], s.obs["w"], 3)
        return STEPS // 40

    with cf.ThreadPoolExecutor(4) as ex:
        assert sum(ex.map(worker, range(4))) == STEPS // 40 * 4
    assert len(c.cache) <= 1
    c.close()


def test_png_and_raw_of_one_screen_stay_apart(server, leased):
    """Same pixels, different bytes: each format's obs decodes from its own bytes."""
    _, ids = leased
    c = shinken.Client(server.url, server.token)
    [p] = c.step([wire.step_env(ids[0], WAIT)], "png")
    [r] = c.step([wire.step_env(ids[0], WAIT)], "raw")
    [p2] = c.step([wire.step_env(ids[0], WAIT)], "png")
    assert p.frame.data[:4] == b"\x89PNG" and p2.frame.data[:4] == b"\x89PNG"
    assert r.frame.fmt == "raw" and len(r.frame.data) == r.obs["w"] * r.obs["h"] * 3
    if p.obs["frame"] == r.obs["frame"] == p2.obs["frame"]:
        assert p2.cached, "the png bytes were held: the server should not resend them"
        np.testing.assert_array_equal(p.frame.array(), r.frame.array())
    c.close()


def test_slow_env_does_not_hold_up_a_fast_one_on_a_shared_client(server, leased, task_id):
    """While one thread's step runs 2.5 s on env 0, another thread's steps on
    env 1 through the same client complete (a client-wide lock would queue
    them behind the slow one)."""
    _, ids = leased
    c = shinken.Client(server.url, server.token)
    with cf.ThreadPoolExecutor(1) as ex:
        slow = ex.submit(c.step, [wire.step_env(ids[0], {"verb": "wait", "ms": 2500})])
        beside = 0
        for _ in range(8):  # inside the task's 10-step budget
            [s] = c.step([wire.step_env(ids[1], WAIT)])
            _check(s)
            if not slow.done():
                beside += 1
        assert slow.result()[0].error is None
    assert beside >= 3, f"only {beside} fast steps finished while the slow one ran"
    c.close()


def test_vector_send_recv_returns_ready_envs_first(server, task_id):
    with shinken.VectorEnv(server.url, task_id, N_ENVS, token=server.token) as vec:
        vec.reset()
        slow = {"verb": "wait", "ms": 2500}
        vec.send([slow] + [WAIT] * (N_ENVS - 1))
        t = time.monotonic()
        obs, rew, term, trunc, infos = vec.recv(min_ready=N_ENVS - 1)
        fast_s = time.monotonic() - t
        assert 0 not in infos["env_index"].tolist(), "the slow env came back with the fast ones"
        assert sorted(infos["env_index"].tolist()) == list(range(1, N_ENVS))
        assert obs.shape[0] == N_ENVS - 1 and fast_s < 2.0
        # The fast envs step again while the slow one is still running.
        vec.send([WAIT] * (N_ENVS - 1), env_ids=range(1, N_ENVS))
        with pytest.raises(shinken.ShinkenError):
            vec.send([WAIT], env_ids=[0])  # env 0 is still in flight
        got = set()
        while 0 not in got:
            *_, infos = vec.recv(min_ready=1, timeout=30)
            got |= set(infos["env_index"].tolist())
        while len(vec._inflight):
            vec.recv(min_ready=len(vec._inflight), timeout=30)
        assert infos["step"][infos["env_index"].tolist().index(0)] == 1
