"""Envs spread over several real envservers on loopback (shinken.multi)."""

import asyncio
import json

import pytest

import shinken
from shinken.agent import AgentLoop, Exit
from conftest import ROOT, start_server
from model_double import HELLO_SOLUTION, ScriptedModel, ToyTemplate

WAIT = {"verb": "wait", "ms": 10}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two servers with the same token: A (pool 2) and B (pool 2, max_batch 1)."""
    tmp = tmp_path_factory.mktemp("multi")
    cfg = json.loads((ROOT / "configs" / "envserver.json").read_text())
    cfg["max_batch"] = 1
    small = tmp / "max-batch-1.json"
    small.write_text(json.dumps(cfg))
    a = start_server(tmp, pool=2)
    try:
        b = start_server(tmp, pool=2, token=a.srv.token, config=small)
    except BaseException:
        a.cleanup()
        raise
    yield a.srv, b.srv
    b.cleanup()
    a.cleanup()


def test_placement_fills_evenly_and_is_sticky(two, task_id):
    a, b = two

    async def go():
        async with shinken.AsyncMultiClient([a.url, b.url], a.token) as m:
            slots = await m.reset([{"task": task_id}] * 4)
            assert all(s.error is None for s in slots), [s.error for s in slots]
            ids = [s.env_id for s in slots]
            assert m.load() == [2, 2]
            # Sticky: every env steps on the server that leased it; the other server does not know it.
            steps = await m.step([{"env_id": e, "action": WAIT} for e in ids])
            assert [s.env_id for s in steps] == ids and all(s.error is None and s.info["step"] == 1 for s in steps)
            for e in ids:
                home = m.clients[m.server_of(e)]
                other = m.clients[1 - m.server_of(e)]
                assert (await home.step([{"env_id": e, "action": WAIT}]))[0].error is None
                assert isinstance((await other.step([{"env_id": e, "action": WAIT}]))[0].error, shinken.NotFound)
            # B's max_batch is 1: its two envs went as two requests, A's as one.
            before = [c.stats.requests for c in m.clients]
            await m.step([{"env_id": e, "action": WAIT} for e in ids])
            sent = [c.stats.requests - n for c, n in zip(m.clients, before)]
            assert sent == [1, 2], sent
            # Restarting placed envs keeps them where they are.
            again = await m.reset([{"env_id": e, "task": task_id} for e in ids])
            assert [s.env_id for s in again] == ids and m.load() == [2, 2]
            traj = await m.episode(again[3].episode_id)  # routed to the episode's server
            assert traj["env_id"] == ids[3]
            assert sorted(await m.close_envs(ids)) == sorted(ids) and m.load() == [0, 0]

    run(go())


def test_fork_stays_on_the_parents_server(two, task_id):
    a, b = two

    async def go():
        async with shinken.AsyncMultiClient([a.url, b.url], a.token) as m:
            if not ((await m.spec()).get("pool") or {}).get("fork"):
                pytest.skip("the provider cannot fork")
            first = (await m.reset([{"task": task_id}]))[0]
            second = (await m.reset([{"task": task_id}]))[0]  # the emptier server: the other one
            assert m.server_of(first.env_id) != m.server_of(second.env_id)
            kids = await m.fork(second.env_id, 2)
            assert all(k.error is None for k in kids)
            assert {m.server_of(k.env_id) for k in kids} == {m.server_of(second.env_id)}
            assert m.load()[m.server_of(second.env_id)] == 3
            await m.close_envs([first.env_id, second.env_id] + [k.env_id for k in kids])

    run(go())


def test_vector_env_and_env_take_a_list_of_urls(two, task_id):
    a, b = two
    with shinken.VectorEnv([a.url, b.url], task_id, 4, token=a.token, obs_mode="bytes") as envs:
        obs, infos = envs.reset(seed=1)
        assert len(obs) == 4 and envs.client.aio.load() == [2, 2]
        obs, rew, term, trunc, infos = envs.step([WAIT] * 4)
        assert list(infos["step"]) == [1, 1, 1, 1]
    env = shinken.Env([a.url, b.url], task_id, a.token, obs_mode="bytes")
    try:
        env.reset()
        assert env.step(WAIT)[4]["step"] == 1
        assert env.trajectory().num_turns == 1
    finally:
        env.close()


def test_agent_group_on_many_servers(two, task_id):
    if task_id != "xterm-hello-file":
        pytest.skip("the scripted model solves xterm-hello-file")
    a, b = two
    model = ScriptedModel(HELLO_SOLUTION)

    async def go():
        async with shinken.AsyncMultiClient([a.url, b.url], a.token) as m:
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui")
            outs = await asyncio.gather(loop.run_group(m, task_id, 2), loop.run(m, task_id))
            return outs, m.load()

    (group, single), load = run(go())
    assert [o.extra_fields["exit_reason"] for o in group + [single]] == [Exit.TASK_COMPLETE] * 3
    assert [o.reward_score for o in group + [single]] == [1.0] * 3
    assert load == [0, 0]  # every env the loop leased was given back


def test_a_dead_server_fails_only_its_envs(tmp_path, two, task_id):
    a, _ = two
    c = start_server(tmp_path, pool=1, token=a.token)
    try:
        async def go():
            async with shinken.AsyncMultiClient([a.url, c.srv.url], a.token, revive_s=3600) as m:
                slots = await m.reset([{"task": task_id}] * 2)
                assert all(s.error is None for s in slots) and m.load() == [1, 1]
                on_c = next(s.env_id for s in slots if m.server_of(s.env_id) == 1)
                on_a = next(s.env_id for s in slots if m.server_of(s.env_id) == 0)
                c.stop()
                steps = await m.step([{"env_id": on_a, "action": WAIT}, {"env_id": on_c, "action": WAIT}])
                assert steps[0].error is None and steps[0].info["step"] == 1
                assert isinstance(steps[1].error, shinken.TransportError) and steps[1].error.env_id == on_c
                # New envs go to the live server only; the dead one is out of placement.
                fresh = await m.reset([{"task": task_id}])
                assert fresh[0].error is None and m.server_of(fresh[0].env_id) == 0
                # The agent loop on a dead server's env ends typed and flagged drop.
                env = shinken.AsyncEnv(m, task_id, obs_mode="lazy")
                env._lease.env_id, env.episode_id = on_c, slots[1].episode_id
                env._lease.loop = asyncio.get_running_loop()
                with pytest.raises(shinken.TransportError):
                    await env.step_slot(WAIT)
                await m.close_envs([on_a, fresh[0].env_id])
        run(go())
    finally:
        c.cleanup()
