"""shinken.verl: ShinkenAgentLoop as verl's AgentLoopWorker builds and runs it,
against a real envserver.

verl itself (torch, ray, a model server) cannot run here, so its agent-loop
module is the transcription in tests/verl_double (see its doc), the model is
a fake server_manager with AsyncLLMServerManager.generate's signature that
returns token ids, and the tokenizer/processor are the toy ones of
model_double. Everything on the env side is real.

The signatures this adapter relies on, recorded from volcengine/verl at
commit b178a3cd (0.8.0.dev, 2026-01-29), verl/experimental/agent_loop/agent_loop.py:
"""

import asyncio
import importlib
import inspect
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

import shinken
from conftest import ROOT
from model_double import (HELLO_SOLUTION, IMAGE_PAD, ScriptedModel, ToyProcessor, image_runs, image_tokens)

DOUBLE = pathlib.Path(__file__).parent / "verl_double"
EXAMPLE = ROOT / "clients" / "python" / "examples" / "verl" / "agent_loop.yaml"

VERL_AT = "b178a3cd"
# AgentLoopBase.__init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls,
#                        dataset_config, **kwargs)
BASE_INIT = ["self", "trainer_config", "server_manager", "tokenizer", "processor", "dataset_cls",
             "dataset_config", "kwargs"]
# async AgentLoopBase.run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput
RUN = ["self", "sampling_params", "kwargs"]
# async AsyncLLMServerManager.generate(self, request_id, *, prompt_ids, sampling_params,
#                                      image_data=None, video_data=None) -> TokenOutput
GENERATE = ["self", "request_id", "prompt_ids", "sampling_params", "image_data", "video_data"]
# AgentLoopOutput fields
OUTPUT_FIELDS = ["prompt_ids", "response_ids", "response_mask", "response_logprobs", "routed_experts",
                 "multi_modal_data", "reward_score", "num_turns", "metrics", "extra_fields"]
# AgentLoopMetrics fields
METRICS = ["generate_sequences", "tool_calls", "num_preempted"]


@pytest.fixture
def verl_mod():
    """shinken.verl imported with the verl stand-in on the path."""
    sys.path.insert(0, str(DOUBLE))
    for m in [m for m in sys.modules if m == "verl" or m.startswith("verl.") or m == "shinken.verl"]:
        del sys.modules[m]
    mod = importlib.import_module("shinken.verl")
    assert mod.HAVE_VERL
    yield mod
    sys.path.remove(str(DOUBLE))
    for m in [m for m in sys.modules if m == "verl" or m.startswith("verl.") or m == "shinken.verl"]:
        del sys.modules[m]


class Cfg(dict):
    """The attribute-and-get access verl's OmegaConf config gives."""

    def __getattr__(self, k):
        try:
            v = self[k]
        except KeyError:
            raise AttributeError(k) from None
        return Cfg(v) if isinstance(v, dict) else v


class FakeServerManager:
    """AsyncLLMServerManager.generate's signature; the model is a ScriptedModel."""

    def __init__(self, model, TokenOutput):
        self.model, self.TokenOutput = model, TokenOutput
        self.request_ids = []
        self.sampling = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        self.request_ids.append(request_id)
        self.sampling.append(sampling_params)
        ids, lps, stop = await self.model.generate(prompt_ids, list(image_data or []))
        return self.TokenOutput(token_ids=ids, log_probs=lps, stop_reason=stop, num_preempted=0)


def trainer_config(response_length=4096):
    return Cfg({"actor_rollout_ref": {"rollout": {"response_length": response_length, "prompt_length": 4096,
                                                  "multi_turn": {"max_assistant_turns": None}}}})


def build(verl_mod, name, server_manager, processor):
    """What AgentLoopWorker does: load the yaml at agent_loop_config_path into
    the registry, then hydra-instantiate the entry by agent_name."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    for entry in yaml.safe_load(EXAMPLE.read_text()):
        _agent_loop_registry[entry["name"]] = entry
    cfg = dict(_agent_loop_registry[name])
    module, _, cls = cfg.pop("_target_").rpartition(".")
    target = getattr(importlib.import_module(module), cls)
    cfg.pop("name", None)
    return target(**cfg, trainer_config=DictConfigWrap(config=trainer_config()), server_manager=server_manager,
                  tokenizer=processor.tokenizer, processor=processor, dataset_cls=object,
                  dataset_config=DictConfigWrap({}))


def dataset_kwargs(row):
    """The kwargs AgentLoopWorker passes to run(): RLHFDataset.__getitem__'s
    row (raw_prompt from the prompt column), agent_name taken out."""
    kw = {k: v for k, v in row.items() if k not in ("agent_name",)}
    kw["raw_prompt"] = [dict(m) for m in row["prompt"]]
    kw["index"] = row["extra_info"]["index"]
    kw["tools_kwargs"], kw["interaction_kwargs"] = {}, {}
    return kw


def test_signatures_match_verl(verl_mod):
    from verl.experimental.agent_loop import agent_loop as al
    # The stand-in is faithful to the recorded source...
    assert list(inspect.signature(al.AgentLoopBase.__init__).parameters) == BASE_INIT
    assert list(inspect.signature(al.AgentLoopBase.run).parameters) == RUN
    assert list(inspect.signature(FakeServerManager.generate).parameters) == GENERATE
    assert list(al.AgentLoopOutput.FIELDS) == OUTPUT_FIELDS
    assert list(al.AgentLoopMetrics().model_dump()) == METRICS
    # ...and the subclass keeps verl's constructor and run shapes.
    cls = verl_mod.ShinkenAgentLoop
    assert issubclass(cls, al.AgentLoopBase) and inspect.iscoroutinefunction(cls.run)
    init = inspect.signature(cls.__init__).parameters
    assert list(init)[:5] == BASE_INIT[:5] and init["kwargs"].kind is inspect.Parameter.VAR_KEYWORD
    run = inspect.signature(cls.run).parameters
    assert list(run) == RUN and run["kwargs"].kind is inspect.Parameter.VAR_KEYWORD
    assert al._agent_loop_registry["shinken_agent"] == {"_target_": "shinken.verl.ShinkenAgentLoop"}
    assert VERL_AT in verl_mod.VERL_REFERENCE


def test_agent_loop_runs_an_episode_as_verl_would(verl_mod, server, task_id, monkeypatch):
    if task_id != "xterm-hello-file":
        pytest.skip("the scripted model solves xterm-hello-file")
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, TokenOutput
    monkeypatch.setenv("SHINKEN_URL", server.url)
    monkeypatch.setenv("SHINKEN_TOKEN", server.token or "")
    processor = ToyProcessor()
    model = ScriptedModel(HELLO_SOLUTION, processor.tokenizer)
    sm = FakeServerManager(model, TokenOutput)
    spec = shinken.Client(server.url, server.token).spec()
    task = next(t for t in spec["tasks"] if t["id"] == task_id)
    row = verl_mod.task_rows([task], system_prompt="You control a desktop.", seeds=[3])[0]

    async def go():
        loop = build(verl_mod, row["agent_name"], sm, processor)
        try:
            return await loop.run({"temperature": 1.0, "logprobs": True}, **dataset_kwargs(row))
        finally:
            await verl_mod.ShinkenAgentLoop.aclose_clients()

    out = asyncio.run(go())
    assert isinstance(out, AgentLoopOutput) and not model.mismatches
    assert len(set(sm.request_ids)) == 1 and len(sm.request_ids) == 3  # sticky to one model server
    assert sm.sampling[0] == {"temperature": 1.0, "logprobs": True}
    x = out.extra_fields
    assert x["exit_reason"] == "task_complete" and x["drop"] is False and out.reward_score == 1.0
    assert x["task"] == task_id and x["episode_id"]
    # The row's system prompt opens the sequence; the instruction follows.
    text = processor.tokenizer.decode(out.prompt_ids, True)
    assert text.startswith("system\nYou control a desktop.") and task["instruction"] in text
    # Model tokens are exactly the mask-1 tokens; logprobs line up.
    got = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    assert got == [i for c in model.calls for i in c["ids"]]
    assert len(out.response_logprobs) == len(out.response_ids) == len(out.response_mask)
    images = out.multi_modal_data["images"]
    assert len(images) == 3
    assert image_runs(out.prompt_ids + out.response_ids) == [image_tokens(im) for im in images]
    assert out.metrics.tool_calls > 0 and out.num_turns == 6


def test_dropped_episode_trains_nothing(verl_mod, server, task_id, monkeypatch):
    from verl.experimental.agent_loop.agent_loop import TokenOutput
    monkeypatch.setenv("SHINKEN_URL", server.url)
    monkeypatch.setenv("SHINKEN_TOKEN", server.token or "")
    processor = ToyProcessor()
    model = ScriptedModel(["pyautogui.click(200, 200)"], processor.tokenizer, stop="aborted")
    row = verl_mod.task_rows([{"id": task_id, "instruction": "x"}])[0]

    async def go():
        loop = build(verl_mod, "shinken_agent", FakeServerManager(model, TokenOutput), processor)
        try:
            return await loop.run({}, **dataset_kwargs(row))
        finally:
            await verl_mod.ShinkenAgentLoop.aclose_clients()

    out = asyncio.run(go())
    assert out.extra_fields["drop"] is True and out.extra_fields["exit_reason"] == "generation_aborted"
    assert out.reward_score == 0.0 and set(out.response_mask) <= {0}
    assert IMAGE_PAD in out.prompt_ids


def test_without_verl_the_converter_still_works(tmp_path):
    import shinken.verl as sv
    if sv.HAVE_VERL:
        pytest.skip("verl is importable here")
    with pytest.raises(ImportError, match="needs verl"):
        sv.ShinkenAgentLoop
    # The spec's instruction is the family's template: a row's user turn is
    # its resolved instance's instruction, else the loop's to add.
    rows = sv.task_rows([{"id": "t1", "instruction": "do {{.x}}", "max_steps": 5}], seeds=[1, 2], split="test",
                        instances={("t1", 1): {"instruction": "do 1", "version": 3}})
    assert [r["extra_info"] for r in rows] == [
        {"task": "t1", "index": 0, "max_steps": 5, "split": "test", "seed": 1, "version": 3},
        {"task": "t1", "index": 1, "max_steps": 5, "split": "test", "seed": 2}]
    assert rows[0]["agent_name"] == "shinken_agent" and rows[0]["prompt"] == [{"role": "user", "content": "do 1"}]
    assert rows[1]["prompt"] == []
    assert sv.task_rows([{"id": "t1"}], system_prompt="S")[0]["prompt"] == [{"role": "system", "content": "S"}]
    with pytest.raises(ValueError, match="parquet or .json"):
        sv.write_dataset(rows, str(tmp_path / "x.csv"))


def test_dataset_command_writes_verl_rows(server, tmp_path):
    out = tmp_path / "tasks.json"
    env = dict(os.environ, SHINKEN_URL=server.url, SHINKEN_TOKEN=server.token or "",
               PYTHONPATH=str(ROOT / "clients" / "python"))
    r = subprocess.run([sys.executable, "-m", "shinken.verl", "dataset", "--out", str(out),
                        "--tasks", "xterm-hello-file", "--seeds", "0,1", "--system-prompt", "S"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["extra_info"]["seed"] for r in rows] == [0, 1]
    assert all(r["extra_info"]["task"] == "xterm-hello-file" and r["agent_name"] == "shinken_agent" for r in rows)
    assert all(r["extra_info"]["split"] == "train" for r in rows)
    assert rows[0]["prompt"][0] == {"role": "system", "content": "S"} and rows[0]["prompt"][1]["role"] == "user"
    bad = subprocess.run([sys.executable, "-m", "shinken.verl", "dataset", "--out", str(out), "--tasks", "nope"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown task" in bad.stderr


def test_dataset_rows_name_instances_with_their_split(server, tmp_path):
    """--seeds names instances of --split: each row's extra_info carries the
    task, seed and split, and its user turn is that instance's instruction
    (as a reset of it says), never the family's template."""
    family = "xterm-count-lines"
    spec = shinken.Client(server.url, server.token).spec()
    tmpl = next((t["instruction"] for t in spec["tasks"] if t["id"] == family), None)
    if tmpl is None:
        pytest.skip(f"the server does not serve {family}")
    env = dict(os.environ, SHINKEN_URL=server.url, SHINKEN_TOKEN=server.token or "",
               PYTHONPATH=str(ROOT / "clients" / "python"))

    def dataset(*args):
        out = tmp_path / "rows.json"
        r = subprocess.run([sys.executable, "-m", "shinken.verl", "dataset", "--out", str(out), *args],
                           env=env, capture_output=True, text=True, timeout=120)
        return r, ([json.loads(line) for line in out.read_text().splitlines()] if r.returncode == 0 else None)

    r, rows = dataset("--tasks", family, "--seeds", "0,1", "--split", "test")
    assert r.returncode == 0, r.stderr
    assert [(x["extra_info"]["task"], x["extra_info"]["seed"], x["extra_info"]["split"]) for x in rows] == \
        [(family, 0, "test"), (family, 1, "test")]
    e = shinken.Env(server.url, family, server.token, observe={"format": "jpeg", "max_long_edge": 160},
                    split="test")
    try:
        for x in rows:
            _, info = e.reset(seed=x["extra_info"]["seed"])
            assert x["prompt"] == [{"role": "user", "content": info["instruction"]}] and "{{" not in info["instruction"]
            assert x["extra_info"]["version"] == info["version"]
    finally:
        e.close()
    r, train = dataset("--tasks", family, "--seeds", "0,1")
    assert r.returncode == 0, r.stderr
    assert [x["extra_info"]["split"] for x in train] == ["train", "train"]
    # Seedless, or --no-instructions: no user turn (the loop adds the drawn instance's).
    r, lazy = dataset("--tasks", family, "--seeds", "0", "--no-instructions", "--system-prompt", "S")
    assert r.returncode == 0, r.stderr
    assert lazy[0]["prompt"] == [{"role": "system", "content": "S"}] and lazy[0]["extra_info"]["seed"] == 0
    r, drawn = dataset("--tasks", family)
    assert r.returncode == 0 and drawn[0]["prompt"] == [] and "seed" not in drawn[0]["extra_info"]
    assert all(tmpl not in json.dumps(x) for x in rows + train + lazy + drawn)
    # A family of one instance has no test split; an unknown split is refused.
    r, _ = dataset("--tasks", "xterm-hello-file", "--seeds", "0", "--split", "test")
    assert r.returncode == 2 and "test split" in r.stderr
    r, _ = dataset("--tasks", family, "--seeds", "0", "--split", "validation")
    assert r.returncode == 2


def test_agent_loop_plays_the_rows_instance(verl_mod, server, monkeypatch):
    """A test-split row as verl hands it over: the episode runs the row's
    instance (its seed and split) with the row's instruction."""
    from verl.experimental.agent_loop.agent_loop import TokenOutput
    family = "xterm-count-lines"
    c = shinken.Client(server.url, server.token)
    task = next((t for t in c.spec()["tasks"] if t["id"] == family), None)
    if task is None:
        pytest.skip(f"the server does not serve {family}")
    monkeypatch.setenv("SHINKEN_URL", server.url)
    monkeypatch.setenv("SHINKEN_TOKEN", server.token or "")
    instances = verl_mod._loop_run(verl_mod.resolve_instances(c.aio, [(family, 2)], split="test"))
    row = verl_mod.task_rows([task], seeds=[2], split="test", instances=instances)[0]
    processor = ToyProcessor()
    model = ScriptedModel(["DONE"], processor.tokenizer)

    async def go():
        loop = build(verl_mod, "shinken_agent", FakeServerManager(model, TokenOutput), processor)
        try:
            return await loop.run({}, **dataset_kwargs(row))
        finally:
            await verl_mod.ShinkenAgentLoop.aclose_clients()

    out = asyncio.run(go())
    x = out.extra_fields
    assert x["exit_reason"] == "task_complete" and x["seed"] == 2 and x["split"] == "test"
    assert processor.tokenizer.decode(out.prompt_ids, True).count(instances[(family, 2)]["instruction"]) == 1
