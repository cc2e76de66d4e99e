"""A process reward from the trainer's side: after each agent step, probe the
sandbox with ``env.exec`` and score progress, beside the verifier's final
reward.

    envserver --allow-exec            # trainer exec is off unless allowed
    python3 clients/python/examples/process_reward.py http://127.0.0.1:8700

The task is xterm-hello-file ("create ~/hello.txt containing: hello
shinken"); the policy here is scripted, where a trainer's would be its
model. The probe runs as the agent's user between steps, costs no step and
is recorded in the trajectory's ``events``, never as an agent action
(docs/api.md, "Trainer exec"). At the end the episode's video (H.264 MP4)
goes to W&B when a run is active, else to a file (VIDEO_PATH, or a temp
file): what an experiment tracker shows beside the rewards.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import shinken  # noqa: E402
from shinken import tracking  # noqa: E402

URL = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SHINKEN_URL", "http://127.0.0.1:8700")
POLICY = [
    {"verb": "click", "target": {"kind": "point_px", "x": 200, "y": 200}},
    [{"verb": "type_text", "text": "touch ~/hello.txt"}, {"verb": "key", "keys": "Return"}],
    [{"verb": "type_text", "text": "echo 'hello shinken' > ~/hello.txt"}, {"verb": "key", "keys": "Return"}],
    {"verb": "done"},
]


def progress(env):
    """0 nothing yet, 0.5 the file exists, 1 it holds the line."""
    r = env.exec(shell='test -f "$HOME/hello.txt" || exit 2; grep -qx "hello shinken" "$HOME/hello.txt"',
                 timeout_ms=2000)
    return {0: 1.0, 1: 0.5}.get(r["exit"], 0.0)


def main():
    env = shinken.Env(URL, task="xterm-hello-file", obs_mode="bytes")
    try:
        env.reset()
        shaped = []
        for action in POLICY:
            try:
                _, reward, terminated, truncated, info = env.step(action)
            except shinken.NotScored as e:  # the verifier gave no score: drop the episode
                print(f"episode not scored ({e.exit_reason}): dropped")
                return
            if terminated or truncated:
                print(f"final reward {reward} ({info.get('exit_reason')})")
                break
            shaped.append(progress(env))
            print(f"step {info['step']}: process reward {shaped[-1]}")
        events = env.trajectory().events
        print(f"{len(events)} probes recorded as trainer events, none as agent steps")
        log_video(env.client, env.episode_id)
    finally:
        env.close()


def log_video(client, episode_id):
    """The episode's video to W&B (when installed and a run is active) or
    to a file."""
    if not (client.spec().get("trainer") or {}).get("video"):
        print("this server renders no video (no ffmpeg)")
        return
    try:
        import wandb
        if wandb.run is not None:
            tracking.log_wandb(client, episode_id)
            print(f"episode video logged to W&B run {wandb.run.name}")
            return
    except ImportError:
        pass
    path = tracking.save_episode_video(client, episode_id, os.environ.get("VIDEO_PATH"))
    print(f"episode video: {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
