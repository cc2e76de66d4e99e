"""Recovery and resources against real servers: a server restart, a dead
env, a client timeout, pickling every exception, sockets closed by close(),
leases released by the finalizer, and configuration from the environment."""

import gc
import os
import pickle
import secrets
import signal
import socket
import time
import warnings

import pytest

import shinken
from shinken import wire

from conftest import start_server

WAIT = {"verb": "wait", "ms": 20}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ALL_ERRORS = [cls("m", code=code, detail={"k": 1}, status=cls.http_status, env_id="env-1")
              for code, cls in sorted(shinken.CODES.items())] + [
    shinken.TransportError("t", sent=True, timed_out=True),
    shinken.StepTimeout("s", ran=True, record={"index": 3}, episode_id="ep-1", step_index=3),
    shinken.ProtocolError("p"),
    shinken.ShinkenError("x", code="from_the_future"),
]


@pytest.mark.parametrize("err", ALL_ERRORS + [shinken.BatchError({0: ALL_ERRORS[0]}, ("obs",))],
                         ids=lambda e: type(e).__name__)
def test_every_exception_pickles(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert back.__dict__.keys() == err.__dict__.keys()
    for k, v in err.__dict__.items():
        if not isinstance(v, dict) or k != "errors":
            assert getattr(back, k) == v, k
    if isinstance(err, shinken.BatchError):
        assert isinstance(back.errors[0], type(ALL_ERRORS[0])) and back.result == ("obs",)


def test_restarted_server_gets_a_fresh_env(tmp_path, task_id):
    port = _free_port()
    p = start_server(tmp_path, listen=f"127.0.0.1:{port}", pool=1)
    try:
        env = shinken.Env(p.srv.url, task_id, p.srv.token)
        env.reset()
        old = env.env_id
        env.step(WAIT)
        p.stop()
        with pytest.raises(shinken.TransportError):
            env.step(WAIT)  # the server is gone: a clear, fast failure
        p.cleanup()
        p = start_server(tmp_path, listen=f"127.0.0.1:{port}", pool=1, token=p.srv.token)
        obs, info = env.reset()  # the old env id is unknown to the new server
        assert env.env_id != old and info["step"] == 0
        assert env.step(WAIT)[4]["step"] == 1
        env.close()
    finally:
        p.cleanup()


def test_dead_env_is_replaced_on_reset(server, task_id):
    env = shinken.Env(server.url, task_id, server.token)
    try:
        env.reset()
        old = env.env_id
        other = shinken.Client(server.url, server.token)
        assert other.close_envs([old]) == [old]  # the env is gone under this Env
        other.close()
        with pytest.raises(shinken.NotFound):
            env.step(WAIT)
        env.reset()
        assert env.env_id != old and env.step(WAIT)[4]["step"] == 1
    finally:
        env.close()


def _sandbox_init_of(marker, deadline_s=30):
    """The host pid of the init of the pid namespace that runs a process whose
    command line holds marker (waited for up to deadline_s)."""
    own_ns = os.readlink("/proc/self/ns/pid")
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() not in f.read():
                        continue
                ns = os.readlink(f"/proc/{d}/ns/pid")
            except OSError:
                continue  # gone meanwhile
            if ns == own_ns:
                pytest.skip("sandboxes share the host's pid namespace (unconfined): no init to kill")
            for q in os.listdir("/proc"):
                try:
                    if q.isdigit() and os.readlink(f"/proc/{q}/ns/pid") == ns:
                        with open(f"/proc/{q}/status") as f:
                            nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
                        if nspid[-1] == "1":
                            return int(q)
                except (OSError, IndexError):
                    continue
        time.sleep(0.05)
    raise AssertionError(f"no sandbox process with {marker!r} within {deadline_s}s")


def test_sandbox_death_mid_episode_then_a_fresh_env(server, task_id):
    """The sandbox under an env is killed (its pid namespace's init, SIGKILL):
    the next step raises SandboxDied, and a reset gets a working env."""
    env = shinken.Env(server.url, task_id, server.token)
    try:
        env.reset()
        marker = f"{31_000_000 + secrets.randbelow(1_000_000)}"
        *_, info = env.step({"verb": "launch_app", "app": "sh", "args": ["-c", f"exec sleep {marker}"]})
        assert info.get("error") is None, info.get("error")
        os.kill(_sandbox_init_of(f"sleep\0{marker}"), signal.SIGKILL)
        with pytest.raises(shinken.SandboxDied):
            env.step(WAIT)
        with pytest.raises(shinken.ShinkenError, match="reset needed"):
            env.step(WAIT)
        obs, info = env.reset()
        assert info["step"] == 0 and obs is not None
        assert env.step(WAIT)[4]["step"] == 1
    finally:
        env.close()


def test_timed_out_step_is_resent_and_runs_once(server, task_id):
    """A step whose reply misses the client's deadline is resent with its
    request_id: the step runs once on the server (the trajectory grows by
    one) and the resend gets that step's own reply."""
    env = shinken.Env(server.url, task_id, server.token)
    try:
        env.reset()
        env.step(WAIT)
        aio = env._a.client
        before = aio.stats.step_retries
        aio.transport.timeout = 0.5
        obs, _, _, _, info = env.step({"verb": "wait", "ms": 2000})
        aio.transport.timeout = 300
        assert aio.stats.step_retries > before, "the 2 s step answered within 0.5 s: nothing was resent"
        assert info["step"] == 2 and info["timings"]["act_us"] >= 2_000_000
        t = env.trajectory()
        assert len(t.steps) == 2 and t.steps[1].actions[0]["ms"] == 2000
        assert env.step(WAIT)[4]["step"] == 3  # the env goes on: nothing is left unknown
    finally:
        env.close()


def test_resent_request_id_replays_the_same_reply(server, task_id):
    """The client's own resend, spelled out: a step sent with a request_id
    that times out on the client, then sent twice more with that id, runs
    once and answers both resends alike."""
    c = shinken.Client(server.url, server.token)
    try:
        [s] = c.reset([wire.reset_env(task_id)], "png")
        assert s.error is None, s.error
        req = wire.step_env(s.env_id, {"verb": "wait", "ms": 1500}, request_id=wire.new_request_id())
        with pytest.raises(shinken.TransportError) as ei:
            c.step([req], "png", timeout=0.3, retry_s=0)
        assert ei.value.timed_out and ei.value.sent
        [a] = c.step([req], "png", retry_s=0)
        [b] = c.step([req], "png", retry_s=0)
        for r in (a, b):
            assert r.error is None and r.info["step"] == 1 and r.frame is not None
        assert (a.episode_id, a.obs["frame"], a.info["timings"]) == (b.episode_id, b.obs["frame"], b.info["timings"])
        assert b.cached  # the resend listed the frame it now holds: not sent again
        t = c.episode(s.episode_id)
        assert len(t["steps"]) == 1, "a resent step ran again"
        c.close_envs([s.env_id])
    finally:
        c.close()


def test_client_timeout_without_resends_tells_whether_the_step_ran(server, task_id):
    env = shinken.Env(server.url, task_id, server.token)
    try:
        env.reset()
        env.step(WAIT)
        env._a.client.step_retry_s = 0  # no resend: the fate comes from the trajectory
        with pytest.raises(shinken.StepTimeout) as ei:
            env._a.client.transport.timeout = 0.5
            env.step({"verb": "wait", "ms": 2000})
        env._a.client.transport.timeout = 300
        e = ei.value
        assert e.ran is True and e.step_index == 1 and e.episode_id == env.episode_id
        assert e.record.actions[0]["verb"] == "wait" and e.record.index == 1
        with pytest.raises(shinken.ShinkenError, match="reset needed"):
            env.step(WAIT)  # the screen after the timed-out step was never seen
        env.reset()
        assert env.step(WAIT)[4]["step"] == 1
    finally:
        env.close()


def test_bad_task_option_does_not_poison_later_resets(server, task_id):
    env = shinken.Env(server.url, task_id, server.token)
    try:
        env.reset()
        with pytest.raises(shinken.NotFound):
            env.reset(options={"task": "no-such-task"})
        assert env.task == task_id
        _, info = env.reset()
        assert info["task"] == task_id
    finally:
        env.close()


def test_close_closes_sockets_without_resource_warnings(server, task_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        env = shinken.Env(server.url, task_id, server.token)
        env.reset()
        t = env.client.transport
        assert t.open_connections >= 1
        env.close()
        assert t.open_connections == 0
        env.close()  # idempotent
        gc.collect()


def test_finalizer_releases_the_lease(server, task_id):
    env = shinken.Env(server.url, task_id, server.token)
    env.reset()
    env_id = env.env_id
    del env
    gc.collect()
    c = shinken.Client(server.url, server.token)
    [s] = c.step([wire.step_env(env_id, WAIT)])
    assert isinstance(s.error, shinken.NotFound), "the collected env still holds its sandbox"
    c.close()


def test_url_and_token_from_the_environment(server, task_id, monkeypatch):
    monkeypatch.setenv("SHINKEN_URL", server.url)
    if server.token:
        monkeypatch.setenv("SHINKEN_TOKEN", server.token)
    with shinken.Env(task=task_id) as env:
        env.reset()
        assert env.client.url == server.url
    monkeypatch.delenv("SHINKEN_URL")
    with pytest.raises(ValueError, match="SHINKEN_URL"):
        shinken.Client()


def test_vector_client_timeout_resends_the_batch(server, task_id):
    with shinken.VectorEnv(server.url, task_id, 2, token=server.token, on_error="info",
                           observe={"max_long_edge": 320}) as vec:
        vec.reset()
        before = vec.aio.stats.step_retries
        vec.client.transport.aio.timeout = 0.5
        obs, rew, term, trunc, infos = vec.step([{"verb": "wait", "ms": 2000}, WAIT])
        vec.client.transport.aio.timeout = 300
        assert vec.aio.stats.step_retries > before
        assert "error" not in infos and not trunc.any() and infos["step"].tolist() == [1, 1]
        for ep in vec.episode_ids:
            assert len(vec.client.episode(ep)["steps"]) == 1, "a resent step ran again"


def test_vector_client_timeout_without_resends_resolves_every_env(server, task_id):
    with shinken.VectorEnv(server.url, task_id, 2, token=server.token, on_error="info",
                           observe={"max_long_edge": 320}) as vec:
        vec.reset()
        vec.aio.step_retry_s = 0
        vec.client.transport.aio.timeout = 0.5
        obs, rew, term, trunc, infos = vec.step([{"verb": "wait", "ms": 2000}, WAIT])
        vec.client.transport.aio.timeout = 300
        errs = infos["error"]
        assert trunc.all() and all(isinstance(e, shinken.StepTimeout) for e in errs)
        assert [e.ran for e in errs] == [True, True] and [e.step_index for e in errs] == [0, 0]
        _, _, _, _, infos = vec.step([WAIT, WAIT])  # both autoreset: a definite new start
        assert infos["_autoreset"].all() and infos["step"].tolist() == [0, 0]
