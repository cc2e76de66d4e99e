"""The structured observation through the Python client: info carries the
accessibility tree, and actions may target its elements."""

import pytest

import shinken


def test_tree_in_info_and_element_click(server):
    spec = shinken.Client(server.url, token=server.token).spec()
    if not (spec.get("observation") or {}).get("a11y"):
        pytest.skip("the server's sandboxes have no accessibility tree")
    with shinken.Env(server.url, task="mousepad-write-note", token=server.token,
                     observe={"a11y": "tree"}) as e:
        _, info = e.reset()
        assert info["tree_text"].startswith('app: "mousepad"')
        assert len(info["tree"]) == 32 and info["a11y"]["rev"] >= 1
        menu = next(el for el in info["elements"] if el["role"] == "menu" and el.get("name") == "File")
        _, _, _, _, info = e.step({"verb": "click", "target": {"kind": "element_ref", "ref": menu["id"]}})
        assert info.get("error") is None
        assert any(el.get("name") == "Save As..." for el in info["elements"]), info["tree_text"]
        _, _, _, _, info = e.step({"verb": "click", "target": {"kind": "element_ref", "ref": "e99999"}})
        assert isinstance(info["error"], shinken.StaleElementRef)


def test_set_of_mark(server):
    spec = shinken.Client(server.url, token=server.token).spec()
    if not (spec.get("observation") or {}).get("som"):
        pytest.skip("the server's sandboxes have no accessibility tree")
    with shinken.Env(server.url, task="mousepad-write-note", token=server.token,
                     observe={"som": True}, obs_mode="bytes") as e:
        frame, info = e.reset()
        assert frame[:8] == b"\x89PNG\r\n\x1a\n"
        marks = info["marks"]
        assert [m["n"] for m in marks] == list(range(1, len(marks) + 1)) and marks, marks
        file_menu = next(m for m in marks if m["role"] == "menu" and m.get("name") == "File")
        _, _, _, _, info = e.step({"verb": "click", "target": {"kind": "mark", "ref": str(file_menu["n"])}})
        assert info.get("error") is None
        assert any(el.get("name") == "Save As..." for el in info["elements"]), info["tree_text"]
        _, _, _, _, info = e.step({"verb": "click", "target": {"kind": "mark", "ref": "999"}})
        assert isinstance(info["error"], shinken.StaleElementRef)
