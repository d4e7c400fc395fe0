"""Greedy multi-turn tool-use evaluation: generate, run the tools, feed results, answer.

Small on purpose: episodes of one turn are batched (left padding, HF `generate` with its
KV cache), tool calls are parsed and executed, tool results appended as tool messages, and
the conversation is re-rendered for the next turn. The score is exact match of the final
answer, with the reward's rule: the numbers inside the last `<answer>` tag equal the ground
truth in order and in count (non-numeric ground truth: every item appears in the answer).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrl.tools import tool_message

Message = dict[str, Any]
Renderer = Callable[[list[Message], list[dict[str, Any]] | None, bool], str]
CallParser = Callable[[str], list[dict[str, Any]]]
# run_tool(parsed call, tool specs of the task) -> event {ok, name, args, result, canonical}
ToolRunner = Callable[[dict[str, Any], list[dict[str, Any]] | None], dict[str, Any]]


@dataclass(frozen=True)
class EvalEnv:
    """How held-out episodes are rendered, parsed and answered by tools."""

    render: Renderer
    parse_calls: CallParser
    run_tool: ToolRunner


_IM_START_RE = re.compile(r"<\|im_start\|>[^\n]*\n?")
_TOOL_BLOCK_RE = re.compile(r"<tool_call>.*?</tool_call>|<tool_response>.*?</tool_response>", re.S)
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_NUMBER_RE = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?|[-+]?\d+(?:\.\d+)?")
_PLAIN_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass
class EvalTask:
    """A held-out prompt: the messages before the first assistant turn, tools, answers."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None
    gt: list[Any]


@dataclass
class Episode:
    """What the policy did on one task."""

    task: EvalTask
    messages: list[Message]
    turns: list[str] = field(default_factory=list)
    tool_events: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    exact: bool = False

    @property
    def completion(self) -> str:
        return "\n".join(self.turns)


def _clean(text: str) -> str:
    text = _IM_START_RE.sub("", text).replace("<|im_end|>", "")
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    return text.strip()


def answer_region(completion: str) -> str:
    """Text of the last `<answer>` tag outside tool blocks, else the whole cleaned text."""
    clean = _clean(_TOOL_BLOCK_RE.sub("", completion))
    found = _ANSWER_RE.findall(clean)
    return _clean(found[-1]) if found else clean


def _plain_number(value: Any) -> float | None:
    text = str(value).strip().replace(",", "")
    return float(text) if _PLAIN_NUMBER_RE.fullmatch(text) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(1e-6, abs(b) * 1e-6)


def exact_match(completion: str, gt: Sequence[Any]) -> bool:
    """The reward's strict exact match of the final answer against the ground truth."""
    region = answer_region(completion)
    wanted = [_plain_number(g) for g in gt]
    if gt and all(w is not None for w in wanted):
        got = []
        for m in _NUMBER_RE.finditer(region):
            try:
                got.append(float(m.group(0).replace(",", "")))
            except ValueError:
                continue
        return len(got) == len(wanted) and all(
            _close(p, w)
            for p, w in zip(got, wanted, strict=True)  # type: ignore[arg-type]
        )
    norm = re.sub(r"\s+", " ", region.lower().strip().replace(",", ""))
    items = [re.sub(r"\s+", " ", str(g).lower().strip().replace(",", "")) for g in gt]
    items = [g for g in items if g]
    return bool(items) and all(g in norm for g in items)


@torch.no_grad()
def greedy_generate(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[list[int]],
    max_new_tokens: int,
    batch_size: int,
) -> list[list[int]]:
    """Greedy continuations (without the end token) of token-id prompts, batched by length."""
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id
    eos_id = tokenizer.eos_token_id
    out: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for lo in range(0, len(order), batch_size):
        rows = order[lo : lo + batch_size]
        width = max(len(prompts[i]) for i in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            n = len(prompts[i])
            ids[r, width - n :] = torch.tensor(prompts[i], dtype=torch.long)
            attn[r, width - n :] = 1
        gen = model.generate(
            input_ids=ids.to(device),
            attention_mask=attn.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos_id,
            pad_token_id=pad_id,
        )
        for r, i in enumerate(rows):
            new = gen[r, width:].tolist()
            if eos_id in new:
                new = new[: new.index(eos_id)]
            out[i] = [t for t in new if t != pad_id]
    return out


def run_episodes(
    model: torch.nn.Module,
    tokenizer: Any,
    tasks: Sequence[EvalTask],
    env: EvalEnv,
    max_turns: int = 4,
    max_new_tokens: int = 96,
    max_context: int = 2048,
    batch_size: int = 64,
) -> list[Episode]:
    """Play every task to the end greedily, one batched generation per turn."""
    was_training = model.training
    model.eval()
    episodes = [Episode(t, [dict(m) for m in t.messages]) for t in tasks]
    try:
        for _ in range(max_turns):
            active = [e for e in episodes if not e.finished]
            if not active:
                break
            prompts = []
            for ep in active:
                text = env.render(ep.messages, ep.task.tools, True)
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                prompts.append(ids[-max_context:])
            outputs = greedy_generate(model, tokenizer, prompts, max_new_tokens, batch_size)
            for ep, ids in zip(active, outputs, strict=True):
                text = tokenizer.decode(ids, skip_special_tokens=True)
                ep.turns.append(text)
                calls = env.parse_calls(text)
                if not calls:
                    ep.finished = True
                    continue
                ep.messages.append({"role": "assistant", "content": text})
                for call in calls:
                    event = env.run_tool(call, ep.task.tools)
                    ep.tool_events.append(event)
                    ep.messages.append({"role": "tool", "content": tool_message(event["result"])})
    finally:
        model.train(was_training)
    for ep in episodes:
        ep.exact = exact_match(ep.completion, ep.task.gt)
    return episodes


def summarize(episodes: Sequence[Episode], seconds: float) -> dict[str, float]:
    """Scalar metrics of an evaluation pass."""
    n = max(len(episodes), 1)
    calls = sum(len(e.tool_events) for e in episodes)
    ok = sum(1 for e in episodes for ev in e.tool_events if ev.get("ok"))
    return {
        "eval/exact_match": sum(e.exact for e in episodes) / n,
        "eval/finished": sum(e.finished for e in episodes) / n,
        "eval/tool_calls_per_task": calls / n,
        "eval/tool_success_rate": ok / max(calls, 1),
        "eval/answer_tag": sum("<answer>" in e.completion for e in episodes) / n,
        "eval/seconds": seconds,
        "eval/tasks": float(len(episodes)),
    }


def evaluate(
    model: torch.nn.Module,
    tokenizer: Any,
    tasks: Sequence[EvalTask],
    env: EvalEnv,
    **kwargs: Any,
) -> tuple[dict[str, float], list[Episode]]:
    """Run the episodes and return (metrics, episodes)."""
    start = time.perf_counter()
    episodes = run_episodes(model, tokenizer, tasks, env, **kwargs)
    return summarize(episodes, time.perf_counter() - start), episodes
