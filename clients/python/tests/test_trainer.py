"""The trainer's own routes against a real server that allows them:
POST /v1/exec through Env.exec and Client.exec (docs/api.md, "Trainer exec")."""

import json
import pytest

import shinken
from conftest import ROOT, start_server


@pytest.fixture(scope="module")
def exec_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trainer")
    cfg = json.loads((ROOT / "configs" / "envserver.json").read_text())
    cfg["trainer_exec"] = True
    cfg["screens"] = ["1024x768"]  # a second size, with its own warm sandbox
    (tmp / "envserver.json").write_text(json.dumps(cfg))
    p = start_server(tmp, pool=1, config=tmp / "envserver.json")
    yield p.srv
    p.cleanup()


def test_exec_probes_and_changes_the_sandbox(exec_server):
    env = shinken.Env(exec_server.url, task="xterm-hello-file", token=exec_server.token, obs_mode="bytes")
    try:
        with pytest.raises(shinken.ShinkenError):
            env.exec(shell="true")  # before reset: no env yet
        env.reset()
        assert env.client.spec()["trainer"]["exec"] is True
        r = env.exec(shell='echo probe > "$HOME/probe.txt"; echo "$X"; exit 4', env={"X": "y"})
        assert r["exit"] == 4 and r["stdout"] == b"y\n" and not r["truncated"] and not r["timed_out"]
        assert env.exec(["cat", "probe.txt"])["stdout"] == b"probe\n"
        assert env.exec(["cat"], stdin=b"in")["stdout"] == b"in"
        slow = env.exec(shell="sleep 20", timeout_ms=200)
        assert slow["timed_out"] and slow["exit"] is None
        with pytest.raises(shinken.BadRequest):
            env.exec(["true"], shell="true")
        with pytest.raises(shinken.BadRequest):
            env.exec(shell="true", timeout_ms=10 ** 7)
        env.step({"verb": "wait", "ms": 10})
        traj = env.trajectory()
        assert len(traj.steps) == 1  # the trainer's commands are not agent steps
        kinds = [e["kind"] for e in traj.events]
        assert kinds == ["exec"] * 4 and traj.events[0]["shell"].startswith("echo probe"), traj.events
        assert traj.events[-1]["timed_out"] and traj.events[1]["argv"] == ["cat", "probe.txt"]
        # The envelope says exec was allowed; the audit lists each command.
        assert traj.envelope["trainer_exec"] is True and traj.envelope["network"] in ("none", "host")
        assert [(u["by"], u["kind"]) for u in traj.audit] == [("trainer", "exec")] * 4, traj.audit
        env.step({"verb": "done"})
        with pytest.raises(shinken.EpisodeOver):
            env.exec(shell="true")
    finally:
        env.close()


def test_observe_without_a_step(server, task_id):
    env = shinken.Env(server.url, task=task_id, token=server.token, obs_mode="bytes")
    try:
        first, _ = env.reset()
        assert env.client.spec()["trainer"]["observe"] is True
        obs, info = env.observe_now(windows=True)
        assert obs[:8] == b"\x89PNG\r\n\x1a\n" and info["step"] == 0
        assert info["windows"] and all("title" in w for w in info["windows"]), info["windows"]
        env.step({"verb": "wait", "ms": 10})
        _, info = env.observe_now()
        assert info["step"] == 1 and "windows" not in info  # one agent step; observing spent none
        assert isinstance(env.observe, dict) or env.observe is None  # the env's observe request is untouched
        traj = env.trajectory()
        assert len(traj.steps) == 1 and [e["kind"] for e in traj.events] == ["observe", "observe"]
    finally:
        env.close()


def test_files_round_trip(exec_server):
    env = shinken.Env(exec_server.url, task="xterm-hello-file", token=exec_server.token, obs_mode="bytes")
    try:
        env.reset()
        data = bytes(range(256)) * 10
        r = env.put_file("~/fixtures/blob.bin", data, mode=0o600)
        assert r["size"] == len(data) and len(r["sha256"]) == 64
        assert env.get_file("~/fixtures/blob.bin") == data
        assert env.exec(shell="stat -c %a ~/fixtures/blob.bin")["stdout"] == b"600\n"
        with pytest.raises(shinken.NotFound):
            env.get_file("~/nope")
        env.exec(shell="ln -s ~/fixtures/blob.bin ~/link")
        with pytest.raises(shinken.BadRequest):
            env.get_file("~/link")  # no link followed
        req = shinken.wire.file_put_request(env.env_id, "~/x", b"abc")
        req["sha256"] = "0" * 64
        with pytest.raises(shinken.ChecksumMismatch):
            shinken._loop.run(env.client.aio.transport.call("POST", "/v1/files/put", req))
        events = env.trajectory().events
        assert [e["kind"] for e in events if e["kind"] != "exec"] == ["put_file", "get_file", "get_file", "get_file"]
        assert events[0]["sha256"] == r["sha256"]
    finally:
        env.close()


def test_dirs_and_chunked_files(exec_server, tmp_path):
    env = shinken.Env(exec_server.url, task="xterm-hello-file", token=exec_server.token, obs_mode="bytes")
    try:
        env.reset()
        # A file of three chunks in and out, whole.
        big = bytes(range(256)) * 4000  # 1 MB
        r = env.put_file("~/big.bin", big, chunk=400_000)
        assert r["chunks"] == 3 and r["size"] == len(big)
        assert env.exec(shell="sha256sum ~/big.bin")["stdout"].split()[0].decode() == r["sha256"]
        assert env.get_file("~/big.bin", chunk=300_000) == big
        with pytest.raises(shinken.TooLarge):
            env.get_file("~/big.bin", max_bytes=1000)
        # A directory in and out.
        src = tmp_path / "src"
        (src / "sub").mkdir(parents=True)
        (src / "sub" / "a.txt").write_text("alpha")
        (src / "top.txt").write_text("top")
        env.put_dir("~/proj", str(src))
        assert env.exec(shell="cat ~/proj/sub/a.txt ~/proj/top.txt")["stdout"] == b"alphatop"
        env.exec(shell="ln -s /etc/passwd ~/proj/link; mkfifo ~/proj/fifo")
        out = env.get_dir("~/proj", str(tmp_path / "out"))
        assert out["files"] == 2 and out["links"] == ["link"] and out["skipped"] == ["fifo"], out
        assert (tmp_path / "out" / "sub" / "a.txt").read_text() == "alpha"
        assert not (tmp_path / "out" / "link").exists()
        (src / "ln").symlink_to("/etc/passwd")
        with pytest.raises(ValueError):
            env.put_dir("~/proj2", str(src))  # a local link is not sent
        audit = env.trajectory().audit
        puts = [u for u in audit if u["kind"] == "put_file"]
        assert [u.get("offset", 0) for u in puts[:3]] == [0, 400_000, 800_000] and puts[3]["file_kind"] == "tar", puts
    finally:
        env.close()


def test_per_env_screen(exec_server):
    spec = shinken.Client(exec_server.url, token=exec_server.token).spec()
    sizes = [(s["w"], s["h"]) for s in spec["observation"]["screens"]]
    assert (1024, 768) in sizes and len(sizes) == 2, sizes
    with pytest.raises(ValueError):
        shinken.Env(exec_server.url, task="xterm-hello-file", token=exec_server.token, screen=(800, 600))
    env = shinken.Env(exec_server.url, task="xterm-hello-file", token=exec_server.token, screen=(1024, 768))
    try:
        assert env.observation_space.shape == (768, 1024, 3)
        obs, _ = env.reset()
        assert obs.shape == (768, 1024, 3)
        assert env.exec(shell="xdpyinfo | grep dimensions")["stdout"].split()[1] == b"1024x768"
        assert env.trajectory().envelope["screen_w"] == 1024
    finally:
        env.close()


def test_exec_refused_where_not_allowed(server, task_id):
    env = shinken.Env(server.url, task=task_id, token=server.token, obs_mode="bytes")
    try:
        env.reset()
        assert env.client.spec()["trainer"]["exec"] is False
        with pytest.raises(shinken.Unsupported):
            env.exec(shell="true")
    finally:
        env.close()


def test_process_reward_example(exec_server):
    """clients/python/examples/process_reward.py as a trainer runs it."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "clients" / "python" / "examples" / "process_reward.py"),
                          exec_server.url], env={**os.environ, "SHINKEN_TOKEN": exec_server.token},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "step 2: process reward 0.5" in out.stdout and "step 3: process reward 1.0" in out.stdout, out.stdout
    assert "final reward 1.0 (task_complete)" in out.stdout and "3 probes recorded" in out.stdout, out.stdout
    # The episode's video, where the server renders one (Debian's ffmpeg).
    import shutil
    renders = bool((shinken.Client(exec_server.url, token=exec_server.token).spec().get("trainer") or {}).get("video"))
    assert renders == bool(shutil.which("ffmpeg")), out.stdout
    if renders:
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith("episode video: "))
        path = line.split(": ", 1)[1].rsplit(" (", 1)[0]
        with open(path, "rb") as f:
            head = f.read(64)
        os.remove(path)
        assert b"ftyp" in head, head  # an MP4
