"""Plays OSWorld's real tasks, as imported, through shinken.osworld.DesktopEnv:
for each task a solved state, doing nothing, and the wrong answers worth
trying, with the score each must get (docs/osworld.md, "What is proved").

    envserver tasks import-osworld OSWORLD/evaluation_examples/examples \\
        --only OSWORLD/evaluation_examples/test_all.json --cache CACHE --out TASKS
    envserver --allow-unchecked --tasks TASKS --pool 1 --listen 127.0.0.1:8791
    python3 clients/python/examples/osworld/verify_real.py http://127.0.0.1:8791 \\
        OSWORLD/evaluation_examples/examples

The scripted agent acts as an OSWorld agent reading the accessibility tree
would: it finds an element in the observation's XML by role and name and
clicks the middle of its box with pyautogui. Prints one line per case and a
JSON summary; exits 1 when a score differs from the expected one.
"""

import json
import os
import re
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from shinken.errors import NotFound  # noqa: E402
from shinken.osworld import NS, DesktopEnv  # noqa: E402

URL, EXAMPLES = sys.argv[1], sys.argv[2]


class Stuck(Exception):
    pass


class Agent:
    """Runs one scripted case on env, an episode from reset to evaluate."""

    def __init__(self, env):
        self.env, self.obs = env, None

    def act(self, action):
        self.obs, _, done, info = self.env.step(action, 2.0)
        if info.get("error"):
            raise Stuck(f"{action!r}: {info['error']}")
        return done

    def find(self, role, name, tries=8):
        """The centre of the first element with this role whose name matches,
        looking again (a WAIT) while the page draws."""
        for _ in range(tries):
            tree = self.obs.get("accessibility_tree")
            if tree:
                for node in ET.fromstring(tree).iter(role.replace(" ", "-")):
                    if re.search(name, node.get("name") or ""):
                        x, y = eval(node.get(f"{{{NS['cp']}}}screencoord", "(-1, -1)"))  # OSWorld's own form
                        w, h = eval(node.get(f"{{{NS['cp']}}}size", "(0, 0)"))
                        if w > 0 and h > 0:
                            return x + w // 2, y + h // 2
            self.act("WAIT")
        raise Stuck(f"no {role} {name!r} on screen")

    def click(self, role, name):
        x, y = self.find(role, name)
        self.act(f"pyautogui.click({x}, {y})")

    def address(self):
        for node in ET.fromstring(self.obs.get("accessibility_tree") or "<x/>").iter("entry"):
            if node.get("name") == "Address and search bar":
                return node.text or ""
        return ""

    def goto(self, url):
        for _ in range(3):
            self.act("pyautogui.hotkey('ctrl', 'l')")
            self.act(f"pyautogui.typewrite({url!r})\npyautogui.press('enter')")
            for _ in range(4):
                if self.address() == url:
                    return
                self.act("WAIT")
        raise Stuck(f"the address bar never showed {url}")

    def terminal(self, line):
        self.act("pyautogui.click(200, 200)")
        self.act(f"pyautogui.typewrite({line!r})\npyautogui.press('enter')")


# What each case does before it ends: a function of the agent, then how the
# episode ends (FAIL, DONE, or None: evaluate ends it).
def nothing(a):
    pass


def dnt(confirm):
    def play(a):
        a.goto("chrome://settings/cookies")
        a.click("toggle button", r'Send a "Do Not Track" request')
        a.click("push button", "^Confirm$" if confirm else "^Cancel$")
    return play


def protection(level):
    def play(a):
        a.goto("chrome://settings/security")
        a.click("radio button", f"^{level}")
    return play


def profile_name(name):
    def play(a):
        a.goto("chrome://settings/manageProfile")
        a.click("entry", "^Name$")
        a.act("pyautogui.hotkey('ctrl', 'a')")
        a.act(f"pyautogui.typewrite({name!r})\npyautogui.press('enter')")
    return play


def bookmark_folder(name):
    def play(a):
        a.goto("chrome://bookmarks")
        a.click("push button", "^Organize$")
        a.click("menu item", "^Add new folder$")
        a.act("pyautogui.hotkey('ctrl', 'a')")
        a.act(f"pyautogui.typewrite({name!r})\npyautogui.press('enter')")
        a.find("table row", f"^{name}$")
    return play


def font_size(key):
    def play(a):
        a.goto("chrome://settings/fonts")
        a.click("slider", "^Font size$")
        a.act(f"pyautogui.press({key!r})")
    return play


def shell(line):
    return lambda a: a.terminal(line)


INFEASIBLE = [("says FAIL", nothing, "FAIL", 1.0), ("says DONE", nothing, "DONE", 0.0),
              ("never ends it (evaluate does)", nothing, None, 0.0)]
CASES = {
    "030eeff7": [("Do Not Track on, confirmed", dnt(True), "DONE", 1.0), ("toggled, then cancelled", dnt(False), "DONE", 0.0),
                 ("nothing", nothing, "DONE", 0.0), ("on, then FAIL", dnt(True), "FAIL", 0.0)],
    "9656a811": [("enhanced protection", protection("Enhanced protection"), "DONE", 1.0),
                 ("standard protection", protection("Standard protection"), "DONE", 0.0), ("nothing", nothing, "DONE", 0.0)],
    "2ae9ba84": [("named Thomas", profile_name("Thomas"), "DONE", 1.0), ("named Tom", profile_name("Tom"), "DONE", 0.0),
                 ("nothing", nothing, "DONE", 0.0)],
    "2ad9387a": [("folder Favorites on the bar", bookmark_folder("Favorites"), "DONE", 1.0),
                 ("folder Favourites", bookmark_folder("Favourites"), "DONE", 0.0), ("nothing", nothing, "DONE", 0.0)],
    "af630914": [("font size to the largest", font_size("end"), "DONE", 1.0), ("font size to the smallest", font_size("home"), "DONE", 0.0),
                 ("nothing", nothing, "DONE", 0.0)],
    "e0df059f": [("renamed", shell("mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2"), "DONE", 1.0),
                 ("another name", shell("mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_3"), "DONE", 0.0),
                 ("nothing", nothing, "DONE", 0.0)],
    # which spotify: nothing installs it offline; a spotify of the agent's
    # own is not on the verifier's PATH.
    "94d95f96": [("nothing", nothing, "DONE", 0.0),
                 ("its own spotify in ~/.local/bin", shell("mkdir -p ~/.local/bin && printf '#!/bin/sh\\n' > ~/.local/bin/spotify && chmod +x ~/.local/bin/spotify"), "DONE", 0.0)],
}
for short in ("3720f614", "93eabf48", "ae78f875", "2bd59342", "4783cc41", "b3d4a89c", "c288e301", "fe41f596"):
    CASES[short] = INFEASIBLE


def listed():
    """test_all.json beside the examples directory: {domain: [ids]} (one id
    has files under two domains; the list says which one is the task)."""
    p = os.path.join(os.path.dirname(os.path.abspath(EXAMPLES)), "test_all.json")
    with open(p) as f:
        return json.load(f)


def examples(short):
    """The task files listed under id short: (domain, task) each."""
    out = []
    for d, ids in listed().items():
        for i in ids:
            if i.startswith(short):
                with open(os.path.join(EXAMPLES, d, i + ".json")) as f:
                    out.append((d, json.load(f)))
    if not out:
        raise SystemExit(f"{short}: no task file in {EXAMPLES}")
    return out


def start(env, short):
    """Resets env on the example of id short that the server serves (one id
    names tasks in two domains; the import kept one)."""
    for domain, ex in examples(short):
        try:
            return domain, ex, env.reset(task_config=ex)
        except NotFound:
            continue
    raise SystemExit(f"{short}: the server serves none of its examples")


def main():
    env = DesktopEnv(action_space="pyautogui", url=URL, require_a11y_tree=True)
    rows, bad = [], 0
    try:
        for short, cases in CASES.items():
            for label, play, end, want in cases:
                t0 = time.monotonic()
                a = Agent(env)
                domain, ex, a.obs = start(env, short)
                try:
                    play(a)
                    if end:
                        a.act(end)
                    got = env.evaluate()
                except Stuck as e:
                    got = f"stuck: {e}"
                ok = got == want
                bad += not ok
                rows.append({"task": ex["id"], "domain": domain, "case": label, "want": want, "got": got,
                             "steps": env._step_no, "s": round(time.monotonic() - t0, 1)})
                print(f"{'ok ' if ok else 'BAD'} {domain:18} {short} {label:36} want {want} got {got} "
                      f"({env._step_no} steps, {time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        env.close()
    tasks = {r["task"] for r in rows}
    print(json.dumps({"tasks": len(tasks), "cases": len(rows), "mismatches": bad,
                      "solved_and_unsolved": sum(1 for t in tasks if {r["want"] for r in rows if r["task"] == t} == {0.0, 1.0})}))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
