"""Episode video (GET /v1/episodes/{id}/video.mp4, docs/api.md "Episode
video") through Client.episode_video, and shinken.tracking's handoff to
trackers, which are not installed here: their helpers name the package."""

import os
import shutil
import subprocess

import pytest

import shinken
from shinken import tracking


def _mp4_atoms(data):
    """The MP4's top-level atom names, in order."""
    out, off = [], 0
    while off + 8 <= len(data):
        size = int.from_bytes(data[off:off + 4], "big")
        out.append(data[off + 4:off + 8].decode("latin-1"))
        if size == 1:
            size = int.from_bytes(data[off + 8:off + 16], "big")
        if size < 8:
            break
        off += size
    return out


@pytest.fixture(scope="module")
def finished_episode(server, task_id):
    env = shinken.Env(server.url, task=task_id, token=server.token, obs_mode="bytes")
    try:
        if not env.client.spec()["trainer"].get("video"):
            pytest.skip("this server has no ffmpeg: no episode video")
        env.reset()
        env.step({"verb": "click", "x": 200, "y": 150})
        env.step({"verb": "wait", "ms": 300})
        ep = env.episode_id
    finally:
        env.close()  # the episode ends: its video is kept
    client = shinken.Client(server.url, token=server.token)
    yield client, ep
    client.close()


def test_episode_video_bytes(finished_episode, tmp_path):
    client, ep = finished_episode
    data = client.episode_video(ep)
    atoms = _mp4_atoms(data)
    assert atoms[0] == "ftyp" and "moov" in atoms and atoms.index("moov") < atoms.index("mdat"), atoms
    assert client.episode_video(ep) == data  # a finished episode's video is kept: the same bytes
    if shutil.which("ffprobe"):
        p = tmp_path / "ep.mp4"
        p.write_bytes(data)
        out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,pix_fmt",
                              "-of", "csv=p=0", str(p)], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "h264,yuv420p", out
    path = tracking.save_episode_video(client, ep, str(tmp_path / "saved.mp4"))
    assert open(path, "rb").read() == data
    with pytest.raises(shinken.NotFound):
        client.episode_video("ep-0000000000000000")


def test_tracking_names_missing_trackers(finished_episode):
    client, ep = finished_episode
    for mod, call in (("wandb", lambda: tracking.wandb_video(client, ep)),
                      ("wandb", lambda: tracking.log_wandb(client, ep)),
                      ("tensorboard", lambda: tracking.log_tensorboard(object(), client, ep))):
        try:
            __import__(mod)
            continue  # installed here: nothing to check
        except ImportError:
            pass
        with pytest.raises(tracking.MissingDependency) as e:
            call()
        assert e.value.package == mod and mod in str(e.value)
    gif = client.episode_gif(ep)
    assert gif[:6] == b"GIF89a" and tracking._gif_size(gif)[0] > 0
    assert not [f for f in os.listdir(os.path.dirname(tracking.__file__)) if f.endswith(".mp4")]
