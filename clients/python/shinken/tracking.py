"""Episode videos for experiment trackers: Weights & Biases and TensorBoard.

The server renders an episode as H.264 MP4 (GET /v1/episodes/{id}/video.mp4,
docs/api.md "Episode video"): the screen the model saw at each step with the
step's clicks and drags marked, at the steps' real timing. These helpers
fetch it and hand it to a tracker. Neither tracker is a dependency of this
package: each is imported when its helper runs, and a missing one raises
MissingDependency naming the package to install.

    from shinken import tracking
    tracking.log_wandb(client, episode_id, key="rollout/video", step=global_step)
    tracking.log_tensorboard(writer, client, episode_id, tag="rollout/replay", step=global_step)

TensorBoard shows no MP4: its image dashboard animates GIFs (what its own
add_video writes), so log_tensorboard logs the server's replay GIF, drawn
with the same marks.
"""

from __future__ import annotations

import importlib
import os
import struct
import tempfile
from typing import Any, Optional

__all__ = ["MissingDependency", "save_episode_video", "wandb_video", "log_wandb", "log_tensorboard"]


class MissingDependency(ImportError):
    """A tracker helper ran without its tracker installed."""

    def __init__(self, package: str, helper: str):
        super().__init__(f"shinken.tracking.{helper} needs the {package!r} package, which is not installed "
                         f"(pip install {package})")
        self.package = package


def _need(module: str, package: str, helper: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(package, helper) from None


def save_episode_video(client: Any, episode_id: str, path: Optional[str] = None, *,
                       timeout: Optional[float] = None) -> str:
    """Writes the episode's MP4 to path (default: a new file in the temp
    directory, the caller's to remove) and returns the path."""
    data = client.episode_video(episode_id, timeout=timeout)
    if path is None:
        fd, path = tempfile.mkstemp(prefix=f"{episode_id}-", suffix=".mp4")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return path


def wandb_video(client: Any, episode_id: str, *, caption: Optional[str] = None,
                path: Optional[str] = None, timeout: Optional[float] = None) -> Any:
    """The episode as a ``wandb.Video`` (format mp4), for ``run.log``. The
    MP4 is written to path (default: a temp file) which W&B uploads."""
    wandb = _need("wandb", "wandb", "wandb_video")
    p = save_episode_video(client, episode_id, path, timeout=timeout)
    return wandb.Video(p, caption=caption or episode_id, format="mp4")


def log_wandb(client: Any, episode_id: str, *, key: str = "episode_video", step: Optional[int] = None,
              run: Any = None, caption: Optional[str] = None, timeout: Optional[float] = None) -> Any:
    """Logs the episode's video under key to run (default: wandb.run, which
    wandb.init started) and returns the wandb.Video."""
    wandb = _need("wandb", "wandb", "log_wandb")
    run = run if run is not None else wandb.run
    if run is None:
        raise RuntimeError("shinken.tracking.log_wandb: no W&B run (call wandb.init first, or pass run=)")
    video = wandb_video(client, episode_id, caption=caption, timeout=timeout)
    run.log({key: video}, step=step)
    return video


def _gif_size(gif: bytes) -> "tuple[int, int]":
    if gif[:6] not in (b"GIF87a", b"GIF89a") or len(gif) < 10:
        raise ValueError("episode replay: not a GIF")
    w, h = struct.unpack("<HH", gif[6:10])
    return w, h


def log_tensorboard(writer: Any, client: Any, episode_id: str, *, tag: str = "episode_replay",
                    step: Optional[int] = None, timeout: Optional[float] = None) -> None:
    """Logs the episode's replay to a TensorBoard SummaryWriter (PyTorch's
    torch.utils.tensorboard or tensorboardX) as an animated image summary,
    as SummaryWriter.add_video does."""
    summary_pb2 = _need("tensorboard.compat.proto.summary_pb2", "tensorboard", "log_tensorboard")
    gif = client.episode_gif(episode_id, timeout=timeout)
    w, h = _gif_size(gif)
    Summary = summary_pb2.Summary
    summary = Summary(value=[Summary.Value(tag=tag, image=Summary.Image(
        height=h, width=w, colorspace=3, encoded_image_string=gif))])
    get = getattr(writer, "_get_file_writer", None)
    fw = get() if get is not None else getattr(writer, "file_writer", None)
    if fw is None or not hasattr(fw, "add_summary"):
        raise TypeError("shinken.tracking.log_tensorboard: writer is not a TensorBoard SummaryWriter")
    fw.add_summary(summary, step)
