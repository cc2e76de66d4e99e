"""The env through the real Gymnasium (skipped where gymnasium is not
importable): its own check_env, make_vec in sync and vector_entry_point
modes under its wrappers with autoreset, and model text passing through."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import shinken  # noqa: E402  (registers shinken/Desktop-v0)
from gymnasium.utils.env_checker import check_env  # noqa: E402

WAIT = {"verb": "wait", "ms": 20}
SMALL = {"format": "png", "max_long_edge": 320}


def kw(server, task_id, **extra):
    return dict(url=server.url, token=server.token, task=task_id, observe=SMALL, **extra)


def test_registered_nondeterministic_with_a_vector_entry_point():
    spec = gym.spec("shinken/Desktop-v0")
    assert spec.nondeterministic is True
    assert spec.vector_entry_point == "shinken.vector:VectorEnv"


def test_check_env_passes(server, task_id):
    env = gym.make("shinken/Desktop-v0", **kw(server, task_id))
    try:
        assert isinstance(env.unwrapped, shinken.Env) and isinstance(env.unwrapped, gym.Env)
        assert env.observation_space == gym.spaces.Box(0, 255, (200, 320, 3), np.uint8)
        check_env(env)  # as gymnasium.make built it, through its wrappers
        check_env(env.unwrapped)
    finally:
        env.close()


def test_fixed_box_before_any_reset(server, task_id):
    env = shinken.Env(server.url, task_id, server.token, observe={"max_long_edge": 640})
    try:
        space = env.observation_space
        assert isinstance(space, gym.spaces.Box) and space.shape == (400, 640, 3)
        obs, info = env.reset()
        assert obs in space and env.observation_space is space
        assert info["instruction"] == env.instruction and env.instruction
    finally:
        env.close()


def test_turn_dict_carries_text_dialect_tokens_through_wrappers(server, task_id):
    env = gym.make("shinken/Desktop-v0", **kw(server, task_id))
    try:
        env.reset()
        # Pixel-dialect text is read in the downscaled frame's pixels (320x200).
        act = {"text": "pyautogui.click(160, 100)", "dialect": "pyautogui",
               "tokens": {"prompt_ids": [1, 2], "response_ids": [3]}}
        assert act in env.action_space
        _, _, _, _, info = env.step(act)
        assert info.get("error") is None, info.get("error")
        traj = env.unwrapped.trajectory()
        assert traj.steps[0].text == act["text"] and traj.steps[0].dialect == "pyautogui"
        assert traj.steps[0].prompt_ids == [1, 2] and traj.steps[0].response_ids == [3]
    finally:
        env.close()


def test_text_action_space_admits_model_output(server, task_id):
    env = shinken.Env(server.url, task_id, server.token, observe=SMALL, action="text")
    try:
        assert isinstance(env.action_space, gym.spaces.Text)
        assert "pyautogui.write('ünïcode ✓')" in env.action_space
        env.reset()
        *_, info = env.step("pyautogui.press('enter')")
        assert info.get("error") is None
    finally:
        env.close()


def _run_autoreset(envs, n):
    obs, infos = envs.reset(seed=1)
    assert obs.shape[0] == n
    # env 0 ends its episode; the next step autoresets it.
    acts = tuple([{"verb": "fail"}] + [WAIT] * (n - 1))
    obs, rew, term, trunc, infos = envs.step(acts)
    assert term[0] and not term[1:].any()
    assert "episode" in infos and infos["_episode"][0], "RecordEpisodeStatistics saw no episode end"
    obs, rew, term, trunc, infos = envs.step(tuple([WAIT] * n))
    assert not term.any() and rew[0] == 0.0
    obs, rew, term, trunc, infos = envs.step(tuple([WAIT] * n))
    return obs


def test_make_vec_sync_under_wrappers(server, task_id):
    pytest.importorskip("cv2", reason="Gymnasium's ResizeObservation needs opencv (Debian python3-opencv)")
    wrappers = [lambda e: gym.wrappers.ResizeObservation(e, (64, 96)),
                lambda e: gym.wrappers.FrameStackObservation(e, 2)]
    envs = gym.make_vec("shinken/Desktop-v0", num_envs=2, vectorization_mode="sync", wrappers=wrappers,
                        **kw(server, task_id))
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    try:
        obs = _run_autoreset(envs, 2)
        assert obs.shape == (2, 2, 64, 96, 3) and obs in envs.observation_space
    finally:
        envs.close()


def test_make_vec_vector_entry_point_under_wrappers(server, task_id):
    pytest.importorskip("cv2", reason="Gymnasium's ResizeObservation needs opencv (Debian python3-opencv)")
    envs = gym.make_vec("shinken/Desktop-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        **kw(server, task_id))
    assert isinstance(envs, shinken.VectorEnv) and isinstance(envs, gym.vector.VectorEnv)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert envs.observation_space.shape == (2, 200, 320, 3)
    assert envs.single_observation_space.shape == (200, 320, 3)
    envs = gym.wrappers.vector.ResizeObservation(envs, (64, 96))
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    try:
        obs = _run_autoreset(envs, 2)
        assert obs.shape == (2, 64, 96, 3)
    finally:
        envs.close()


def test_reset_mask_keeps_live_episodes(server, task_id):
    with shinken.VectorEnv(server.url, task_id, 2, token=server.token, observe=SMALL,
                           autoreset="disabled") as vec:
        assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
        vec.reset()
        vec.step([{"verb": "fail"}, WAIT])
        live = vec.episode_ids[1]
        obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
        assert vec.episode_ids[1] == live, "a live episode was thrown away"
        assert infos["_step"].tolist() == [True, False] and infos["step"][0] == 0
        _, _, _, _, infos = vec.step([WAIT, WAIT])
        assert infos["step"].tolist() == [1, 2]


def test_make_vec_async(server, task_id):
    """Each env in its own worker process (the loop thread is restarted in a
    forked child)."""
    pytest.importorskip("cloudpickle", reason="Gymnasium's AsyncVectorEnv needs cloudpickle")
    envs = gym.make_vec("shinken/Desktop-v0", num_envs=2, vectorization_mode="async", **kw(server, task_id))
    try:
        obs, infos = envs.reset(seed=3)
        assert obs.shape == (2, 200, 320, 3) and infos["_instruction"].all()
        obs, rew, term, trunc, infos = envs.step((WAIT, WAIT))
        assert infos["step"].tolist() == [1, 1]
    finally:
        envs.close()
