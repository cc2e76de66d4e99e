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
