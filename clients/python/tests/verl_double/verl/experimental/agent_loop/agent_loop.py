"""The parts of verl's verl/experimental/agent_loop/agent_loop.py that an
agent loop touches, transcribed from volcengine/verl at commit b178a3cd
(version 0.8.0.dev, 2026-01-29) without torch, ray, hydra or pydantic:

* AgentLoopBase.__init__ and apply_chat_template, line for line, the
  processor path included (processor.apply_chat_template(tokenize=False), then
  processor(text=[...], images=...)["input_ids"].squeeze(0).tolist(), and the
  system prompt cut by length for remove_system_prompt);
* AgentLoopOutput / AgentLoopMetrics with the same fields and defaults
  (validated by hand where pydantic would; unknown fields are refused, which is
  stricter than pydantic's default);
* register and the registry AgentLoopWorker instantiates from;
* TokenOutput (verl/workers/rollout/replica.py) and the generate signature of
  AsyncLLMServerManager, for the test's fake server manager.
"""

import asyncio
from abc import ABC, abstractmethod
from typing import Any, Optional


class DictConfigWrap:
    """Wrapper for DictConfig to avoid hydra.utils.instantiate recursive resolve."""

    def __init__(self, config):
        self.config = config


def initialize_system_prompt(tokenizer, **apply_chat_template_kwargs) -> list:
    token1 = tokenizer.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=False,
                                           tokenize=True)
    token2 = tokenizer.apply_chat_template([{"role": "user", "content": ""}] * 2, add_generation_prompt=False,
                                           tokenize=True)
    system_prompt = token1[: -(len(token2) - len(token1))]
    return system_prompt


class TokenOutput:
    def __init__(self, token_ids, log_probs=None, routed_experts=None, stop_reason=None, num_preempted=None):
        self.token_ids = list(token_ids)
        self.log_probs = log_probs
        self.routed_experts = routed_experts
        self.stop_reason = stop_reason
        self.num_preempted = num_preempted


class AgentLoopMetrics:
    def __init__(self, generate_sequences: float = 0.0, tool_calls: float = 0.0, num_preempted: int = -1,
                 **ignored):
        self.generate_sequences = float(generate_sequences)
        self.tool_calls = float(tool_calls)
        self.num_preempted = int(num_preempted)

    def model_dump(self):
        return {"generate_sequences": self.generate_sequences, "tool_calls": self.tool_calls,
                "num_preempted": self.num_preempted}


def _ints(name, v):
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        raise TypeError(f"AgentLoopOutput.{name}: want list[int]")
    return v


class AgentLoopOutput:
    """Agent loop output."""

    FIELDS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "routed_experts",
              "multi_modal_data", "reward_score", "num_turns", "metrics", "extra_fields")

    def __init__(self, *, prompt_ids, response_ids, response_mask, metrics, response_logprobs=None,
                 routed_experts=None, multi_modal_data=None, reward_score=None, num_turns=0, extra_fields=None):
        self.prompt_ids = _ints("prompt_ids", prompt_ids)
        self.response_ids = _ints("response_ids", response_ids)
        self.response_mask = _ints("response_mask", response_mask)
        if response_logprobs is not None and not all(isinstance(f, float) for f in response_logprobs):
            raise TypeError("AgentLoopOutput.response_logprobs: want list[float]")
        self.response_logprobs = response_logprobs
        self.routed_experts = routed_experts
        if multi_modal_data is not None and not isinstance(multi_modal_data, dict):
            raise TypeError("AgentLoopOutput.multi_modal_data: want dict")
        self.multi_modal_data = multi_modal_data
        self.reward_score = None if reward_score is None else float(reward_score)
        self.num_turns = int(num_turns)
        self.metrics = metrics if isinstance(metrics, AgentLoopMetrics) else AgentLoopMetrics(**metrics)
        self.extra_fields = {} if extra_fields is None else dict(extra_fields)


class AgentLoopBase(ABC):
    """An agent loop takes an input message, chat with OpenAI compatible LLM server and interact with various
    environments."""

    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config,
                 **kwargs):
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config
        self.apply_chat_template_kwargs = self.dataset_config.get("apply_chat_template_kwargs", {})
        self.system_prompt = initialize_system_prompt(self.tokenizer, **self.apply_chat_template_kwargs)
        self.loop = asyncio.get_event_loop()

    async def apply_chat_template(self, messages, tools=None, images=None, videos=None,
                                  remove_system_prompt: bool = False):
        if self.processor is not None:
            raw_prompt = await self.loop.run_in_executor(
                None,
                lambda: self.processor.apply_chat_template(
                    messages, tools=tools, add_generation_prompt=True, tokenize=False,
                    **self.apply_chat_template_kwargs,
                ),
            )
            if videos is not None:
                videos, video_metadatas = zip(*videos, strict=False)
                videos, video_metadatas = list(videos), list(video_metadatas)
            else:
                video_metadatas = None
            model_inputs = self.processor(text=[raw_prompt], images=images, videos=videos,
                                          video_metadatas=video_metadatas, return_tensors="pt",
                                          do_sample_frames=False)
            prompt_ids = model_inputs.pop("input_ids").squeeze(0).tolist()
        else:
            prompt_ids = await self.loop.run_in_executor(
                None,
                lambda: self.tokenizer.apply_chat_template(
                    messages, tools=tools, add_generation_prompt=True, tokenize=True,
                    **self.apply_chat_template_kwargs,
                ),
            )
        if remove_system_prompt:
            prompt_ids = prompt_ids[len(self.system_prompt):]
        return prompt_ids

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        raise NotImplementedError


_agent_loop_registry: dict = {}


def register(agent_name: str):
    """Register agent loop class."""

    def decorator(subclass):
        fqdn = f"{subclass.__module__}.{subclass.__qualname__}"
        _agent_loop_registry[agent_name] = {"_target_": fqdn}
        return subclass

    return decorator
