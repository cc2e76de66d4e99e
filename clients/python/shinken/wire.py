"""Protocol-1 wire encoding: msgpack bodies and the request maps.

Each builder writes its map's keys in the Go struct's field order
(envserver/api/api.go, aci/aci.go) and leaves out exactly what Go's
``omitempty`` leaves out, so the bytes equal the golden files Go encodes
(envserver/api/testdata/golden). The server decodes strictly — an unknown field
is ``bad_request`` — so builders reject unknown keys before anything is sent.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import msgpack

from .errors import BadRequest

PROTOCOL = 1
CONTENT_TYPE = "application/msgpack"

# aci.Action fields in Go order, with their wire kind.
_ACTION_FIELDS = (
    ("verb", "str!"), ("x", "float?"), ("y", "float?"), ("target", "target?"),
    ("button", "str"), ("text", "str"), ("keys", "str"), ("dx", "int"), ("dy", "int"),
    ("to", "target?"), ("duration_ms", "int"), ("ms", "int"), ("app", "str"),
    ("args", "strs"), ("window_id", "int"), ("modifiers", "strs"),
)
_ACTION_KEYS = frozenset(k for k, _ in _ACTION_FIELDS)
_OBSERVE_FIELDS = (("format", "str"), ("max_long_edge", "int"), ("quality", "int"),
                   ("scope", "str"))
_OBSERVE_KEYS = frozenset(k for k, _ in _OBSERVE_FIELDS)
_TOKENS_KEYS = frozenset(("prompt_ids", "response_ids", "response_logprobs", "finish_reason"))


def pack(obj: Any) -> bytes:
    """Encodes obj as msgpack: str as str, bytes as bin, ints compact, floats double."""
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Decodes one msgpack value (bin → bytes, str → str, timestamps → msgpack.Timestamp)."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def _int(name: str, v: Any) -> int:
    if isinstance(v, bool):
        raise BadRequest(f"{name}: want an integer, got bool")
    if isinstance(v, float):
        if not v.is_integer():
            raise BadRequest(f"{name}: want an integer, got {v}")
        return int(v)
    try:
        return int(v.__index__())  # int, numpy integers
    except (AttributeError, TypeError):
        raise BadRequest(f"{name}: want an integer, got {type(v).__name__}") from None


def _float(name: str, v: Any) -> float:
    if isinstance(v, bool):
        raise BadRequest(f"{name}: want a number, got bool")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise BadRequest(f"{name}: want a number, got {type(v).__name__}") from None
    if math.isnan(f) or math.isinf(f):
        raise BadRequest(f"{name}: want a finite number, got {f}")
    return f


def _str(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise BadRequest(f"{name}: want a string, got {type(v).__name__}")
    return v


def _strs(name: str, v: Any) -> List[str]:
    if isinstance(v, str) or not isinstance(v, Iterable):
        raise BadRequest(f"{name}: want a list of strings")
    return [_str(name, s) for s in v]


def target(v: Any, name: str = "target") -> Dict[str, Any]:
    """Normalizes a target: {kind, x, y}, {kind: "element_ref", ref: "e12"}
    (an element of the observation's accessibility tree), {kind: "mark",
    ref: "3"} (mark 3 of the last Set-of-Mark observation) or an (x, y)
    pixel pair."""
    if isinstance(v, Mapping) and v.get("kind") in ("element_ref", "mark"):
        kind = v["kind"]
        if set(v) - {"kind", "ref"}:
            raise BadRequest(f"{name}: {kind} takes kind and ref only")
        ref = v.get("ref")
        if kind == "mark" and isinstance(ref, int) and not isinstance(ref, bool):
            ref = str(ref)
        return {"kind": kind, "x": 0.0, "y": 0.0, "ref": _str(name + ".ref", ref)}
    if isinstance(v, Mapping):
        extra = set(v) - {"kind", "x", "y"}
        if extra:
            raise BadRequest(f"{name}: unknown field(s) {sorted(extra)}")
        return {"kind": _str(name + ".kind", v.get("kind", "point_px")),
                "x": _float(name + ".x", v.get("x")), "y": _float(name + ".y", v.get("y"))}
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return {"kind": "point_px", "x": _float(name + ".x", v[0]), "y": _float(name + ".y", v[1])}
    raise BadRequest(f"{name}: want {{kind, x, y}} or an (x, y) pair")


def action(a: Mapping[str, Any]) -> Dict[str, Any]:
    """Normalizes one typed action dict into aci.Action's wire map.

    Numbers are coerced to the Go field's kind (x/y/target floats, dx/dy/ms
    ints); zero values of omitempty fields are dropped as Go drops them. The
    verb itself is checked by the server (unknown_verb), not here.
    """
    if not isinstance(a, Mapping):
        raise BadRequest(f"action: want a dict, got {type(a).__name__}")
    extra = set(a) - _ACTION_KEYS
    if extra:
        raise BadRequest(f"action: unknown field(s) {sorted(extra)}")
    if "verb" not in a:
        raise BadRequest("action: missing verb")
    out: Dict[str, Any] = {}
    for key, kind in _ACTION_FIELDS:
        v = a.get(key)
        if v is None:
            continue
        if kind == "str!":
            out[key] = _str(key, v)
        elif kind == "float?":
            out[key] = _float(key, v)
        elif kind == "target?":
            out[key] = target(v, key)
        elif kind == "str":
            if _str(key, v):
                out[key] = v
        elif kind == "int":
            n = _int(key, v)
            if n:
                out[key] = n
        elif kind == "strs":
            s = _strs(key, v)
            if s:
                out[key] = s
    return out


def observe_map(o: Any) -> Optional[Dict[str, Any]]:
    """Normalizes an observe request: a dict of aci.Observe fields, or a format string.

    The fields this module knows are checked and written in Go order; any
    other field passes through as given (the server decodes strictly and
    answers bad_request for one it does not know), so a newer server's
    observe options need no client change.
    """
    if o is None:
        return None
    if isinstance(o, str):
        o = {"format": o}
    if not isinstance(o, Mapping):
        raise BadRequest("observe: want a dict or a format string")
    out: Dict[str, Any] = {}
    for key, kind in _OBSERVE_FIELDS:
        v = o.get(key)
        if v is None:
            continue
        v = _str(key, v) if kind == "str" else _int(key, v)
        if v:
            out[key] = v
    for key, v in o.items():
        if key not in _OBSERVE_KEYS and v is not None:
            out[_str("observe field", key)] = v
    return out


def coords(c: Any) -> Any:
    """Normalizes a coordinate space: screen|frame|norm|norm1000, or {w, h}
    (pixels of a w x h image covering the delivered frame)."""
    if isinstance(c, str):
        return c
    if isinstance(c, Mapping):
        extra = set(c) - {"w", "h"}
        if extra:
            raise BadRequest(f"coords: unknown field(s) {sorted(extra)}")
        # Keys in the order the server's encoder writes maps (sorted).
        return {"h": _int("coords.h", c.get("h")), "w": _int("coords.w", c.get("w"))}
    if isinstance(c, (tuple, list)) and len(c) == 2:
        return {"h": _int("coords.h", c[1]), "w": _int("coords.w", c[0])}
    raise BadRequest("coords: want screen|frame|norm|norm1000 or {w, h}")


def _ids(name: str, v: Any) -> List[int]:
    return [] if v is None else [_int(name, i) for i in v]


def tokens(t: Any) -> Optional[Dict[str, Any]]:
    """Normalizes token ids (lists, tuples or numpy arrays) into api.Tokens' wire map."""
    if t is None:
        return None
    if not isinstance(t, Mapping):
        raise BadRequest("tokens: want a dict with prompt_ids and response_ids")
    extra = set(t) - _TOKENS_KEYS
    if extra:
        raise BadRequest(f"tokens: unknown field(s) {sorted(extra)}")
    out: Dict[str, Any] = {
        "prompt_ids": _ids("prompt_ids", t.get("prompt_ids")),
        "response_ids": _ids("response_ids", t.get("response_ids")),
    }
    lp = t.get("response_logprobs")
    if lp is not None and len(lp):
        out["response_logprobs"] = [_float("response_logprobs", f) for f in lp]
    fr = t.get("finish_reason")
    if fr:
        out["finish_reason"] = _str("finish_reason", fr)
    return out


def _with_observe_have(req: Dict[str, Any], obs: Optional[Dict[str, Any]],
                       have: Optional[Sequence[str]]) -> Dict[str, Any]:
    if obs is not None:  # a pointer in Go: present even when empty
        req["observe"] = obs
    if have:
        req["have"] = list(have)
    return req


def reset_env(task: str, env_id: Optional[str] = None, seed: Optional[int] = None, *,
              coords_: Any = None, max_steps: Optional[int] = None,
              checkpoint: Optional[str] = None, split: Optional[str] = None,
              screen: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """One api.ResetEnv: a new lease (env_id None) or a restart of env_id;
    ``seed`` and ``split`` ("train", the server's default, or "test") pick
    the task family's instance (no seed: the server draws one in the split
    and reports it in the reply's info); the server answers bad_request for
    a split it does not know or a family without a test split;
    ``coords_`` is the env's default coordinate space for its steps;
    ``max_steps`` lowers the episode's step budget. With ``checkpoint`` the
    episode starts from that named checkpoint (``task`` may be "" or must
    be the checkpoint's). ``screen`` (w, h) asks for one of the sizes the
    server lists in ``spec.observation.screens``."""
    e: Dict[str, Any] = {}
    if env_id:
        e["env_id"] = _str("env_id", env_id)
    e["task"] = _str("task", task or "")
    if checkpoint:
        e["checkpoint"] = _str("checkpoint", checkpoint)
    if seed is not None:
        e["seed"] = _int("seed", seed)
    if split:
        e["split"] = _str("split", split)
    if coords_ is not None:
        e["coords"] = coords(coords_)
    if max_steps:
        e["max_steps"] = _int("max_steps", max_steps)
    if screen is not None:
        w, h = screen
        e["screen"] = {"w": _int("screen w", w), "h": _int("screen h", h)}
    return e


def reset_request(envs: Sequence[Dict[str, Any]], observe: Any = None,
                  have: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """api.ResetRequest from reset_env maps."""
    return _with_observe_have({"envs": list(envs)}, observe_map(observe), have)


def step_env(env_id: str, act: Any = None, *, text: Optional[str] = None,
             dialect: Optional[str] = None, toks: Any = None, coords_: Any = None,
             request_id: Optional[str] = None) -> Dict[str, Any]:
    """One api.StepEnv. act is a typed action dict or a list of them; text is
    raw model output that the server parses with dialect; coords_ the
    coordinate space of every point in them; request_id names the step so a
    resend replays its reply instead of running it again (AsyncClient.step
    fills it in)."""
    s: Dict[str, Any] = {"env_id": _str("env_id", env_id)}
    if text is not None:
        if act is not None:
            raise BadRequest("step: give an action or model text, not both")
        s["text"] = _str("text", text)
        if dialect:
            s["dialect"] = _str("dialect", dialect)
    elif isinstance(act, Mapping):
        s["action"] = action(act)
    elif isinstance(act, (list, tuple)):
        if not act:
            raise BadRequest("step: empty action list")
        s["actions"] = [action(a) for a in act]
    else:
        raise BadRequest(f"step: want an action dict, a list of them or model text; got {type(act).__name__}")
    if coords_ is not None:
        s["coords"] = coords(coords_)
    t = tokens(toks)
    if t is not None:
        s["tokens"] = t
    if request_id:
        s["request_id"] = _str("request_id", request_id)
    return s


def new_request_id() -> str:
    """A fresh step request_id: 96 random bits, hex."""
    return os.urandom(12).hex()


TURN_KEYS = frozenset(("action", "actions", "text", "dialect", "tokens", "coords"))


# Dialects whose numbers are pixels of the image the model saw.
PIXEL_DIALECTS = frozenset(("pyautogui", "xml", "json"))


def reshapes(observe: Any) -> bool:
    """Whether an observe request delivers something other than the whole
    screen at full size (a downscale or a crop)."""
    o = observe if isinstance(observe, Mapping) else {}
    return bool(o.get("max_long_edge")) or (o.get("scope") or "screen") != "screen"


def turn(env_id: str, act: Any, dialect: Optional[str] = None, toks: Any = None,
         coords_: Any = None, reshaped: bool = False) -> Dict[str, Any]:
    """One api.StepEnv from an env's action, in any of the forms a policy emits:

    * a typed action dict ({"verb": ...}) or a list of them;
    * a str: model text, parsed on the server with ``dialect``;
    * a turn dict carrying everything of one turn, so it passes through any
      Gymnasium wrapper as the action itself: {"action" | "actions" | "text",
      "dialect"?, "tokens"?, "coords"?}. Its fields override the defaults.

    ``reshaped`` says the env's frames are downscaled or cropped: a turn that
    names no coordinate space is then read in frame pixels ("frame") when it
    is a typed action or pixel-dialect text, so the server maps it back to
    the screen; other dialects keep their family's own space.
    """
    st = _turn(env_id, act, dialect, toks, coords_)
    if reshaped and "coords" not in st and ("text" not in st or st.get("dialect") in PIXEL_DIALECTS):
        st["coords"] = "frame"
    return st


def _turn(env_id: str, act: Any, dialect: Optional[str], toks: Any, coords_: Any) -> Dict[str, Any]:
    if isinstance(act, Mapping) and "verb" not in act:
        extra = set(act) - TURN_KEYS
        if extra:
            raise BadRequest(f"action: unknown field(s) {sorted(extra)} (a typed action needs a verb; "
                             f"a turn dict has {sorted(TURN_KEYS)})")
        given = [k for k in ("action", "actions", "text") if act.get(k) is not None]
        if len(given) != 1:
            raise BadRequest("turn: want exactly one of action, actions, text")
        d = act.get("dialect") or dialect
        t = act.get("tokens") if act.get("tokens") is not None else toks
        c = act.get("coords") if act.get("coords") is not None else coords_
        if given[0] == "text":
            return step_env(env_id, text=act["text"], dialect=d, toks=t, coords_=c)
        return step_env(env_id, act[given[0]], toks=t, coords_=c)
    if isinstance(act, str):
        return step_env(env_id, text=act, dialect=dialect, toks=toks, coords_=coords_)
    return step_env(env_id, act, toks=toks, coords_=coords_)


def step_request(steps: Sequence[Dict[str, Any]], observe: Any = None,
                 have: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """api.StepRequest from step_env maps."""
    return _with_observe_have({"steps": list(steps)}, observe_map(observe), have)


def observe_request(env_ids: Sequence[str], observe: Any = None, have: Optional[Sequence[str]] = None,
                    windows: bool = False) -> Dict[str, Any]:
    """api.ObserveRequest: each env's observation now, without a step."""
    r: Dict[str, Any] = {"env_ids": [_str("env_id", e) for e in env_ids]}
    if windows:
        r["windows"] = True
    return _with_observe_have(r, observe_map(observe), have)


def fork_request(env_id: str, n: int, observe: Any = None,
                 have: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """api.ForkRequest: n new envs carrying env_id's state."""
    return _with_observe_have({"env_id": _str("env_id", env_id), "n": _int("n", n)},
                              observe_map(observe), have)


def checkpoint_fork_request(checkpoint: str, n: int, observe: Any = None,
                            have: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """api.ForkRequest: n new envs starting from a named checkpoint."""
    return _with_observe_have({"checkpoint": _str("checkpoint", checkpoint), "n": _int("n", n)},
                              observe_map(observe), have)


def checkpoint_request(env_id: str) -> Dict[str, Any]:
    """api.CheckpointRequest: snapshot env_id's live episode."""
    return {"env_id": _str("env_id", env_id)}


def exec_request(env_id: str, argv: Optional[Sequence[str]] = None, shell: Optional[str] = None, *,
                 stdin: Optional[bytes] = None, cwd: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None) -> Dict[str, Any]:
    """api.ExecRequest: one command in env_id's sandbox, exactly one of argv
    and shell; ``env`` maps names to values."""
    if (argv is None) == (shell is None):
        raise BadRequest("exec: give exactly one of argv and shell")
    r: Dict[str, Any] = {"env_id": _str("env_id", env_id)}
    if argv is not None:
        r["argv"] = _strs("argv", argv)
    else:
        r["shell"] = _str("shell", shell)
    if stdin is not None:
        if isinstance(stdin, str):
            stdin = stdin.encode()
        r["stdin"] = bytes(stdin)
    if cwd is not None:
        r["cwd"] = _str("cwd", cwd)
    if env:
        r["env"] = [f"{_str('env key', k)}={_str('env value', v)}" for k, v in env.items()]
    if timeout_ms is not None:
        r["timeout_ms"] = int(timeout_ms)
    return r


def file_put_request(env_id: str, path: str, data: bytes, mode: Optional[int] = None, *,
                     kind: str = "", offset: int = 0) -> Dict[str, Any]:
    """api.FilePutRequest, with the data's sha256 for the server to check:
    kind "tar" for a directory's archive, offset for a file's next chunk."""
    import hashlib

    if isinstance(data, str):
        data = data.encode()
    r: Dict[str, Any] = {"env_id": _str("env_id", env_id), "path": _str("path", path), "data": bytes(data),
                         "sha256": hashlib.sha256(data).hexdigest()}
    if mode is not None:
        r["mode"] = int(mode)
    if kind:
        r["kind"] = _str("kind", kind)
    if offset:
        r["offset"] = int(offset)
    return r


def close_request(env_ids: Sequence[str]) -> Dict[str, Any]:
    """api.CloseRequest."""
    return {"env_ids": [_str("env_id", e) for e in env_ids]}
