"""Task instances through the client, against a real envserver: a family
draws its instance from (split, seed), the reset's info names it, and its
instruction — never the spec's template — is what the env, the vector env,
a fork and the agent loop hand to the model. No gymnasium needed."""

import asyncio

import numpy as np
import pytest

import shinken
from shinken.agent import AgentLoop, Exit
from model_double import ScriptedModel, ToyTemplate

FAMILY = "xterm-count-lines"  # a family with parameters and a test split
SMALL = {"format": "jpeg", "max_long_edge": 160}


@pytest.fixture(scope="module")
def family(server):
    """The family's /v1/spec entry (its instruction is the template)."""
    spec = shinken.Client(server.url, server.token).spec()
    t = next((t for t in spec["tasks"] if t["id"] == FAMILY), None)
    if t is None:
        pytest.skip(f"the server does not serve {FAMILY} (see its log: an out-of-date check record?)")
    assert "{{" in t["instruction"], "the spec should list the family's template"
    return t


def env_of(server, task=FAMILY, **kw):
    return shinken.Env(server.url, task, server.token, observe=SMALL, **kw)


def test_instance_seed_picks_the_instruction(server, family):
    env = env_of(server)
    try:
        got = {}
        for seed in (0, 1, 2):
            _, info = env.reset(seed=seed)
            assert info["seed"] == seed and info["split"] == "train" and info["task"] == FAMILY
            assert info["version"] == family["version"]
            assert "{{" not in info["instruction"] and info["instruction"] != family["instruction"]
            assert env.instruction == info["instruction"] and env.seed == seed
            got[seed] = info["instruction"]
        assert len(set(got.values())) > 1, f"seeds 0-2 drew one instruction: {got}"
        # The same seed is the same instance.
        _, info = env.reset(seed=0)
        assert info["instruction"] == got[0]
        # Every step's info carries the episode's instruction.
        *_, info = env.step({"verb": "wait", "ms": 10})
        assert info["instruction"] == got[0]
        # The finished episode's trajectory holds the instance, its drawn
        # parameters included, for the trainer.
        *_, info = env.step({"verb": "done"})
        traj = shinken.episodes(server.url, info["episode_id"], token=server.token)
        assert traj.seed == 0 and traj.instance["instruction"] == got[0] and traj.instance["split"] == "train"
        assert traj.instance["params"] and len(traj.instance["hash"]) == 24
        # Without a seed the server draws one and says which; it names that instance again.
        _, drawn = env.reset()
        assert isinstance(drawn["seed"], int) and drawn["split"] == "train"
        _, again = env.reset(seed=drawn["seed"])
        assert again["instruction"] == drawn["instruction"]
    finally:
        env.close()


def test_instance_test_split(server, family):
    env = env_of(server, split="test")
    try:
        _, info = env.reset(seed=0)
        assert info["split"] == "test" and info["seed"] == 0 and "{{" not in info["instruction"]
        test0 = info["instruction"]
        _, info = env.reset(seed=0)  # the env's split holds
        assert info["split"] == "test" and info["instruction"] == test0
        _, info = env.reset(seed=0, options={"split": "train"})
        assert info["split"] == "train" and env.split == "train"
    finally:
        env.close()
    with shinken.VectorEnv(server.url, FAMILY, 2, token=server.token, observe=SMALL, split="test") as vec:
        _, infos = vec.reset(seed=3)
        assert infos["split"].tolist() == ["test", "test"] and infos["seed"].tolist() == [3, 4]
        assert list(vec.instructions) == infos["instruction"].tolist()
        _, infos = vec.reset(seed=[0, None], options={"split": ["train", "test"]})
        assert infos["split"].tolist() == ["train", "test"] and infos["seed"][0] == 0
        assert infos["_seed"].all() and vec.splits == ["train", "test"]
        # An autoreset draws from each env's split.
        vec.step([{"verb": "fail"}, {"verb": "fail"}])
        *_, infos = vec.step([{"verb": "wait", "ms": 10}] * 2)
        assert infos["autoreset"].all() and infos["split"].tolist() == ["train", "test"]
        assert infos["instruction"].tolist() == list(vec.instructions)


def test_instance_unknown_split_raises_the_typed_error(server, family, task_id):
    env = env_of(server)
    try:
        with pytest.raises(shinken.BadRequest) as e:
            env.reset(seed=0, options={"split": "validation"})
        assert e.value.code == "bad_request" and "split" in e.value.message
        with pytest.raises(shinken.BadRequest):
            env.reset(options={"split": 7})  # not a string: refused before sending
        _, info = env.reset(seed=0)  # a refused split is not kept
        assert info["split"] == "train"
    finally:
        env.close()
    # A family of one instance has no test split.
    one = env_of(server, task_id, split="test")
    try:
        with pytest.raises(shinken.BadRequest):
            one.reset()
    finally:
        one.close()

    async def go():
        async with shinken.AsyncEnv(shinken.AsyncClient(server.url, server.token), FAMILY, observe=SMALL,
                                    split="validation", own=True) as a:
            await a.reset(seed=0)

    with pytest.raises(shinken.BadRequest):
        asyncio.run(go())
    with shinken.VectorEnv(server.url, FAMILY, 2, token=server.token, observe=SMALL) as vec:
        with pytest.raises(shinken.BatchError) as b:
            vec.reset(seed=0, options={"split": "validation"})
        assert all(isinstance(x, shinken.BadRequest) for x in b.value.errors.values())
        assert vec.splits == [None, None]  # the refused split is not kept for autoresets


def test_instance_fork_children_carry_it(server, family):
    env = env_of(server, split="test")
    try:
        _, info = env.reset(seed=1)
        if not env.client.spec().get("pool", {}).get("fork"):
            pytest.skip("the server cannot fork")
        children, _, infos = env.fork(2)
        try:
            assert infos["instruction"].tolist() == [info["instruction"]] * 2
            assert infos["seed"].tolist() == [1, 1] and infos["split"].tolist() == ["test", "test"]
            assert children.instructions == [info["instruction"]] * 2
            assert children.splits == ["test", "test"]  # their autoresets draw test instances too
        finally:
            children.close()
    finally:
        env.close()


def _prompt_text(out):
    return ToyTemplate().processor.tokenizer.decode(out.prompt_ids, True)


def test_instance_agent_loop_prompts_with_it(server, family):
    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            env = shinken.AsyncEnv(c, FAMILY, observe=SMALL, own=False)
            try:
                _, info = await env.reset(seed=1, options={"split": "test"})
            finally:
                await env.aclose()
            model = ScriptedModel(["DONE"])
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui")
            out = await loop.run(c, FAMILY, seed=1, split="test")
            # Opening messages without a user turn: the loop adds the instance's instruction.
            sys_only = await loop.run(c, FAMILY, seed=1, split="test",
                                      messages=[{"role": "system", "content": "You control a desktop."}])
            group = await loop.run_group(c, FAMILY, 2, seed=1, split="test")
            with pytest.raises(shinken.ShinkenError, match="version"):
                await loop.run(c, FAMILY, seed=1, split="test", messages=[{"role": "user", "content": "x"}],
                               version=family["version"] + 1)
            return info, out, sys_only, group

    info, out, sys_only, group = asyncio.run(go())
    want = info["instruction"]
    for o in [out, sys_only, *group]:
        assert o.extra_fields["exit_reason"] == Exit.TASK_COMPLETE and not o.drop, o.extra_fields
        assert want in _prompt_text(o) and family["instruction"] not in _prompt_text(o)
        assert o.extra_fields["seed"] == 1 and o.extra_fields["split"] == "test"
    assert _prompt_text(sys_only).startswith("system\nYou control a desktop.")
    assert np.isclose(out.reward_score, 0.0)  # done without the work: scored, not dropped
