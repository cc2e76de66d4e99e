"""The client against a real envserver (see conftest.py): the Gymnasium
5-tuple, VectorEnv, fork, frame dedup, typed errors and the task suite's
reference solutions reaching reward 1."""

import concurrent.futures as cf

import numpy as np
import pytest

import shinken
from shinken import wire

WAIT = {"verb": "wait", "ms": 20}


@pytest.fixture
def env(server, task_id):
    e = shinken.Env(server.url, task=task_id, token=server.token)
    yield e
    e.close()


@pytest.fixture(scope="module")
def shared_env(server, task_id):
    """One env for the tests that only need some env: every reset replaces a
    sandbox, so fewer leases keep the suite inside the pool on a busy host."""
    e = shinken.Env(server.url, task=task_id, token=server.token)
    yield e
    e.close()


def is_hash(h):
    return isinstance(h, str) and len(h) == 32 and all(c in "0123456789abcdef" for c in h)


def test_spec(server):
    spec = shinken.Client(server.url, server.token).spec()
    assert spec["protocol"] == shinken.PROTOCOL
    assert "done" in spec["verbs"] and "pyautogui" in spec["dialects"]


def test_reset_step_close(server, env, task_id):
    obs, info = env.reset(seed=3)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.uint8
    assert obs.ndim == 3 and obs.shape[2] == 3 and obs.shape[0] > 0 and obs.shape[1] > 0
    assert obs.any(), "an all-black frame: the desktop is not being captured"
    assert is_hash(info["frame"]) and info["episode_id"] and info["env_id"] == env.env_id
    assert info["step"] == 0 and info["task"] == task_id
    assert env.observation_space.contains(obs)

    out = env.step(WAIT)
    assert len(out) == 5
    obs2, reward, terminated, truncated, info2 = out
    assert isinstance(obs2, np.ndarray) and obs2.shape == obs.shape
    assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
    assert isinstance(info2, dict) and info2["step"] == 1
    assert (reward, terminated, truncated) == (0.0, False, False)
    np.testing.assert_array_equal(env.render(), obs2)

    env.close()
    env.close()  # idempotent
    with pytest.raises(shinken.ShinkenError):
        env.step(WAIT)  # the env went back to the server


def test_closed_env_is_not_found(server, task_id):
    c = shinken.Client(server.url, server.token)
    [s] = c.reset([wire.reset_env(task_id)])
    assert s.error is None
    assert c.close_envs([s.env_id]) == [s.env_id]
    [s2] = c.step([wire.step_env(s.env_id, WAIT)])
    assert isinstance(s2.error, shinken.NotFound) and s2.error.env_id == s.env_id


def test_bytes_mode_and_raw_format(server, task_id):
    with shinken.Env(server.url, task=task_id, token=server.token, observe="raw", obs_mode="bytes") as e:
        obs, info = e.reset()
        assert isinstance(obs, bytes) and info["frame_format"] == "raw"
        d = info["display"]["delivered"]
        assert len(obs) == d["w"] * d["h"] * 3
        arr = shinken.decode("raw", obs, d["w"], d["h"])
        assert arr.shape == (d["h"], d["w"], 3)
    with shinken.Env(server.url, task=task_id, token=server.token,
                     observe={"format": "png", "max_long_edge": 640}) as e:
        obs, info = e.reset()
        assert max(obs.shape[:2]) == 640


def test_dedup_second_identical_frame_costs_no_frame_bytes(server, shared_env):
    env = shared_env
    _, info0 = env.reset()
    stats = env.client.stats
    reset_bytes = stats.last_reply_bytes
    _, _, _, _, info1 = env.step(WAIT)
    _, _, _, _, info2 = env.step(WAIT)
    assert info2["frame"] == info1["frame"], "the screen changed under a wait: cannot test dedup"
    assert info2["frame_cached"], "the server resent a frame the client listed in have"
    assert stats.last_reply_bytes < 1024, f"got a {stats.last_reply_bytes}-byte reply; want < 1 KiB"
    # The same step from a client with an empty cache costs the frame bytes:
    # the saving comes from `have`, not from the server never sending frames.
    fresh = shinken.Client(env.client.url, env.client.token)
    [s] = fresh.step([wire.step_env(env.env_id, WAIT)])
    assert s.error is None and not s.cached and s.obs["frame"] == info2["frame"]
    assert fresh.stats.last_reply_bytes > len(s.frame.data) > stats.last_reply_bytes
    assert reset_bytes > len(s.frame.data)
    fresh.close()


def test_vector_env_of_4(server, task_id):
    with shinken.VectorEnv(server.url, task_id, 4, token=server.token) as vec:
        obs, infos = vec.reset(seed=1)
        assert isinstance(obs, np.ndarray) and obs.ndim == 4 and obs.shape[0] == 4 and obs.shape[3] == 3
        assert infos["_env_id"].all() and len(set(vec.env_ids)) == 4 and len(set(vec.episode_ids)) == 4
        assert obs in vec.observation_space
        requests = vec.client.stats.requests
        obs, rew, term, trunc, infos = vec.step([WAIT] * 4)
        assert vec.client.stats.requests == requests + 1, "a batched step must be one request"
        assert obs.shape[0] == 4
        assert rew.dtype == np.float64 and rew.shape == (4,)
        assert term.dtype == bool and trunc.dtype == bool and not term.any() and not trunc.any()
        assert infos["step"].tolist() == [1, 1, 1, 1]
        # Each distinct frame crossed the wire at most once, however many envs show it.
        misses = vec.client.cache.misses
        obs, *_, infos = vec.step([WAIT] * 4)
        assert vec.client.cache.misses - misses <= len(set(infos["frame"]))


def test_vector_env_autoreset_next_step(server, task_id):
    with shinken.VectorEnv(server.url, task_id, 2, token=server.token) as vec:
        vec.reset()
        first_ep = list(vec.episode_ids)
        _, _, term, _, infos = vec.step([{"verb": "fail"}, WAIT])
        assert term.tolist() == [True, False] and infos["exit_reason"][0] and infos["_exit_reason"].tolist() == [True, False]
        _, rew, term, trunc, infos = vec.step([WAIT, WAIT])
        assert infos["_autoreset"].tolist() == [True, False]
        assert (rew[0], term[0], trunc[0]) == (0.0, False, False)
        assert infos["step"].tolist() == [0, 2]
        assert vec.episode_ids[0] != first_ep[0] and vec.episode_ids[1] == first_ep[1]


def test_vector_env_partial_failure(server, task_id):
    """One env's failure fills its slot; the other env still steps."""
    with shinken.VectorEnv(server.url, task_id, 2, token=server.token, autoreset="disabled", on_error="info") as vec:
        vec.reset()
        vec.step([{"verb": "fail"}, WAIT])
        obs, rew, term, trunc, infos = vec.step([WAIT, WAIT])
        assert isinstance(infos["error"][0], shinken.EpisodeOver) and trunc[0] and not infos["_error"][1]
        assert infos["step"][1] == 2 and obs.shape[0] == 2
        vec.on_error = "raise"
        with pytest.raises(shinken.BatchError) as ei:
            vec.step([WAIT, WAIT])
        assert list(ei.value.errors) == [0] and isinstance(ei.value.errors[0], shinken.EpisodeOver)
        obs, rew, term, trunc, infos = ei.value.result
        assert trunc[0] and infos["step"][1] == 3  # env 1 still stepped


def test_fork(server, tasks, task_id):
    spec = shinken.Client(server.url, server.token).spec()
    with shinken.VectorEnv(server.url, task_id, 1, token=server.token) as vec:
        _, infos = vec.reset()
        first = tasks[task_id]["solution"][0]
        vec.step([first])
        if not spec["pool"]["fork"]:
            with pytest.raises(shinken.Unsupported):
                vec.fork(0, 2)
            return
        before = vec.client.cache.misses
        kids, obs, kinfos = vec.fork(0, 2)
        with kids:
            assert kids.num_envs == 2 and len(set(kids.env_ids) | set(vec.env_ids)) == 3
            assert all(f == vec.env_ids[0] for f in kinfos["fork_of"])  # the parent env
            assert len(set(kinfos["frame"])) == 1, "replicas of one checkpoint differ"
            assert vec.client.cache.misses - before <= 1, "identical replica frames crossed the wire twice"
            assert obs.shape[0] == 2
            _, _, _, _, sinfos = kids.step([WAIT] * 2)
            assert sinfos["step"].tolist() == (kinfos["step"] + 1).tolist()
        # The parent is untouched by its children.
        _, _, _, _, pinfos = vec.step([WAIT])
        assert pinfos["step"][0] == 2


def _run_solution(server, task, steps):
    with shinken.Env(server.url, task=task["id"], token=server.token) as e:
        e.reset()
        last = None
        for acts in steps:
            last = e.step(acts)
            if last[2] or last[3]:
                break
        traj = e.trajectory()
        return last, traj


def test_reference_solutions_reach_reward_1(server, tasks):
    # Tasks solved through element refs replay only while the tree is observed
    # every step (ids are minted as walks meet elements): tests/test_a11y.py and
    # the Go task suite play those.
    plain = {tid: t for tid, t in tasks.items() if not t.get("a11y")}
    with cf.ThreadPoolExecutor(4) as ex:
        futs = {tid: ex.submit(_run_solution, server, t, t["solution"]) for tid, t in plain.items()}
        failures = []
        for tid, f in futs.items():
            (obs, reward, terminated, truncated, info), traj = f.result()
            if reward != 1.0 or not terminated:
                failures.append(f"{tid}: got reward {reward} terminated {terminated} "
                                f"exit {info.get('exit_reason')} error {info.get('error')}; want 1.0")
                continue
            assert traj.exit_reason == "task_complete" and traj.reward == 1.0
            assert len(traj.steps) == len(tasks[tid]["solution"])
    assert not failures, "\n".join(failures)


def test_wrong_solution_gets_reward_0(server, tasks):
    t = next((t for _, t in sorted(tasks.items()) if t.get("wrong")), None)
    if t is None:
        pytest.skip("no task has a wrong solution")
    (_, reward, terminated, _, _), _ = _run_solution(server, t, t["wrong"][0])
    assert (reward, terminated) == (0.0, True)


def test_multi_turn_model_text_and_tokens(server, task_id):
    """A verl-style loop: model text in, token ids recorded, trajectory out."""
    with shinken.Env(server.url, task=task_id, token=server.token) as e:
        e.reset()
        prompt = [101, 7, 8]
        turns = [("pyautogui.click(200, 200)", [11, 12]), ("pyautogui.press('enter')", [13]),
                 ("DONE", [14, 15])]
        for k, (text, resp) in enumerate(turns):
            *_, terminated, truncated, info = e.step(
                text, dialect="pyautogui",
                tokens={"prompt_ids": prompt, "response_ids": resp, "response_logprobs": [-0.5] * len(resp)})
            assert info.get("error") is None, f"turn {k}: {info.get('error')}"
            prompt = prompt + resp + [900 + k]  # the env's observation tokens
        assert terminated
        traj = shinken.episodes(server.url, e.episode_id, token=server.token)
    assert [s.text for s in traj.steps] == [t for t, _ in turns]
    assert traj.steps[0].prompt_ids == [101, 7, 8] and traj.steps[1].response_ids == [13]
    row = shinken.to_verl_rows([traj])[0]
    assert row["prompt_ids"] == [101, 7, 8]
    assert row["response_ids"] == [11, 12, 900, 13, 901, 14, 15]
    assert row["response_mask"] == [1, 1, 0, 1, 0, 1, 1]
    assert row["extra_fields"]["token_drift_turns"] == []
    assert row["extra_fields"]["traj_exit_reason"] == traj.exit_reason


# -- every error code the client can provoke from a real server ---------------

def test_unauthorized(server):
    if not server.token:
        pytest.skip("server runs without a token")
    with pytest.raises(shinken.Unauthorized) as ei:
        shinken.Client(server.url, "wrong-" + server.token).reset([wire.reset_env("x")])
    assert ei.value.status == 401


def test_not_found(server):
    with pytest.raises(shinken.NotFound):
        shinken.Env(server.url, task="no-such-task", token=server.token).reset()
    with pytest.raises(shinken.NotFound):
        shinken.episodes(server.url, "ep-does-not-exist", token=server.token)


def test_bad_request(server):
    t = shinken.Client(server.url, server.token).transport
    with pytest.raises(shinken.BadRequest):
        t.call("POST", "/v1/step", raw_body=b"\xc1 not msgpack")
    with pytest.raises(shinken.BadRequest):
        t.call("POST", "/v1/reset", {"envs": [{"task": "x", "surprise": 1}]})


def test_payload_and_batch_too_large(server):
    c = shinken.Client(server.url, server.token)
    lim = c.spec()["limits"]
    with pytest.raises(shinken.PayloadTooLarge):
        c.transport.call("POST", "/v1/close", {"env_ids": ["x" * (lim["max_body_bytes"] + 1)]})
    steps = [wire.step_env(f"env-{i}", WAIT) for i in range(lim["max_batch"] + 1)]
    with pytest.raises(shinken.BatchTooLarge):
        c.transport.call("POST", "/v1/step", wire.step_request(steps))
    # The client splits a batch past max_batch into requests the server takes.
    before = c.stats.requests
    slots = c.step(steps)
    assert c.stats.requests - before == 2
    assert [s.env_id for s in slots] == [f"env-{i}" for i in range(lim["max_batch"] + 1)]
    assert all(isinstance(s.error, shinken.NotFound) for s in slots)
    c.close()


AGENT_ERRORS = [
    ({"verb": "teleport"}, {}, shinken.UnknownVerb),
    ("this is not a program (", {"dialect": "pyautogui"}, shinken.DialectError),
    ({"verb": "click"}, {}, shinken.InvalidAction),
    ({"verb": "click", "x": 99999, "y": 5}, {}, shinken.InvalidAction),
    ([{"verb": "done"}, WAIT], {}, shinken.InvalidAction),
]


def test_agent_errors_are_typed_in_info(shared_env):
    """An agent's bad action is the agent's turn: it counts and comes back
    typed in info["error"] (it is not raised, so the episode goes on)."""
    shared_env.reset()
    for k, (action, kw, cls) in enumerate(AGENT_ERRORS):
        _, _, terminated, _, info = shared_env.step(action, **kw)
        assert isinstance(info.get("error"), cls), f"{action!r}: got {info.get('error')!r}; want {cls.__name__}"
        assert info["step"] == k + 1 and not terminated


def test_episode_over(shared_env):
    shared_env.reset()
    *_, terminated, _, _ = shared_env.step({"verb": "fail"})
    assert terminated
    with pytest.raises(shinken.EpisodeOver):
        shared_env.step(WAIT)
    shared_env.reset()  # and a reset starts a new one on the same env
    assert shared_env.step(WAIT)[4]["step"] == 1


def test_downscaled_env_clicks_in_frame_pixels(server, task_id):
    """With a downscaled frame the client sends coords "frame": a click at a
    frame pixel lands on the screen pixel the frame's descriptor maps it to."""
    with shinken.Env(server.url, task=task_id, token=server.token,
                     observe={"format": "png", "max_long_edge": 640}) as e:
        _, info = e.reset()
        d = info["display"]
        sx, sy = d["source_rect"]["w"] / d["delivered"]["w"], d["source_rect"]["h"] / d["delivered"]["h"]
        _, _, _, _, info = e.step({"verb": "click", "target": (101, 77)})
        assert info.get("error") is None, info.get("error")
        assert info["coords"] == "frame" and info["results"][0]["status"] == "ok"
        assert info["pointer"] == (d["source_rect"]["x"] + int(101 * sx), d["source_rect"]["y"] + int(77 * sy))
        assert info["settle"]["timed_out"] is False
        _, _, _, _, info = e.step({"verb": "click", "target": (640, 10)})  # just off the frame
        assert info["error"].code == "invalid_action"
