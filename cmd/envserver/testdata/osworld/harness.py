# OSWorld's single-example loop driving shinken.osworld.DesktopEnv
# (TestImportOSWorldEndToEnd): argv[1] is the server's URL, argv[2] a
# scratch directory; prints one JSON object with each case's score and
# what the harness saw.
#
# run_single_example follows the call pattern of OSWorld's harness (its
# lib_run_single.py): agent.reset, env.reset(task_config=...),
# controller.start_recording, agent.predict and env.step(action,
# sleep_after_execution) per action with the screenshot and a json line of
# the step written out, env.evaluate, controller.end_recording. Only the
# import of DesktopEnv differs from a run on OSWorld's VMs.
import datetime
import json
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "clients", "python"))
from shinken.osworld import DesktopEnv  # noqa: E402  (the one changed import)

URL, OUT = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))


def example(name):
    with open(os.path.join(HERE, "examples", "os", name + ".json")) as f:
        return json.load(f)


class ScriptedAgent:
    """An agent whose predictions are fixed: one list of actions a turn."""

    def __init__(self, turns):
        self.turns, self.k = turns, 0

    def reset(self):
        self.k = 0

    def predict(self, instruction, obs):
        assert obs["instruction"], "the observation carries the instruction"
        turn = self.turns[self.k] if self.k < len(self.turns) else ["WAIT"]
        self.k += 1
        return "scripted", turn


def run_single_example(agent, env, example, max_steps, instruction, sleep_after_execution, result_dir, scores):
    agent.reset()
    obs = env.reset(task_config=example)
    done = False
    step_idx = 0
    env.controller.start_recording()
    while not done and step_idx < max_steps:
        response, actions = agent.predict(instruction, obs)
        for action in actions:
            stamp = datetime.datetime.now().strftime("%Y%m%d@%H%M%S")
            obs, reward, done, info = env.step(action, sleep_after_execution)
            with open(os.path.join(result_dir, f"step_{step_idx + 1}_{stamp}.png"), "wb") as f:
                f.write(obs["screenshot"])
            with open(os.path.join(result_dir, "traj.jsonl"), "a") as f:
                f.write(json.dumps({"step_num": step_idx + 1, "action_timestamp": stamp, "action": action,
                                    "reward": reward, "done": done, "info": info,
                                    "screenshot_file": f"step_{step_idx + 1}_{stamp}.png"}))
                f.write("\n")
            if done:
                break
        step_idx += 1
    result = env.evaluate()
    scores.append(result)
    with open(os.path.join(result_dir, "result.txt"), "w", encoding="utf-8") as f:
        f.write(f"{result}\n")
    env.controller.end_recording(os.path.join(result_dir, "recording.mp4"))


def png_size(b):
    assert b[:8] == b"\x89PNG\r\n\x1a\n", "screenshot is a PNG"
    return int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")


MKDIR = "pyautogui.typewrite('mkdir ~/Desktop/todo_2024')\npyautogui.press('enter')"
# A confined sandbox (and a container) has OSWorld's /home/user.
probe = DesktopEnv(url=URL)
HOME = "/home/user" if probe.client.spec()["pool"].get("confined") else "~"
probe.close()
CASES = {
    # (task, action space, screen size, turns, max_steps)
    "pyautogui solved": ("e2e-mkdir", "pyautogui", None,
                         [["pyautogui.click(200, 200)"], ["```python\n" + MKDIR.replace("~", HOME) + "\n```"], ["DONE"]], 15),
    "pyautogui unsolved, out of turns": ("e2e-mkdir", "pyautogui", None,
                                         [["pyautogui.click(200, 200)"], [MKDIR.replace("2024", "2023")]], 3),
    "pyautogui solved, then FAIL": ("e2e-mkdir", "pyautogui", None,
                                    [["pyautogui.click(200, 200)"], [MKDIR], ["FAIL"]], 15),
    "computer_13 solved on a 1920x1080 screen": (
        "e2e-mkdir", "computer_13", (1920, 1080),
        [[{"action_type": "CLICK", "x": 300, "y": 270}],
         [{"action_type": "TYPING", "text": "mkdir ~/Desktop/todo_2024"}, {"action_type": "PRESS", "key": "enter"}],
         [{"action_type": "DONE"}]], 15),
    "infeasible FAIL": ("e2e-infeasible", "computer_13", None, [["FAIL"]], 15),
    "infeasible DONE": ("e2e-infeasible", "pyautogui", None, [["DONE"]], 15),
}

out = {}
for name, (task, space, size, turns, max_steps) in CASES.items():
    d = os.path.join(OUT, name.replace(" ", "_").replace(",", ""))
    os.makedirs(d)
    env = DesktopEnv(provider_name="shinken", action_space=space, screen_size=size, url=URL,
                     require_a11y_tree=True)
    scores = []
    try:
        ex = example(task)
        run_single_example(ScriptedAgent(turns), env, ex, max_steps, ex["instruction"], 0.5, d, scores)
        steps = [json.loads(line) for line in open(os.path.join(d, "traj.jsonl"))]
        shots = sorted(p for p in os.listdir(d) if p.endswith(".png"))
        tree = env.controller.get_accessibility_tree()
        if tree is not None:
            ET.fromstring(tree)
        out[name] = {"score": scores[0], "steps": len(steps), "screenshots": len(shots),
                     "size": list(png_size(open(os.path.join(d, shots[-1]), "rb").read())),
                     "done": steps[-1]["done"], "info": steps[-1]["info"],
                     "result": open(os.path.join(d, "result.txt")).read().strip()}
    finally:
        env.close()
print(json.dumps(out))
