# Plays scripted episodes on the OSWorld tasks imported from examples/
# (TestImportOSWorldEndToEnd): argv[1] is the server's URL; prints one
# JSON object, each case's reward.
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "clients", "python"))
import shinken  # noqa: E402

URL = sys.argv[1]
CLICK = {"verb": "click", "target": {"kind": "point_px", "x": 200, "y": 200}}


def typed(cmd, end="done"):
    return [CLICK, [{"verb": "type_text", "text": cmd}, {"verb": "key", "keys": "Return"}],
            [{"verb": "wait", "ms": 500}, {"verb": end}]]


def run(task, steps):
    env = shinken.Env(URL, task=task)
    try:
        env.reset()
        reward = None
        for s in steps:
            _, reward, term, trunc, info = env.step(s)
            if term or trunc:
                return reward if info.get("exit_reason") == "task_complete" else info.get("exit_reason")
        return "not ended"
    finally:
        env.close()


out = {
    "mkdir solved": run("osworld-e2e-mkdir", typed("mkdir ~/Desktop/todo_2024")),
    "mkdir unsolved": run("osworld-e2e-mkdir", typed("mkdir ~/Desktop/todo_2023")),
    "mkdir solved, then fail": run("osworld-e2e-mkdir", typed("mkdir ~/Desktop/todo_2024", "fail")),
    "note solved": run("osworld-e2e-note", typed("echo done >> ~/Desktop/note.txt")),
    "note unsolved": run("osworld-e2e-note", typed("echo Done >> ~/Desktop/note.txt")),
    "note a FIFO": run("osworld-e2e-note", typed("rm ~/Desktop/note.txt; mkfifo ~/Desktop/note.txt")),
    "infeasible fail": run("osworld-e2e-infeasible", [{"verb": "fail"}]),
    "infeasible done": run("osworld-e2e-infeasible", [{"verb": "done"}]),
}
print(json.dumps(out))
