"""Named checkpoints through the client against a real envserver: take one
mid-episode, fork and reset from it, describe, delete; unknown ids are
NotFound (docs/api.md, "Checkpoints")."""

import pytest

import shinken
from shinken import wire


def test_checkpoint_fork_reset_delete(server, tasks, task_id):
    c = shinken.Client(server.url, server.token)
    spec = c.spec()
    [p] = c.reset([wire.reset_env(task_id)])
    assert p.error is None, p.error
    parent = p.env_id
    kids = []
    try:
        if not spec["pool"].get("checkpoint"):
            with pytest.raises(shinken.Unsupported):
                c.checkpoint(parent)
            return
        assert spec["limits"]["max_checkpoints"] > 0 and spec["limits"]["checkpoint_ttl_s"] > 0
        # The reference solution writes the file; then a checkpoint.
        sol = tasks[task_id]["solution"]
        for acts in sol[:-1]:
            [s] = c.step([wire.step_env(parent, acts)])
            assert s.error is None, s.error
        ck = c.checkpoint(parent)
        assert ck["env_id"] == parent and ck["episode_id"] == p.episode_id
        assert ck["step"] == len(sol) - 1 and ck["task"] == task_id and ck["bytes"] > 0
        assert c.checkpoint_info(ck["checkpoint_id"])["checkpoint_id"] == ck["checkpoint_id"]

        # The parent then undoes its work; the checkpoint keeps it.
        c.step([wire.step_env(parent, [{"verb": "type_text", "text": "rm -f ~/hello.txt"},
                                       {"verb": "key", "keys": "Return"}])])
        forked = c.fork_checkpoint(ck["checkpoint_id"], 2)
        reset = c.reset_from(ck["checkpoint_id"])
        kids = [s.env_id for s in forked + reset]
        for s in forked + reset:
            assert s.error is None, s.error
            assert s.info["checkpoint"] == ck["checkpoint_id"] and s.info["fork_of"] == parent
            assert s.info["step"] == ck["step"]
        assert len({s.frame.hash for s in forked + reset}) == 1, "starts from one checkpoint differ"
        done = c.step([wire.step_env(k, sol[-1]) for k in kids])
        assert [s.reward for s in done] == [1.0] * 3, "a child lost the checkpoint's file"
        traj = c.episode(done[0].episode_id)
        assert traj["checkpoint"] == ck["checkpoint_id"] and traj["fork_of"] == ck["episode_id"]

        assert c.delete_checkpoint(ck["checkpoint_id"]) is True
        assert c.delete_checkpoint(ck["checkpoint_id"]) is False  # idempotent
        with pytest.raises(shinken.NotFound):
            c.checkpoint_info(ck["checkpoint_id"])
        [gone] = c.reset_from(ck["checkpoint_id"])
        assert isinstance(gone.error, shinken.NotFound)
        with pytest.raises(shinken.NotFound):
            c.fork_checkpoint(ck["checkpoint_id"], 1)
        with pytest.raises(shinken.BadRequest):
            c.checkpoint_info("../v1/spec")
    finally:
        c.close_envs([parent, *kids])
        c.close()


def test_checkpoint_async(server, task_id):
    import asyncio

    async def run():
        async with shinken.AsyncClient(server.url, server.token) as c:
            if not (await c.spec())["pool"].get("checkpoint"):
                pytest.skip("the server's provider cannot snapshot")
            [p] = await c.reset([wire.reset_env(task_id)])
            try:
                ck = await c.checkpoint(p.env_id)
                [k] = await c.fork_checkpoint(ck["checkpoint_id"], 1)
                assert k.error is None and k.info["checkpoint"] == ck["checkpoint_id"]
                assert await c.delete_checkpoint(ck["checkpoint_id"])
                await c.close_envs([k.env_id])
            finally:
                await c.close_envs([p.env_id])

    asyncio.run(run())
