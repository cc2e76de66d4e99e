"""shinken.osworld without a server: the task names the importer gives and
the accessibility tree in OSWorld's XML form. The client against a real
server, driven by OSWorld's single-example loop, is
cmd/envserver's TestImportOSWorldEndToEnd."""

import ast
import xml.etree.ElementTree as ET

import pytest

from shinken.errors import BadRequest
from shinken.osworld import NS, accessibility_xml, task_id

ELEMENTS = [
    {"id": "e1", "role": "frame", "name": "Untitled 1 - Mousepad", "states": ["active"],
     "box": {"x": 0, "y": 0, "w": 1280, "h": 800}, "depth": 0},
    {"id": "e2", "role": "menu bar", "box": {"x": 0, "y": 20, "w": 1280, "h": 24}, "parent": "e1", "depth": 1},
    {"id": "e3", "role": "menu", "name": "File", "actions": ["Click"], "box": {"x": 0, "y": 20, "w": 40, "h": 24},
     "parent": "e2", "depth": 2},
    {"id": "e4", "role": "push button", "name": "Save", "states": ["disabled"],
     "box": {"x": 50, "y": 50, "w": 30, "h": 20}, "parent": "e1", "depth": 1},
    {"id": "e5", "role": "text", "value": "hello", "states": ["focused", "editable"],
     "box": {"x": 0, "y": 60, "w": 1280, "h": 700}, "parent": "e1", "depth": 1},
    {"id": "e6", "role": "check box", "name": "Wrap", "states": ["unchecked"],
     "box": {"x": 100, "y": 50, "w": 20, "h": 20}, "parent": "e1", "depth": 1},
]


def st(node, name):
    return node.get(f"{{{NS['st']}}}{name}")


def kept(node):
    """What OSWorld's agents keep of a node when they linearize the tree:
    showing, visible, enabled (or editable, expandable, checkable), named or
    with text, on screen with a size."""
    if st(node, "showing") != "true" or st(node, "visible") != "true":
        return False
    if not any(st(node, s) == "true" for s in ("enabled", "editable", "expandable", "checkable")):
        return False
    if not (node.get("name") or node.text):
        return False
    x, y = ast.literal_eval(node.get(f"{{{NS['cp']}}}screencoord", "(-1, -1)"))
    w, h = ast.literal_eval(node.get(f"{{{NS['cp']}}}size", "(-1, -1)"))
    return x >= 0 and y >= 0 and w > 0 and h > 0


def test_tree_in_osworlds_form():
    root = ET.fromstring(accessibility_xml(ELEMENTS, "mousepad"))
    assert root.tag == "desktop-frame"
    app = root.find("application")
    assert app is not None and app.get("name") == "mousepad"
    frame = app.find("frame")
    assert frame is not None and frame.get("name") == "Untitled 1 - Mousepad"
    menu = frame.find("menu-bar/menu")
    assert menu is not None and menu.get("name") == "File"
    text = frame.find("text")
    assert text.text == "hello" and st(text, "focused") == "true" and st(text, "editable") == "true"
    assert text.get(f"{{{NS['val']}}}value") == "hello"
    save = frame.find("push-button")
    assert st(save, "enabled") is None and st(save, "showing") == "true"
    wrap = frame.find("check-box")
    assert st(wrap, "checkable") == "true" and st(wrap, "checked") is None
    assert menu.get(f"{{{NS['cp']}}}screencoord") == "(0, 20)" and menu.get(f"{{{NS['cp']}}}size") == "(40, 24)"
    names = {(n.tag, n.get("name") or n.text) for n in root.iter() if kept(n)}
    # The disabled button and the unnamed menu bar are not kept; the rest are.
    assert names == {("frame", "Untitled 1 - Mousepad"), ("menu", "File"), ("text", "hello"), ("check-box", "Wrap")}


def test_tree_scaled_to_the_agents_screen():
    root = ET.fromstring(accessibility_xml(ELEMENTS, "mousepad", (1.5, 1.35)))
    menu = root.find("application/frame/menu-bar/menu")
    assert menu.get(f"{{{NS['cp']}}}screencoord") == "(0, 27)"
    assert menu.get(f"{{{NS['cp']}}}size") == "(60, 32)"


def test_no_tree():
    assert accessibility_xml(None) is None
    assert ET.fromstring(accessibility_xml([])).find("application") is not None


def test_hostile_names_stay_text():
    # An element name is the agent's to choose (a window title): it must
    # stay an attribute value, never XML structure.
    evil = [{"id": "e1", "role": "frame", "name": '"/><injected x="1', "value": "</text><x/>",
             "box": {"x": 0, "y": 0, "w": 1, "h": 1}}]
    root = ET.fromstring(accessibility_xml(evil))
    assert [n.tag for n in root.iter()] == ["desktop-frame", "application", "frame"]
    assert root.find("application/frame").get("name") == '"/><injected x="1'


@pytest.mark.parametrize("osworld_id,want", [
    ("bb5e4c0d-f964-439c-97b6-bdb9747de3f4", "osworld-bb5e4c0d-f964-439c-97b6-bdb9747de3f4"),
    ("../a b/c_d", "osworld-abc_d"),
    ("naïve", "osworld-nave"),
])
def test_task_id_as_the_importer_names_it(osworld_id, want):
    assert task_id(osworld_id) == want


@pytest.mark.parametrize("osworld_id", ["", "///", "é", "x" * 101])
def test_task_id_refused(osworld_id):
    with pytest.raises(BadRequest):
        task_id(osworld_id)


class _SpecOnly:
    """The one call DesktopEnv's constructor makes, answered as a server's
    /v1/spec would (the step path runs against a real server in
    cmd/envserver's TestImportOSWorldEndToEnd)."""

    def spec(self):
        return {"observation": {"default": {"format": "png", "settle": {"first_ms": 200, "quiet_ms": 300, "max_ms": 2000}},
                                "screen": {"w": 1280, "h": 800}}, "tasks": []}


def test_pause_bounds_the_servers_settle():
    from shinken.osworld import DesktopEnv

    env = DesktopEnv(client=_SpecOnly())
    # Every bound is sent: an absent first_ms is 0 on the server, which
    # would capture before the app drew the action.
    assert env._observe(2000)["settle"] == {"first_ms": 200, "quiet_ms": 300, "max_ms": 2000}
    assert env._observe(150)["settle"] == {"first_ms": 150, "quiet_ms": 150, "max_ms": 150}
    assert "settle" not in env._observe(0)
    assert env._observe(0)["a11y"] == "tree"
    assert env._coords() == "screen"
    env.screen_size = (1920, 1080)
    assert env._coords() == {"w": 1920, "h": 1080}
