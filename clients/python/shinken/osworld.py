"""shinken.osworld: OSWorld's ``DesktopEnv`` on a Shinken envserver.

OSWorld's harness (its run scripts, the single-example loop, the agents in
its ``mm_agents``) drives ``desktop_env.desktop_env.DesktopEnv``. This class
has the same surface, so the harness runs on Shinken by changing one import::

    from shinken.osworld import DesktopEnv

    env = DesktopEnv(action_space="pyautogui", url="http://127.0.0.1:8700")
    obs = env.reset(task_config=example)          # an OSWorld task JSON
    obs, reward, done, info = env.step("pyautogui.click(640, 400)", 0.5)
    score = env.evaluate()

The server plays OSWorld's tasks once they are imported into its task
directory (``envserver tasks import-osworld``, docs/osworld.md): the
example with id ID is the Shinken task ``osworld-ID``. What differs from
OSWorld's VM, and why (docs/osworld.md, "The DesktopEnv client"):

- ``step`` returns when the screen has settled on the action's effect
  instead of sleeping: ``pause`` (seconds) is the settle's upper bound, not
  a sleep; 0 keeps the server's bound.
- ``evaluate`` ends the episode (an agent that never said DONE or FAIL is
  scored as it stands, as OSWorld scores it) and returns the verifier's
  score. A verdict that is not a score (the verifier failed on the task's
  clean state too, the sandbox died) raises its typed error instead of
  returning a number a harness would average.
- ``screen_size`` is the screen the agent is told of: screenshots, the
  accessibility tree's boxes and the agent's coordinates are scaled between
  it and the server's screen.
- The accessibility tree is OSWorld's XML form built from Shinken's tree of
  the focused application (``observe.a11y``): only its listed elements, each
  showing and visible. ``terminal`` is None (Shinken's xterm exposes no
  text). ``controller.end_recording`` writes one frame a step as mp4 when
  ``ffmpeg`` is on PATH, and nothing (with a warning) otherwise.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Tuple

from .agent import DROP_EXITS
from .client import Client
from .errors import BadRequest, NotFound, ShinkenError, error_from_wire

__all__ = ["DesktopEnv", "Controller", "task_id", "accessibility_xml"]

log = logging.getLogger("shinken.osworld")

#: OSWorld's namespaces for the accessibility tree's attributes (Ubuntu).
NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
}
for _p, _u in NS.items():
    ET.register_namespace(_p, _u)

#: OSWorld's home, which the importer writes as ~ in instructions.
OSWORLD_HOME = "/home/user"
#: The special actions of both of OSWorld's action spaces.
SPECIAL = ("WAIT", "FAIL", "DONE")
#: A recording keeps at most this many distinct frames.
MAX_RECORDED_FRAMES = 2000
#: The settle's upper bound the server accepts (docs/api.md, "Settle").
MAX_SETTLE_MS = 10000


def task_id(osworld_id: str) -> str:
    """The Shinken task of an OSWorld task id, as the importer names it:
    ``osworld-`` and the id's ASCII letters, digits, ``-`` and ``_``."""
    s = "".join(c for c in str(osworld_id) if c.isascii() and (c.isalnum() or c in "-_"))
    if not s or len(s) > 100:
        raise BadRequest(f"OSWorld task id {osworld_id!r} names no Shinken task")
    return "osworld-" + s


def accessibility_xml(elements: Optional[List[Dict[str, Any]]], app: str = "",
                      scale: Tuple[float, float] = (1.0, 1.0)) -> Optional[str]:
    """OSWorld's XML accessibility tree from Shinken's elements (``obs.elements``
    of ``observe.a11y: tree``): a ``desktop-frame`` holding the application,
    one XML element per listed element, its tag the role (spaces as ``-``),
    ``name``, states under ``st:``, the box under ``cp:screencoord`` and
    ``cp:size`` (scaled by ``scale``), the value as the text. None when there
    is no tree."""
    if elements is None:
        return None
    root = ET.Element("desktop-frame", {"name": "main"})
    top = ET.SubElement(root, "application", {"name": app or ""})
    nodes: Dict[str, ET.Element] = {}
    for e in elements:
        parent = nodes.get(e.get("parent") or "", top)
        tag = (e.get("role") or "unknown").strip().replace(" ", "-") or "unknown"
        attrs = {"name": e.get("name") or ""}
        for st in _states(e.get("states") or ()):
            attrs[f"{{{NS['st']}}}{st}"] = "true"
        box = e.get("box") or {}
        if box:
            sx, sy = scale
            attrs[f"{{{NS['cp']}}}screencoord"] = str((round(box.get("x", 0) * sx), round(box.get("y", 0) * sy)))
            attrs[f"{{{NS['cp']}}}size"] = str((round(box.get("w", 0) * sx), round(box.get("h", 0) * sy)))
        if e.get("value") is not None:
            attrs[f"{{{NS['val']}}}value"] = str(e["value"])
        node = ET.SubElement(parent, tag, attrs)
        if e.get("value"):
            node.text = str(e["value"])
        if e.get("id"):
            nodes[e["id"]] = node
    return ET.tostring(root, encoding="unicode")


def _states(names: Any) -> List[str]:
    """OSWorld's state names (AT-SPI's, lower case) for Shinken's shown states.
    Every listed element is showing and visible; it is enabled and sensitive
    unless Shinken says "disabled"."""
    names = set(names)
    out = ["showing", "visible"]
    if "disabled" not in names:
        out += ["enabled", "sensitive"]
    for n in sorted(names):
        out += {"checked": ["checkable", "checked"], "unchecked": ["checkable"],
                "expanded": ["expandable", "expanded"], "collapsed": ["expandable"],
                "read-only": ["read-only"], "disabled": []}.get(n, [n])
    return out


class Controller:
    """What OSWorld's harness calls on ``env.controller``: the last
    observation, the screen's size and platform, and the recording."""

    def __init__(self, env: "DesktopEnv"):
        self._env = env
        self._recording: Optional[List[bytes]] = None  # each step's screenshot, as kept
        self._frames: Dict[bytes, bytes] = {}  # the distinct screenshots: one copy of each

    def get_screenshot(self) -> Optional[bytes]:
        """The last observation's screenshot (PNG bytes); Shinken observes
        with each reset and step, so this takes no new capture."""
        return (self._env._last or {}).get("screenshot")

    def get_accessibility_tree(self) -> Optional[str]:
        return (self._env._last or {}).get("accessibility_tree")

    def get_terminal_output(self) -> Optional[str]:
        return None

    def get_vm_screen_size(self) -> Dict[str, int]:
        w, h = self._env.screen_size
        return {"width": w, "height": h}

    def get_vm_platform(self) -> str:
        return "Linux"

    def start_recording(self) -> None:
        """Starts keeping each observation's screenshot for end_recording."""
        self._recording, self._frames = [], {}
        shot = self.get_screenshot()
        if shot:
            self.record(shot)

    def record(self, png: bytes) -> None:
        if self._recording is None:
            return
        kept = self._frames.get(png)
        if kept is None:
            if len(self._frames) >= MAX_RECORDED_FRAMES:
                log.warning("recording: %d distinct frames kept; later ones are not", MAX_RECORDED_FRAMES)
                return
            kept = self._frames[png] = png
        self._recording.append(kept)

    def end_recording(self, dest: str) -> bool:
        """Writes the recording (one frame a step, 1 fps) to ``dest`` as mp4
        with ffmpeg; False, with a warning, when ffmpeg is not on PATH or
        nothing was recorded. The recording ends either way."""
        rec = self._recording
        self._recording, self._frames = None, {}
        if not rec:
            log.warning("recording: nothing recorded; %s not written", dest)
            return False
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            log.warning("recording: ffmpeg is not on PATH; %s not written", dest)
            return False
        data = b"".join(rec)
        subprocess.run([ffmpeg, "-loglevel", "error", "-y", "-f", "image2pipe", "-framerate", "1", "-i", "-",
                        "-c:v", "libx264", "-pix_fmt", "yuv420p", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", dest],
                       input=data, check=True, timeout=120)
        return True


class DesktopEnv:
    """OSWorld's DesktopEnv on a Shinken envserver (see the module doc).

    The constructor takes OSWorld's arguments; those naming a VM
    (``provider_name``, ``region``, ``path_to_vm``, ``snapshot_name``,
    ``cache_dir``, ``headless``) are accepted and unused: the server's pool
    is the VM. ``url``/``token`` name the server (default $SHINKEN_URL and
    $SHINKEN_TOKEN). ``screen_size`` None is the server's screen.
    """

    def __init__(self, provider_name: str = "shinken", region: Optional[str] = None,
                 path_to_vm: Optional[str] = None, snapshot_name: str = "init_state",
                 action_space: str = "computer_13", cache_dir: str = "cache",
                 screen_size: Optional[Tuple[int, int]] = None, headless: bool = True,
                 require_a11y_tree: bool = True, require_terminal: bool = False, os_type: str = "Ubuntu", *,
                 url: Optional[str] = None, token: Optional[str] = None, timeout: float = 300.0,
                 client: Optional[Client] = None, **_unused: Any):
        if action_space not in ("computer_13", "pyautogui"):
            raise BadRequest(f"action_space {action_space!r}: want 'computer_13' or 'pyautogui'")
        self.action_space = action_space
        self.require_a11y_tree = require_a11y_tree
        self.require_terminal = require_terminal
        self.client = client or Client(url, token, timeout=timeout)
        self._own = client is None
        spec = self.client.spec()
        self._tasks = {t.get("id") for t in spec.get("tasks") or ()}
        ob = spec.get("observation") or {}
        #: The server's default settle ({first_ms, quiet_ms, max_ms}), which
        #: a step's pause bounds.
        self.settle: Dict[str, int] = dict((ob.get("default") or {}).get("settle") or {})
        sc = ob.get("screen") or {}
        self.server_screen: Tuple[int, int] = (int(sc.get("w") or 0), int(sc.get("h") or 0))
        self.screen_size: Tuple[int, int] = tuple(screen_size) if screen_size else self.server_screen  # type: ignore
        if not all(self.screen_size):
            raise BadRequest("screen_size: the server names no screen; pass screen_size")
        self.controller = Controller(self)
        self.env_id: Optional[str] = None
        self.episode_id: Optional[str] = None
        self.task_id: Optional[str] = None
        self.instruction: Optional[str] = None
        self.evaluator: Optional[Dict[str, Any]] = None
        self.action_history: List[Any] = []
        self._traj_no, self._step_no = -1, 0
        self._task: Optional[str] = None
        self._last: Optional[Dict[str, Any]] = None
        self._ended: Optional[Tuple[float, str, Dict[str, Any]]] = None  # (reward, exit_reason, verdict)

    # -- OSWorld's surface --------------------------------------------------------------

    @property
    def vm_platform(self) -> str:
        return self.controller.get_vm_platform()

    @property
    def vm_screen_size(self) -> Dict[str, int]:
        return self.controller.get_vm_screen_size()

    def reset(self, task_config: Optional[Dict[str, Any]] = None, seed: Any = None,
              options: Any = None) -> Dict[str, Any]:
        """Starts the task ``task_config`` (an OSWorld task JSON; None: the
        last one again) in a fresh sandbox state and returns the first
        observation."""
        if task_config is not None:
            name = task_id(task_config.get("id", ""))
            if name not in self._tasks:
                raise NotFound(f"task {name} (OSWorld {task_config.get('id')!r}) is not served: import it with "
                               "`envserver tasks import-osworld` into the server's task directory")
            self._task, self.task_id = name, task_config.get("id")
            self.instruction = task_config.get("instruction")
            self.evaluator = task_config.get("evaluator")
        elif self._task is None:
            raise BadRequest("reset: Shinken plays tasks; the first reset needs task_config")
        self._traj_no += 1
        self._step_no = 0
        self.action_history.clear()
        self._ended = None
        env = {"task": self._task, "coords": self._coords()}
        if self.env_id:
            env["env_id"] = self.env_id
        slot = self._one(self.client.reset([env], self._observe()))
        self.env_id, self.episode_id = slot.env_id, slot.episode_id
        served = slot.info.get("instruction")
        if self.instruction is None:
            self.instruction = served
        elif served is not None and served != self.instruction.replace(OSWORLD_HOME + "/", "~/"):
            # OSWorld's set has ids under two domains with different tasks;
            # the server holds one of them.
            bad, self._task = self._task, None
            raise NotFound(f"task {bad} on the server is another task than this example (same id, "
                           f"instruction {served!r})")
        return self._observation(slot)

    def step(self, action: Any, pause: float = 0.5) -> Tuple[Dict[str, Any], float, bool, Dict[str, Any]]:
        """Runs one action: pyautogui code (``pyautogui`` space), a
        computer_13 dict (``computer_13``), or WAIT, FAIL, DONE. Returns
        (observation, reward, done, info); the reward is 0 until the step
        that ends the episode, which carries the verifier's score."""
        if self.env_id is None:
            raise BadRequest("step before reset")
        if self._ended is not None:
            raise error_from_wire({"code": "episode_over", "message": "the episode has ended; reset first"},
                                  env_id=self.env_id)
        self._step_no += 1
        self.action_history.append(action)
        special = action if isinstance(action, str) and action.strip() in SPECIAL else (
            action.get("action_type") if isinstance(action, dict) else None)
        text = json.dumps(action) if isinstance(action, dict) else str(action)
        settle = int(min(max(float(pause or 0), 0.0) * 1000, MAX_SETTLE_MS)) if pause else 0
        slot = self._one(self.client.step([{"env_id": self.env_id, "text": text, "dialect": "osworld",
                                             "coords": self._coords()}], self._observe(settle)))
        info: Dict[str, Any] = {}
        if special == "FAIL":
            info["fail"] = True
        elif special == "DONE":
            info["done"] = True
        err = slot.info.get("error")
        if isinstance(err, dict):
            info["error"] = {"code": err.get("code"), "message": err.get("message")}
        done = bool(slot.terminated or slot.truncated)
        reward = 0.0
        if done:
            reason = slot.info.get("exit_reason") or ""
            self._ended = (slot.reward, reason, slot.info.get("verdict") or {})
            info["exit_reason"] = reason
            if slot.reward is not None and reason not in DROP_EXITS:
                reward = float(slot.reward)
        info["step"] = self._step_no
        info["episode_id"] = self.episode_id
        return self._observation(slot), reward, done, info

    def evaluate(self) -> float:
        """The episode's score, as OSWorld's evaluate gives it. An episode
        still running is ended first (a DONE step: scored as it stands)."""
        if self.env_id is None:
            raise BadRequest("evaluate before reset")
        if self._ended is None:
            self.step("DONE", 0)
        assert self._ended is not None
        reward, reason, verdict = self._ended
        if reward is None or reason in DROP_EXITS:
            raise error_from_wire({"code": reason, "message": f"the episode ended {reason}: not a score ({verdict})"},
                                  env_id=self.env_id)
        return float(reward)

    def render(self, mode: str = "rgb_array") -> Optional[bytes]:
        if mode != "rgb_array":
            raise ValueError(f"Unsupported render mode: {mode}")
        return self.controller.get_screenshot()

    def close(self) -> None:
        """Returns the env to the server (and closes a client this env made)."""
        if self.env_id:
            try:
                self.client.close_envs([self.env_id])
            except ShinkenError as e:
                log.warning("close %s: %s", self.env_id, e)
            self.env_id = None
        if self._own:
            self.client.close()
            self._own = False

    def __enter__(self) -> "DesktopEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- inside ---------------------------------------------------------------------------

    def _scaled(self) -> bool:
        return tuple(self.screen_size) != tuple(self.server_screen)

    def _coords(self) -> Any:
        """The agent's coordinates: screen pixels, or pixels of screen_size."""
        if self._scaled():
            return {"w": int(self.screen_size[0]), "h": int(self.screen_size[1])}
        return "screen"

    def _observe(self, settle_ms: int = 0) -> Dict[str, Any]:
        o: Dict[str, Any] = {"format": "png"}
        if self.require_a11y_tree:
            o["a11y"] = "tree"
        if settle_ms > 0:
            # The server's settle with the pause as its ceiling; each bound
            # given, as an absent one means 0, not the server's.
            o["settle"] = {k: min(int(self.settle.get(k, v)), settle_ms)
                           for k, v in (("first_ms", 200), ("quiet_ms", 300))}
            o["settle"]["max_ms"] = settle_ms
        return o

    def _one(self, slots: List[Any]) -> Any:
        s = slots[0]
        if s.error is not None:
            raise s.error
        return s

    def _observation(self, slot: Any) -> Dict[str, Any]:
        png = slot.frame.data if slot.frame is not None else None
        sx = sy = 1.0
        if png is not None and self._scaled():
            png = _resize_png(png, self.screen_size)
            sx = self.screen_size[0] / self.server_screen[0]
            sy = self.screen_size[1] / self.server_screen[1]
        tree = None
        if self.require_a11y_tree:
            a = (slot.obs or {}).get("a11y") or {}
            tree = accessibility_xml((slot.obs or {}).get("elements"), a.get("app") or "", (sx, sy))
        obs = {"screenshot": png, "accessibility_tree": tree, "terminal": None, "instruction": self.instruction}
        self._last = obs
        if png:
            self.controller.record(png)
        return obs


def _resize_png(png: bytes, size: Tuple[int, int]) -> bytes:
    from PIL import Image  # Debian's python3-pil, a dependency of the client

    im = Image.open(io.BytesIO(png))
    out = io.BytesIO()
    im.resize((int(size[0]), int(size[1])), Image.BILINEAR).save(out, format="PNG")
    return out.getvalue()

