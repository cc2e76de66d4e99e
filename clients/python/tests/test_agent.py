"""shinken.agent against a real envserver, with a token-level model double.

Each episode is checked field by field: the mask covers exactly the model's
tokens, logprobs line up with them, every image sits where its placeholder
run is (sized by the processor), the reward and exit reason are the env's,
and the server's own trajectory of the episode yields the same row.
"""

import asyncio
import json

import numpy as np
import pytest

import shinken
from shinken.agent import AgentLoop, Exit
from conftest import ROOT, start_server
from model_double import (HELLO_SOLUTION, IM_END, IMAGE_PAD, ScriptedModel, ToyTemplate, image_runs,
                          image_tokens)


def run(coro):
    return asyncio.run(coro)


async def _client(server):
    return shinken.AsyncClient(server.url, server.token)


def segments(mask):
    """(start, end, value) runs of a mask."""
    out = []
    for i, m in enumerate(mask):
        if out and out[-1][2] == m:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1, m])
    return out


def test_episode_output_field_by_field(server, task_id):
    if task_id != "xterm-hello-file":
        pytest.skip("the scripted model solves xterm-hello-file")
    model = ScriptedModel(HELLO_SOLUTION)
    template = ToyTemplate()

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            loop = AgentLoop(model.generate, template, dialect="pyautogui")
            out = await loop.run(c, task_id, seed=7)
            traj = await c.episode(out.extra_fields["episode_id"])
            return out, traj

    out, traj = run(go())
    assert not model.mismatches, model.mismatches
    x = out.extra_fields
    assert x["exit_reason"] == Exit.TASK_COMPLETE and x["drop"] is False, x
    assert out.reward_score == 1.0
    assert x["seed"] == 7 and x["split"] == "train"  # the instance the episode ran
    assert len(model.calls) == 3 and x["env_steps"] == 3
    assert out.num_turns == 1 + 3 + 2  # the prompt, 3 responses, 2 later observations

    # The mask is 1 on exactly the model's tokens, in order.
    responses = [c["ids"] for c in model.calls]
    runs = segments(out.response_mask)
    model_runs = [out.response_ids[a:b] for a, b, m in runs if m == 1]
    assert model_runs == responses, "mask-1 runs are not the model's responses"
    assert [m for _, _, m in runs] == [1, 0, 1, 0, 1]
    assert len(out.response_mask) == len(out.response_ids)
    # Logprobs: one per response token, the model's own on its tokens, 0 on env tokens.
    assert len(out.response_logprobs) == len(out.response_ids)
    lp_model = [out.response_logprobs[a:b] for a, b, m in runs if m == 1]
    assert lp_model == [c["logprobs"] for c in model.calls]
    assert all(out.response_logprobs[i] == 0.0 for i, m in enumerate(out.response_mask) if m == 0)
    # Each turn's prompt is exactly the sequence so far (token-faithful).
    full = out.prompt_ids + out.response_ids
    for c in model.calls:
        assert full[:len(c["prompt_ids"])] == c["prompt_ids"]
    assert full[len(model.calls[-1]["prompt_ids"]):] == responses[-1]
    # Images: the reset frame and the two later observations, aligned with the pad runs.
    images = out.multi_modal_data["images"]
    assert len(images) == 3
    assert image_runs(full) == [image_tokens(im) for im in images]
    assert image_runs(out.prompt_ids) == [image_tokens(images[0])]
    assert ToyTemplate().processor.tokenizer.decode(out.prompt_ids, True).count("create a file named hello.txt") == 1
    # Metrics in verl's AgentLoopMetrics fields; timings in extra_fields.
    assert set(out.metrics) == {"generate_sequences", "tool_calls", "num_preempted"}
    assert out.metrics["tool_calls"] > 0 and x["timings"]["server_s"] > 0
    # The server recorded each turn's ids as sent, and its row agrees with ours.
    t = shinken.Trajectory.from_wire(traj)
    assert [s.response_ids for s in t.steps] == responses
    assert [s.prompt_ids for s in t.steps] == [c["prompt_ids"] for c in model.calls]
    row = shinken.to_verl_row(t)
    assert row["prompt_ids"] == out.prompt_ids and row["response_ids"] == out.response_ids
    assert row["response_mask"] == out.response_mask and row["reward_score"] == out.reward_score
    assert row["extra_fields"]["token_drift_turns"] == [] and row["extra_fields"]["drop"] is False
    assert len(row["multi_modal_data"]["images"]) == len(images) == 3
    assert row["multi_modal_data"]["images"][0] == {"frame": t.init_frame}


def test_per_step_outputs_and_sliding_window(server, task_id):
    if task_id != "xterm-hello-file":
        pytest.skip("the scripted model solves xterm-hello-file")

    async def go(window):
        model = ScriptedModel(HELLO_SOLUTION)
        async with shinken.AsyncClient(server.url, server.token) as c:
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui", per_step=True, window=window)
            return model, await loop.run(c, task_id)

    for window in (None, 1):
        model, outs = run(go(window))
        assert not model.mismatches, model.mismatches
        assert isinstance(outs, list) and len(outs) == 3
        for k, o in enumerate(outs):
            n_img = k + 1 if window is None else 1
            assert len(o.multi_modal_data["images"]) == n_img
            assert image_runs(o.prompt_ids) == [image_tokens(im) for im in o.multi_modal_data["images"]]
            assert o.prompt_ids == model.calls[k]["prompt_ids"]
            assert o.response_ids == model.calls[k]["ids"] and o.response_mask == [1] * len(o.response_ids)
            assert o.response_logprobs == model.calls[k]["logprobs"]
            assert o.extra_fields["step_index"] == k and o.extra_fields["exit_reason"] == Exit.TASK_COMPLETE
            assert o.reward_score == 1.0  # return-to-go: the reward comes at the end
        if window == 1:
            text = ToyTemplate().processor.tokenizer.decode(outs[2].prompt_ids, True)
            assert text.count("(earlier screenshot omitted)") == 2


def test_window_needs_per_step():
    with pytest.raises(ValueError, match="per_step"):
        AgentLoop(None, ToyTemplate(), window=2)


def test_refused_action_is_fed_back_and_max_turns_is_scored(server, task_id):
    model = ScriptedModel(["pyautogui.frobnicate(1)", "pyautogui.click(200, 200)"])

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui", max_turns=2)
            return await loop.run(c, task_id)

    out = run(go())
    x = out.extra_fields
    # The loop's budget ended the episode; a fail step had the verifier score it.
    assert x["exit_reason"] == Exit.MAX_TURNS and x["drop"] is False
    assert x["env_exit_reason"] in ("task_complete", "agent_error"), x
    assert out.reward_score == 0.0 and x["agent_errors"] == 1
    text = ToyTemplate().processor.tokenizer.decode(out.response_ids, True)
    assert "Your last action was not run: dialect_error" in text
    assert out.num_turns == 1 + 2 + 1  # no observation after the last response
    assert len(out.multi_modal_data["images"]) == 2


def test_response_length_budget(server, task_id):
    model = ScriptedModel(["pyautogui.click(200, 200)"])

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui", max_response_len=50)
            return await loop.run(c, task_id)

    out = run(go())
    assert out.extra_fields["exit_reason"] == Exit.RESPONSE_LENGTH and not out.drop
    assert out.response_mask == [1] * len(model.calls[0]["ids"])  # the observation did not fit
    assert len(out.multi_modal_data["images"]) == 1


def test_aborted_generation_is_dropped(server, task_id):
    model = ScriptedModel(["pyautogui.click(200, 200)"], stop="aborted")

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            return await AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui").run(c, task_id)

    out = run(go())
    assert out.extra_fields["exit_reason"] == Exit.GENERATION_ABORTED and out.drop and out.reward_score is None


def test_group_forks_from_one_state(server, task_id):
    if task_id != "xterm-hello-file":
        pytest.skip("the scripted model solves xterm-hello-file")
    model = ScriptedModel(HELLO_SOLUTION)

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            fork = bool(((await c.spec()).get("pool") or {}).get("fork"))
            outs = await AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui").run_group(c, task_id, 2)
            return fork, outs

    fork, outs = run(go())
    assert len(outs) == 2
    for o in outs:
        assert o.extra_fields["exit_reason"] == Exit.TASK_COMPLETE and o.reward_score == 1.0
        assert o.extra_fields["group_start"] == ("fork" if fork else "reset")
    if fork:
        assert outs[0].extra_fields["fork_of"] and outs[0].extra_fields["episode_id"] != \
            outs[1].extra_fields["episode_id"]


def test_resized_frames_declare_their_coordinate_space(server, task_id):
    model = ScriptedModel(["pyautogui.click(100, 100)", "DONE"])

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c:
            loop = AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui", image_size=(640, 400))
            return await loop.run(c, task_id)

    try:
        out = run(go())
    except shinken.BadRequest as e:
        if "coords" in str(e):
            pytest.skip(f"this server predates step coordinate spaces: {e}")
        raise
    assert [im.size for im in out.multi_modal_data["images"]] == [(640, 400)] * 2
    assert not model.mismatches


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory):
    """A server whose only task has a verifier that crashes: scorer_error."""
    tmp = tmp_path_factory.mktemp("broken")
    tasks = tmp / "tasks"
    tasks.mkdir()
    t = json.loads((ROOT / "configs" / "tasks" / "xterm-hello-file.json").read_text())
    t["id"] = "xterm-broken-verifier"
    t["verifier"] = {"shell": "echo verifier crashed >&2; exit 3", "timeout_ms": 5000}
    (tasks / "xterm-broken-verifier.json").write_text(json.dumps(t))
    p = start_server(tmp, pool=1, tasks=tasks)
    yield p.srv
    p.cleanup()


def test_scorer_error_is_dropped_not_zero(broken_server):
    model = ScriptedModel(["DONE"])

    async def go():
        async with shinken.AsyncClient(broken_server.url, broken_server.token) as c:
            out = await AgentLoop(model.generate, ToyTemplate(), dialect="pyautogui").run(
                c, "xterm-broken-verifier")
            return out, shinken.Trajectory.from_wire(await c.episode(out.extra_fields["episode_id"]))

    out, traj = run(go())
    row = shinken.to_verl_row(traj)  # the server's record says the same: dropped, no score
    assert traj.exit_reason == "scorer_error" and row["extra_fields"]["drop"] is True
    assert row["reward_score"] is None and row["response_ids"] == out.response_ids
    x = out.extra_fields
    assert x["exit_reason"] == Exit.SCORER_ERROR and x["drop"] is True, x
    assert out.reward_score is None and x["error"]["code"] == "scorer_error", x  # not scored: no stand-in 0
    assert out.response_mask == [1] * len(model.calls[0]["ids"]) and out.response_ids[-1] == IM_END
    assert IMAGE_PAD in out.prompt_ids


def test_unscored_end_is_never_a_number(broken_server):
    """reward: null on the wire (a verifier that fails on the clean state
    too): Env.step raises the typed, picklable NotScored with the step's
    observation and flags; VectorEnv's reward is NaN with scored False."""
    import pickle

    env = shinken.Env(broken_server.url, task="xterm-broken-verifier", token=broken_server.token, obs_mode="bytes")
    try:
        env.reset()
        with pytest.raises(shinken.NotScored) as ei:
            env.step({"verb": "done"})
    finally:
        env.close()
    e = ei.value
    assert e.exit_reason == "scorer_error" and e.terminated and not e.truncated and e.obs
    assert isinstance(e.info.get("error"), shinken.ScorerError), e.info
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is shinken.NotScored and back.exit_reason == "scorer_error" and back.obs == e.obs

    venv = shinken.VectorEnv(broken_server.url, "xterm-broken-verifier", 1, token=broken_server.token, obs_mode="bytes")
    try:
        venv.reset()
        _, rew, term, _, infos = venv.step([{"verb": "done"}])
    finally:
        venv.close()
    assert term[0] and np.isnan(rew[0]), rew
    assert infos["scored"][0] is False or infos["scored"][0] == False  # noqa: E712 (a numpy bool)


def test_env_lost_mid_episode_is_dropped(server, task_id):
    """The env is closed under the loop (as an idle reaper or a restart would):
    the next step is not_found, the episode ends env_lost, flagged drop."""
    model = ScriptedModel(["pyautogui.click(200, 200)", "pyautogui.click(210, 200)"])

    async def go():
        async with shinken.AsyncClient(server.url, server.token) as c, \
                shinken.AsyncClient(server.url, server.token) as other:
            env = shinken.AsyncEnv(c, task_id, obs_mode="lazy")

            async def generate(prompt_ids, images):
                if model.turn_of(prompt_ids) == 1:
                    assert await other.close_envs([env.env_id]) == [env.env_id]
                return await model.generate(prompt_ids, images)

            try:
                return await AgentLoop(generate, ToyTemplate(), dialect="pyautogui").run(env)
            finally:
                await env.aclose()

    out = run(go())
    x = out.extra_fields
    assert x["exit_reason"] == Exit.ENV_LOST and x["drop"] is True and out.reward_score is None
    assert x["error"]["code"] == "not_found" and x["env_steps"] == 2
    # The turn that met the lost env is still in the sequence, masked as the model's.
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m == 1] == \
        model.calls[0]["ids"] + model.calls[1]["ids"]


def _children(pid):
    """Pids whose parent is pid (from /proc)."""
    import os
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def test_sandbox_death_mid_episode_is_dropped(tmp_path, task_id):
    """A server this test starts; its sandboxes (guestd, the children of the
    envserver process) are killed while the model thinks: the step meets a
    dead sandbox, the episode ends sandbox_died, flagged drop."""
    import os
    import signal
    p = start_server(tmp_path, pool=1)
    model = ScriptedModel(["pyautogui.click(200, 200)", "pyautogui.click(210, 200)"])
    try:
        async def go():
            async with shinken.AsyncClient(p.srv.url, p.srv.token) as c:
                async def generate(prompt_ids, images):
                    if model.turn_of(prompt_ids) == 1:
                        for pid in _children(p.proc.pid):  # the sandboxes of the server this test started
                            os.kill(pid, signal.SIGKILL)
                    return await model.generate(prompt_ids, images)
                return await AgentLoop(generate, ToyTemplate(), dialect="pyautogui").run(c, task_id)

        out = run(go())
    finally:
        p.cleanup()
    x = out.extra_fields
    assert x["exit_reason"] == Exit.SANDBOX_DIED and x["drop"] is True and out.reward_score is None, x
    assert x["error"]["code"] == "sandbox_died"
