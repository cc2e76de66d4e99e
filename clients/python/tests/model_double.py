"""A token-level model double for the agent-loop tests.

What cannot run here is the model: no weights, no torch. So the tests use a
small deterministic stand-in that speaks the same interfaces a real one does:

* ToyTokenizer: byte-level ids plus Qwen-style special tokens; a chat template
  that renders ``<|im_start|>role\\n...<|im_end|>\\n`` turns, adds a default
  system prompt when there is none (as Qwen's does), and renders an image part
  as ``<|vision_start|><|image_pad|><|vision_end|>``.
* ToyProcessor: HF processor shape — ``apply_chat_template(..., tokenize=False)``
  and ``__call__(text=[...], images=[...], return_tensors=...)``, which expands
  each image pad into one token per PATCH x PATCH patch of its image, so a
  misaligned image list changes the token count.
* ScriptedModel: ``generate(prompt_ids, images)`` answering turn k with
  script[k] (+ <|im_end|>), deterministic logprobs; it checks on every call
  that the prompt's image-pad runs match the images it was given, in order.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

PATCH = 64
SPECIAL = {"<|pad|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<|image_pad|>": 3, "<|vision_start|>": 4,
           "<|vision_end|>": 5}
IM_START, IM_END, IMAGE_PAD = 1, 2, 3
BYTE0 = 16
DEFAULT_SYSTEM = "You are a helpful assistant."
_SPLIT = re.compile("(" + "|".join(re.escape(k) for k in SPECIAL) + ")")


def image_tokens(im: Any) -> int:
    w, h = im.size
    return max(1, (w // PATCH) * (h // PATCH))


class ToyTokenizer:
    padding_side = "left"

    def encode(self, text: str, add_special_tokens: bool = False) -> List[int]:
        out: List[int] = []
        for part in _SPLIT.split(text):
            if part in SPECIAL:
                out.append(SPECIAL[part])
            elif part:
                out.extend(BYTE0 + b for b in part.encode("utf-8"))
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        inv = {v: k for k, v in SPECIAL.items()}
        buf = bytearray()
        out = []
        for i in ids:
            i = int(i)
            if i >= BYTE0:
                buf.append(i - BYTE0)
                continue
            out.append(buf.decode("utf-8", "replace"))
            buf = bytearray()
            if not skip_special_tokens:
                out.append(inv.get(i, ""))
        out.append(buf.decode("utf-8", "replace"))
        return "".join(out)

    def render(self, messages: Sequence[Dict[str, Any]], add_generation_prompt: bool) -> str:
        msgs = list(messages)
        s = ""
        if not msgs or msgs[0].get("role") != "system":
            s += f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
        for m in msgs:
            c = m.get("content")
            if isinstance(c, str):
                body = c
            else:
                body = ""
                for p in c or ():
                    if p.get("type") == "image":
                        body += "<|vision_start|><|image_pad|><|vision_end|>"
                    elif p.get("type") == "text":
                        body += p.get("text", "")
            s += f"<|im_start|>{m['role']}\n{body}<|im_end|>\n"
        if add_generation_prompt:
            s += "<|im_start|>assistant\n"
        return s

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True, **kw):
        s = self.render(messages, add_generation_prompt)
        return self.encode(s) if tokenize else s


class _ImageProcessor:
    patch_size = PATCH


class ToyProcessor:
    """The HF processor shape verl's AgentLoopBase calls."""

    def __init__(self, tokenizer: Optional[ToyTokenizer] = None):
        self.tokenizer = tokenizer or ToyTokenizer()
        self.image_processor = _ImageProcessor()

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=False, **kw):
        return self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                                  tokenize=tokenize)

    def __call__(self, text, images=None, videos=None, video_metadatas=None, return_tensors=None, **kw):
        ids = self.tokenizer.encode(text[0])
        imgs = list(images or [])
        out: List[int] = []
        k = 0
        for i in ids:
            if i == IMAGE_PAD:
                if k >= len(imgs):
                    raise ValueError(f"more image pads than images ({len(imgs)})")
                out.extend([IMAGE_PAD] * image_tokens(imgs[k]))
                k += 1
            else:
                out.append(i)
        if k != len(imgs):
            raise ValueError(f"{len(imgs)} images for {k} image pads")
        return {"input_ids": np.array([out], dtype=np.int64)}


class ToyTemplate:
    """shinken.agent's Template over the toy processor: the first turn with
    the generation prompt; later turns with the system prompt cut off (as
    verl's apply_chat_template(remove_system_prompt=True) does)."""

    def __init__(self, processor: Optional[ToyProcessor] = None):
        self.processor = processor or ToyProcessor()
        tok = self.processor.tokenizer
        one = tok.apply_chat_template([{"role": "user", "content": ""}], tokenize=True)
        two = tok.apply_chat_template([{"role": "user", "content": ""}] * 2, tokenize=True)
        self.system_len = len(one) - (len(two) - len(one))

    def encode(self, messages, images, *, first):
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = self.processor(text=[text], images=images or None)["input_ids"][0].tolist()
        return ids if first else ids[self.system_len:]

    def decode(self, ids):
        return self.processor.tokenizer.decode(ids, skip_special_tokens=True)


def image_runs(ids: Sequence[int]) -> List[int]:
    """Lengths of the runs of image-pad tokens, in order."""
    runs: List[int] = []
    prev = None
    for i in ids:
        if i == IMAGE_PAD:
            if prev == IMAGE_PAD:
                runs[-1] += 1
            else:
                runs.append(1)
        prev = i
    return runs


def logprob(i: int) -> float:
    return -((i % 7) + 1) / 8.0


class ScriptedModel:
    """Answers turn k with script[k] (the last entry repeats), followed by <|im_end|>."""

    def __init__(self, script: Sequence[str], tokenizer: Optional[ToyTokenizer] = None, stop: str = "completed"):
        self.script = list(script)
        self.tok = tokenizer or ToyTokenizer()
        self.stop = stop
        self.calls: List[Dict[str, Any]] = []
        self.mismatches: List[str] = []

    def turn_of(self, prompt_ids: Sequence[int]) -> int:
        header = [IM_START] + self.tok.encode("assistant\n")
        n = sum(1 for i in range(len(prompt_ids)) if list(prompt_ids[i:i + len(header)]) == header)
        return n - 1

    async def generate(self, prompt_ids, images):
        runs = image_runs(prompt_ids)
        want = [image_tokens(im) for im in images]
        if runs != want:
            self.mismatches.append(f"image pad runs {runs} for images {want}")
        k = self.turn_of(prompt_ids)
        text = self.script[min(k, len(self.script) - 1)]
        ids = self.tok.encode(text) + [IM_END]
        lps = [logprob(j + k) for j in range(len(ids))]
        self.calls.append({"turn": k, "prompt_ids": list(prompt_ids), "ids": ids, "logprobs": lps,
                           "images": len(images)})
        return ids, lps, self.stop


HELLO_SOLUTION = [
    "pyautogui.click(200, 200)",
    "pyautogui.write(\"echo 'hello shinken' > ~/hello.txt\")\npyautogui.press('enter')",
    "DONE",
]
