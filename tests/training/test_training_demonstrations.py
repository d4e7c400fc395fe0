"""Demonstrations for the behaviour-cloning loss: canonical calls, answers, the whole loss."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest
from agentrl.rl.bc import BCConfig
from agentrl.training.demonstrations import (
    build_math_bc_examples,
    canonical_tool_call,
    compute_bc_aux_loss,
)

from tests.fakes.models import UniformLogits


def test_canonical_tool_call_is_compact_json_keeping_non_ascii() -> None:
    assert (
        canonical_tool_call("calculate_math", {"expression": "1+2"})
        == '<tool_call>{"name":"calculate_math","arguments":{"expression":"1+2"}}</tool_call>'
    )
    assert "时区" in canonical_tool_call("t", {"z": "时区"})


def test_template_call_style_is_what_the_chat_template_writes_for_tool_calls(
    small_tokenizer: Any,
) -> None:
    from agentrl.chat import apply_chat_template

    class _NoTemplate:  # forces agentrl's built-in rendering, which mirrors the template
        chat_template = None

    call = {
        "type": "function",
        "function": {"name": "calculate_math", "arguments": {"expression": "１＋2"}},
    }
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call, call]},
    ]
    spelled = canonical_tool_call("calculate_math", {"expression": "１＋2"}, "template")
    for tokenizer in (small_tokenizer, _NoTemplate()):
        rendered = apply_chat_template(tokenizer, messages, None, False, False)
        assert "</think>\n\n" + spelled + "\n" + spelled + "<|im_end|>" in rendered
    with pytest.raises(ValueError, match="bc_call_style"):
        canonical_tool_call("calculate_math", {}, "loose")


def _render(messages, tools) -> str:
    return json.dumps([m["role"] + ":" + str(m["content"]) for m in messages], ensure_ascii=False)


def _examples(gt):
    messages = [{"role": "user", "content": "请计算 12+30 和 7*6"}]
    return build_math_bc_examples(
        [messages], [None], [gt], render=_render, default_tools=[{"type": "function"}]
    )


def test_demonstrations_are_the_calls_then_the_answer() -> None:
    first, second = _examples(["42", "42"])
    call = '<tool_call>{"name":"calculate_math","arguments":{"expression":"%s"}}</tool_call>'
    assert first.prefix == json.dumps(["user:请计算 12+30 和 7*6"], ensure_ascii=False)
    assert first.target == (call % "12+30") + "\n" + (call % "7*6")
    assert second.target == "<answer>42, 42</answer>"
    roles = json.loads(second.prefix)
    assert roles[1].startswith("assistant:<tool_call>")
    assert roles[2] == 'tool:{"value":42.0,"result":"42"}'


def test_answer_falls_back_to_tool_results_when_the_ground_truth_count_differs() -> None:
    assert _examples(["42"])[1].target == "<answer>42, 42</answer>"
    assert _examples(["x", "y"])[1].target == "<answer>x, y</answer>"


def test_prompts_without_arithmetic_give_no_demonstration_and_max_examples_holds() -> None:
    none = build_math_bc_examples(
        [[{"role": "user", "content": "hello"}]], [None], [None], render=_render, default_tools=None
    )
    assert none == []
    many = build_math_bc_examples(
        [[{"role": "user", "content": f"{i}+1"}] for i in range(5)],
        [None] * 5,
        [None] * 5,
        render=_render,
        default_tools=None,
        max_examples=3,
    )
    assert len(many) == 3


def test_aux_loss_is_zero_when_the_coefficient_is_zero() -> None:
    tok = SimpleNamespace(pad_token_id=0, eos_token_id=0)
    loss, m = compute_bc_aux_loss(
        UniformLogits(),
        tok,
        [[{"role": "user", "content": "1+1"}]],
        [None],
        [None],
        step=10,
        config=BCConfig(bc_coef=0.0),
        render=_render,
        default_tools=None,
    )
    assert loss.item() == 0.0
    assert m == {"bc/loss": 0.0, "bc/coef": 0.0, "bc/examples": 0.0}


class CharTokenizer:
    """Characters to ids 0..3, so `UniformLogits` can score them."""

    pad_token_id = 0
    eos_token_id = 3

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % 4 for c in text]}


def test_aux_loss_end_to_end_builds_two_rows_per_math_prompt() -> None:
    loss, m = compute_bc_aux_loss(
        UniformLogits(),
        CharTokenizer(),
        [[{"role": "user", "content": "2*3"}]],
        [None],
        [["6"]],
        step=0,
        config=BCConfig(bc_max_len=64),
        render=_render,
        default_tools=None,
    )
    assert m["bc/examples"] == 2.0
    assert m["bc/coef"] == 0.16
    assert loss.item() == pytest.approx(math.log(4))
    assert loss.requires_grad
