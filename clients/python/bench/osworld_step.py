"""Per-step wall time of shinken.osworld.DesktopEnv against OSWorld's step.

OSWorld's DesktopEnv.step runs the action, sleeps (its harness passes
``sleep_after_execution``; its documented setting is 2 s) and then takes a
screenshot. This plays the same actions both ways on one server, in one run:

- ``desktopenv``: DesktopEnv.step(action, pause=2.0): the step returns when
  the screen has settled on the action's effect; 2 s is only its bound.
- ``osworld``: the action with settling off, a 2 s sleep, then a
  screenshot (a second Shinken step), as OSWorld's VM does it.

    python3 clients/python/bench/osworld_step.py URL [ROUNDS] [CHROME_TASK_JSON]

URL serves the imported task osworld-e2e-mkdir
(cmd/envserver/testdata/osworld, docs/osworld.md): the actions go to its
xterm. With CHROME_TASK_JSON (an imported OSWorld chrome task, e.g.
chrome/030eeff7-....json of OSWorld's set) they go to Chromium instead:
the address bar, a settings page, a scroll. Prints one JSON object: per
mode, the p50 and p95 of a step's wall time (ms) and their ratio.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shinken.osworld import DesktopEnv  # noqa: E402

URL = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
TASK = {"id": "e2e-mkdir", "instruction": "Create a folder named todo_2024 on the Desktop."}
ACTIONS = ["pyautogui.click(200, 200)", "pyautogui.typewrite('echo shinken')", "pyautogui.press('enter')",
           "pyautogui.hotkey('ctrl', 'l')"]
SLEEP_S = 2.0
if len(sys.argv) > 3:
    with open(sys.argv[3]) as f:
        TASK = json.load(f)
    ACTIONS = ["pyautogui.hotkey('ctrl', 'l')", "pyautogui.typewrite('chrome://settings')", "pyautogui.press('enter')",
               "pyautogui.scroll(-5)"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    env = DesktopEnv(action_space="pyautogui", url=URL, require_a11y_tree=False)
    times = {"desktopenv": [], "osworld": []}
    per_action = {a: [] for a in ACTIONS}
    try:
        for _ in range(ROUNDS):
            env.reset(task_config=TASK)
            for a in ACTIONS:
                t0 = time.monotonic()
                obs, _, _, _ = env.step(a, SLEEP_S)
                assert obs["screenshot"]
                times["desktopenv"].append(time.monotonic() - t0)
                per_action[a].append(time.monotonic() - t0)
            env.reset(task_config=TASK)
            for a in ACTIONS:
                t0 = time.monotonic()
                env.client.step([{"env_id": env.env_id, "text": a, "dialect": "osworld"}],
                                {"format": "png", "settle": {"max_ms": 0}})
                time.sleep(SLEEP_S)
                s = env.client.step([{"env_id": env.env_id, "action": {"verb": "screenshot"}}],
                                    {"format": "png", "settle": {"max_ms": 0}})[0]
                assert s.frame is not None
                times["osworld"].append(time.monotonic() - t0)
    finally:
        env.close()
    out = {m: {"steps": len(v), "p50_ms": round(1000 * pct(v, 0.5), 1), "p95_ms": round(1000 * pct(v, 0.95), 1)}
           for m, v in times.items()}
    out["desktopenv_p50_ms_by_action"] = {a: round(1000 * pct(v, 0.5), 1) for a, v in per_action.items()}
    out["ratio_p50"] = round(out["osworld"]["p50_ms"] / out["desktopenv"]["p50_ms"], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
