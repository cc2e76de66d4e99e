"""The client against the golden wire files that envserver/api/golden_test.go
writes and checks: same bytes for requests, same meaning for replies."""

import base64
import datetime as dt
import json
import pathlib

import msgpack
import numpy as np
import pytest

import shinken
from shinken import wire
from shinken.client import parse_batch
from shinken.aenv import slot_info as _info
from shinken.frames import FrameCache

GOLDEN = pathlib.Path(__file__).resolve().parents[3] / "envserver" / "api" / "testdata" / "golden"
HASH_A = "0123456789abcdef0123456789abcdef"
HASH_B = "fedcba9876543210fedcba9876543210"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.msgpack"))


def load(name):
    return (GOLDEN / f"{name}.msgpack").read_bytes()


def as_json(v):
    """The JSON view of a decoded msgpack value: bytes → base64, times → RFC 3339."""
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_json(x) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, msgpack.Timestamp):
        return v.to_datetime()
    return v


def json_times(v):
    if isinstance(v, dict):
        return {k: json_times(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_times(x) for x in v]
    if isinstance(v, str) and len(v) >= 20 and v[4] == "-" and v[10] == "T":
        return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    return v


def test_golden_files_exist():
    want = {"reset_request", "step_request", "fork_request", "close_request", "close_reply",
            "reset_reply", "step_reply", "fork_reply", "error_reply", "spec", "trajectory", "error_codes",
            "error_faults"}
    missing = want - set(NAMES)
    assert not missing, f"golden files missing: {sorted(missing)} (run go test ./envserver/api -run Golden -update)"


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_bytes(name):
    """Decoding then re-encoding with the client's encoder gives Go's bytes."""
    data = load(name)
    assert wire.pack(wire.unpack(data)) == data


@pytest.mark.parametrize("name", NAMES)
def test_json_twin_agrees(name):
    """The .msgpack file and its .json twin say the same thing."""
    got = as_json(wire.unpack(load(name)))
    want = json_times(json.loads((GOLDEN / f"{name}.json").read_text()))
    assert got == want


def test_reset_request_built_identically():
    req = wire.reset_request(
        [wire.reset_env("xterm-hello-file", seed=7),
         wire.reset_env("xterm-hello-file", env_id="env-1", coords_="frame", max_steps=5),
         wire.reset_env("xterm-hello-file", screen=(1024, 768))],
        observe={"format": "png", "max_long_edge": 1024}, have=[HASH_A])
    assert wire.pack(req) == load("reset_request")


def test_step_request_built_identically():
    steps = [
        wire.step_env("env-1", {"verb": "click", "target": (200, 150.5), "button": "left"}, coords_="frame"),
        wire.step_env("env-2", [
            {"verb": "type_text", "text": "echo 'hello shinken' > ~/hello.txt"},
            {"verb": "key", "keys": "Return"},
            {"verb": "scroll", "x": 10, "y": 20, "dy": -3},
            {"verb": "drag", "target": {"kind": "point_norm", "x": 0.25, "y": 0.5},
             "to": {"kind": "point_norm", "x": 0.75, "y": 0.5}, "duration_ms": 200},
            {"verb": "launch_app", "app": "xterm", "args": ["-geometry", "80x24"]},
            {"verb": "activate_window", "window_id": np.uint32(4194305)},
            {"verb": "wait", "ms": 300.0, "text": "", "dx": 0},  # zero values vanish as in Go
            {"verb": "click", "x": 5, "y": 6, "modifiers": ["ctrl"]},
        ]),
        wire.step_env("env-3", text="pyautogui.click(10, 20)", dialect="pyautogui", coords_={"w": 1000, "h": 625}, toks={
            "prompt_ids": np.array([1, 2, 3, 70000]), "response_ids": [4, 5],
            "response_logprobs": [-0.5, -1.25], "finish_reason": "stop"}, request_id="3f2a9c0d1b7e4a55"),
    ]
    req = wire.step_request(steps, observe={"format": "raw", "scope": "active_window",
                                     "settle": {"first_ms": 100, "quiet_ms": 50, "max_ms": 1500}},
                            have=[HASH_A, HASH_B])
    assert wire.pack(req) == load("step_request")


def test_fork_and_close_requests_built_identically():
    assert wire.pack(wire.fork_request("env-1", 4, observe={"format": "jpeg", "quality": 80})) == load("fork_request")
    assert wire.pack(wire.close_request(["env-1", "env-2"])) == load("close_request")


def test_checkpoint_requests_built_identically():
    assert wire.pack(wire.checkpoint_request("env-1")) == load("checkpoint_request")
    assert wire.pack(wire.checkpoint_fork_request("ckpt-1", 8)) == load("checkpoint_fork_request")
    assert wire.pack(wire.reset_request([wire.reset_env("", checkpoint="ckpt-1", max_steps=5)])) == \
        load("checkpoint_reset_request")


@pytest.mark.parametrize("bad", [
    {"verb": "click", "xx": 1},                 # unknown field: the server would refuse the batch
    {"x": 1},                                   # no verb
    {"verb": "scroll", "dy": 1.5},              # not an integer
    {"verb": "click", "x": float("nan"), "y": 1},
    {"verb": "click", "target": {"kind": "point_px", "x": 1}},
])
def test_bad_actions_rejected_before_sending(bad):
    with pytest.raises(shinken.BadRequest):
        wire.step_env("env-1", bad)


def test_reset_reply_decodes():
    cache = FrameCache()
    slots = parse_batch(wire.unpack(load("reset_reply")), cache)
    assert [s.env_id for s in slots] == ["env-1", "env-2"]
    assert [s.episode_id for s in slots] == ["ep-1", "ep-2"]
    assert all(not s.cached and s.error is None for s in slots)
    assert slots[0].info["timings"] == {"capture_us": 900, "lease_us": 1500}
    assert slots[0].frame is slots[1].frame or slots[0].frame.hash != slots[1].frame.hash
    arr = cache.get(HASH_A, "raw").array()
    assert arr.shape == (2, 4, 3) and arr.dtype == np.uint8
    assert arr[0, 0].tolist() == [255, 0, 0] and arr[0, 1].tolist() == [0, 255, 0]
    assert arr[0, 2].tolist() == [0, 0, 255] and arr[1, 3].tolist() == [192, 192, 192]
    assert not arr.flags.writeable
    assert [f.hash for f in cache.have("raw", 0)] == [HASH_A]
    assert cache.have("png", 0) == []


def test_step_reply_decodes_with_cache_and_errors():
    cache = FrameCache()
    parse_batch(wire.unpack(load("reset_reply")), cache)
    listed = cache.have("raw", 0)  # what the step request listed in have
    slots = parse_batch(wire.unpack(load("step_reply")), cache, listed=listed, fmt="raw")
    one, two, three, four = slots
    assert (one.reward, one.terminated, one.truncated) == (1.0, True, False)
    # An end that is not a score: null, never a 0.
    assert four.reward is None and four.terminated and four.info["exit_reason"] == "scorer_error"
    assert two.reward == 0.0
    assert isinstance(one.reward, float)
    assert one.info["exit_reason"] == "task_complete" and not one.cached
    # env-2 shows HASH_A, which the reply left out: it is the frame the request listed.
    assert two.cached and two.frame is listed[0] and two.truncated
    info = _info(two)
    assert isinstance(info["error"], shinken.InvalidAction)
    assert info["frame"] == HASH_A and info["frame_cached"] and info["pointer"] == (640, 400)
    assert isinstance(three.error, shinken.DialectError)
    assert three.error.detail == {"snippet": "pyautogui.clik("} and three.error.env_id == "env-3"
    assert three.obs is None


def test_frame_neither_sent_nor_listed_fails_only_its_env():
    """A server bug (a frame it neither sent nor was told the client holds)
    fails that env's slot; the step's other results are kept, not lost."""
    one, two, three, _ = parse_batch(wire.unpack(load("step_reply")), FrameCache())
    assert one.error is None and one.reward == 1.0
    assert isinstance(two.error, shinken.ProtocolError) and two.truncated


def test_frame_cache_keys_format_and_quality():
    """One pixel hash is different bytes per format/quality: have lists only
    frames held in the requested one, and a reply's frame keeps its format."""
    from shinken.frames import Frame
    c = FrameCache()
    c.put(Frame(HASH_A, "png", 0, 4, 2, b"png-bytes"))
    c.put(Frame(HASH_A, "jpeg", 80, 4, 2, b"jpeg-80"))
    assert [f.data for f in c.have("png", 0)] == [b"png-bytes"]
    assert [f.data for f in c.have("jpeg", 80)] == [b"jpeg-80"]
    assert c.have("jpeg", 50) == [] and c.have("raw", 0) == []
    assert c.get(HASH_A, "png").data == b"png-bytes" and len(c) == 2


def test_frame_cache_budget_counts_each_frame_once():
    from shinken.frames import Frame
    raw = bytes(4 * 2 * 3)
    c = FrameCache(max_bytes=1 << 20)
    f = c.put(Frame(HASH_A, "raw", 0, 4, 2, raw))
    f.array()  # a raw array is a view of the bytes: no extra cost
    assert c.nbytes == len(raw)
    c.put(Frame(HASH_A, "raw", 0, 4, 2, raw))  # the same frame again: still counted once
    assert c.nbytes == len(raw) and len(c) == 1


def test_cache_smaller_than_one_reply_loses_nothing():
    """A reply whose frames exceed the whole budget still resolves every obs
    from the reply itself (nothing is read back after eviction)."""
    reply = wire.unpack(load("reset_reply"))
    c = FrameCache(max_bytes=1)
    slots = parse_batch(reply, c, fmt="raw")
    assert all(s.error is None and s.frame is not None for s in slots)
    assert slots[0].frame.array().shape == (2, 4, 3)
    assert len(c) == 1  # only the newest is kept


def test_fork_reply_decodes():
    cache = FrameCache()
    parse_batch(wire.unpack(load("reset_reply")), cache)
    slots = parse_batch(wire.unpack(load("fork_reply")), cache, listed=cache.have("raw", 0))
    assert [s.info["fork_of"] for s in slots] == ["env-1"] * 3  # the parent env
    assert [s.info.get("checkpoint") for s in slots] == [None, None, "ckpt-1"]  # the last started from a checkpoint
    assert all(s.cached for s in slots)


def test_error_reply_maps():
    body = wire.unpack(load("error_reply"))
    err = shinken.error_from_wire(body["error"], status=413)
    assert isinstance(err, shinken.BatchTooLarge)
    assert err.detail == {"max_batch": 256} and err.status == 413


def test_every_go_error_code_has_a_class():
    codes = wire.unpack(load("error_codes"))
    assert set(codes) == set(shinken.CODES), "client and aci.Codes disagree"
    for code, status in codes.items():
        cls = shinken.CODES[code]
        assert issubclass(cls, shinken.ShinkenError)
        assert cls.http_status == status, f"{code}: got status {cls.http_status}; want {status}"
        err = shinken.error_from_wire({"code": code, "message": "m"})
        assert type(err) is cls and err.code == code


def test_error_faults_match_go():
    """Whose fault each code is (aci.Codes): the client's classes say the
    same, and the agent loop's decisions follow them."""
    from shinken import agent

    faults = wire.unpack(load("error_faults"))
    assert set(faults) == set(shinken.CODES)
    for code, fault in faults.items():
        cls = shinken.CODES[code]
        assert cls.fault == fault, f"{code}: client says fault {cls.fault!r}; aci.Codes says {fault!r}"
        err = cls("m")
        # The loop drops an episode on exactly the infrastructure's codes at
        # a reset; for a step of an env it holds, also on the env being gone.
        assert agent._infra(err) == (fault == "infrastructure"), code
        assert agent._lost(err) == (fault == "infrastructure" or code in ("not_found", "episode_over")), code
    assert agent._infra(shinken.TransportError("down", sent=False))
    assert not agent._infra(ValueError("not ours"))


def test_unknown_code_is_kept():
    err = shinken.error_from_wire({"code": "from_the_future", "message": "m"})
    assert type(err) is shinken.ShinkenError and err.code == "from_the_future"


def test_spec_decodes():
    spec = wire.unpack(load("spec"))
    assert spec["protocol"] == shinken.PROTOCOL
    space = shinken.ActionSpace(spec["verbs"], spec["dialects"], screen=(100, 50), seed=1)
    for _ in range(50):
        a = space.sample()
        assert space.contains(a)
        wire.action(a)  # every sample is a valid wire action
        if "target" in a:
            assert 0 <= a["target"]["x"] < 100 and 0 <= a["target"]["y"] < 50
    assert not space.contains({"verb": "rm_rf"})


def test_trajectory_decodes_and_exports():
    traj = shinken.Trajectory.from_wire(wire.unpack(load("trajectory")))
    assert traj.episode_id == "ep-1" and traj.seed == 7 and traj.num_turns == 2
    assert traj.started_at == dt.datetime(2026, 12, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
    assert traj.ended_at - traj.started_at == dt.timedelta(seconds=3.25)
    assert traj.steps[0].actions[0] == {"verb": "click", "x": 200.0, "y": 200.0}
    # The trainer's own calls are events beside the steps, never steps.
    assert [e["kind"] for e in traj.events] == ["put_file", "exec", "observe"] and len(traj.steps) == 2
    assert traj.events[1]["exit"] == 0 and traj.events[0]["sha256"] == "ab" * 32
    row = shinken.to_verl_row(traj)
    assert row["prompt_ids"] == [1, 2, 3]
    assert row["response_ids"] == [4, 5, 6, 7, 8]
    assert row["response_mask"] == [1, 1, 0, 0, 1]
    assert row["reward_score"] == 1.0 and row["num_turns"] == 2
    assert row["extra_fields"]["traj_exit_reason"] == "task_complete"
    assert row["extra_fields"]["token_drift_turns"] == []
