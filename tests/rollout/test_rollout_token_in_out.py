"""Token in, token out: a trajectory's ids are exactly what the model saw and generated.

A scripted engine emits fixed token ids (tool calls, then an answer) and records every
context it was given. With the templates of three model families (Qwen3 with thinking on
and off, ChatML without tool support, a template without a system role) and the built-in
one, the packed training row must be the first prompt, every generated id and every
observation id; the loss mask must be 1 on the generated ids only; each turn's context
must be the previous one plus what was generated and observed. Where a template renders
history differently (Qwen3), the running ids win and the divergence is counted.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

import pytest
from agentrl.chat import apply_chat_template
from agentrl.rl.pack import pack_groups
from agentrl.rollout.engine import Generation
from agentrl.rollout.episodes import EpisodeConfig, run_episodes
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import builtin_registry

from tests.fakes.chat_templates import CHATML_NO_TOOLS, NO_SYSTEM_ROLE, QWEN3_SYSTEM
from tests.fakes.models import tiny_tokenizer

# Qwen3's layout reduced to what matters here: tools rendered by the template, the last
# real user query found from the end, and assistant turns after it keep their reasoning
# (re-rendered as "<think>\n" + reasoning + "\n</think>\n\n") only when they have some or
# are the last message; other assistant turns are rendered without any think block.
# Thinking off puts an empty think block into the generation prompt.
QWEN3 = (
    QWEN3_SYSTEM + "{%- set ns = namespace(query=messages | length - 1, seeking=true) %}"
    "{%- for m in messages[::-1] %}"
    "{%- if ns.seeking and m.role == 'user' and not (m.content.startswith('<tool_response>')"
    " and m.content.endswith('</tool_response>')) %}"
    "{%- set ns.seeking = false %}{%- set ns.query = messages | length - 1 - loop.index0 %}"
    "{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' or (m.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' %}"
    "{%- set content = m.content %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{%- if loop.index0 > ns.query and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)

CALC = '<tool_call>{"name": "calculate_math", "arguments": {"expression": "%s"}}</tool_call>'
# The reasoning as a model may write it: the template re-renders it with other whitespace.
THOUGHT = "<think>\nThe sum needs the calculator.</think>\n"
PLAIN_SCRIPT = [CALC % "2+3", CALC % "4*5", "<answer>5, 20</answer>"]
THINKING_SCRIPT = [THOUGHT + CALC % "2+3", THOUGHT + CALC % "4*5", "<answer>5, 20</answer>"]


class ScriptedIdsEngine:
    """Emits turn ``k``'s scripted ids on its ``k``-th call (every row); records contexts."""

    def __init__(self, tokenizer: Any, script: list[str]) -> None:
        self.tokenizer = tokenizer
        self.turns = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in script]
        self.contexts: list[list[list[int]]] = []

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams | None = None, **_: object
    ) -> list[Generation]:
        ids = list(self.turns[len(self.contexts)])
        self.contexts.append([list(p) for p in prompts])
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        logps = [-0.5] * len(ids)
        end = self.tokenizer.eos_token_id
        return [
            Generation(list(ids), logps, logps, text, "eos", end, -0.1, 0, len(p)) for p in prompts
        ]


def _tokenizer(template: str | None) -> Any:
    tok = copy.deepcopy(tiny_tokenizer())
    if template is not None:
        tok.chat_template = template
    return tok


def _runs(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """Maximal runs of equal mask: (mask, ids)."""
    runs: list[tuple[int, list[int]]] = []
    for token, m in zip(ids, mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(token)
        else:
            runs.append((m, [token]))
    return runs


SAMPLE = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+3, 4*5"},
    ],
    "tools": None,
    "gt": ["5", "20"],
}

# family: (template, thinking, script, how the template closes an assistant turn, diverges)
CHATML_CLOSE = "<|im_end|>\n<|im_start|>user\n"
GEMMA_CLOSE = "<end_of_turn>\n<start_of_turn>user\n"
FAMILIES = {
    "qwen3-thinking": (QWEN3, True, THINKING_SCRIPT, CHATML_CLOSE, True),
    "qwen3-no-thinking": (QWEN3, False, PLAIN_SCRIPT, CHATML_CLOSE, True),
    "chatml-no-tools": (CHATML_NO_TOOLS, False, PLAIN_SCRIPT, CHATML_CLOSE, False),
    "no-system-role": (NO_SYSTEM_ROLE, False, PLAIN_SCRIPT, GEMMA_CLOSE, False),
    "builtin": (None, False, PLAIN_SCRIPT, CHATML_CLOSE, False),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_training_ids_are_what_the_model_saw_and_generated(family: str) -> None:
    template, thinking, script, closing, diverges = FAMILIES[family]
    tok = _tokenizer(template)
    engine = ScriptedIdsEngine(tok, script)
    config = EpisodeConfig(max_turns=3, thinking_ratio=1.0 if thinking else 0.0)
    registry = builtin_registry()
    rng = random.Random(0)
    groups = run_episodes(engine, [SAMPLE], registry, num_generations=2, config=config, rng=rng)
    trajectories = groups[0].trajectories
    batch = pack_groups(
        groups,
        num_generations=2,
        max_total_len=4096,
        pad_id=tok.pad_token_id,
        eos_id=tok.eos_token_id,
    )
    assert len(engine.contexts) == 3
    for row, traj in enumerate(trajectories):
        traj.check_alignment()
        assert not traj.unfinished and len(traj.tool_events) == 2
        n = int(batch.seq_lens[row])
        packed = batch.input_ids[row, :n].tolist()
        assert packed == traj.prompt_ids + traj.response_ids
        # The loss mask is 1 exactly on the generated ids, which are the scripted ones.
        mask = batch.response_mask[row, :n].tolist()
        assert mask == [0.0] * len(traj.prompt_ids) + [float(m) for m in traj.response_mask]
        runs = _runs(traj.response_ids, traj.response_mask)
        assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
        assert [ids for m, ids in runs if m == 1] == engine.turns
        # Observations start with the template's turn closing, then carry the tool result.
        for (_, observed), result in zip(
            runs[1::2], ('"result":"5"', '"result":"20"'), strict=True
        ):
            text = tok.decode(observed)
            assert text.startswith(closing) and result in text
        # Each turn was generated from the previous context + generated + observed ids.
        contexts = [calls[row] for calls in engine.contexts]
        assert contexts[0] == traj.prompt_ids
        for k in (1, 2):
            grown = contexts[k - 1] + runs[2 * k - 2][1] + runs[2 * k - 1][1]
            assert contexts[k] == grown
        assert packed == contexts[2] + runs[4][1]
        # A re-rendering of the conversation differs exactly for the history-rewriting template.
        specs = builtin_registry().specs()
        rerendered = apply_chat_template(tok, traj.conversation, specs, False, thinking)
        assert traj.stats["template_divergence"] == (2.0 if diverges else 0.0)
        assert rerendered.startswith(tok.decode(packed)) != diverges
        assert traj.context == tok.decode(packed)


def test_qwen3_running_ids_keep_the_think_blocks_the_rerendering_rewrites() -> None:
    tok = _tokenizer(QWEN3)
    for thinking, script, kept in (
        (True, THINKING_SCRIPT, THOUGHT + "<tool_call>"),
        (False, PLAIN_SCRIPT, "<think>\n\n</think>\n\n<tool_call>"),
    ):
        engine = ScriptedIdsEngine(tok, script)
        config = EpisodeConfig(max_turns=3, thinking_ratio=1.0 if thinking else 0.0)
        traj = run_episodes(
            engine, [SAMPLE], builtin_registry(), config=config, rng=random.Random(0)
        )[0].trajectories[0]
        seen = tok.decode(traj.prompt_ids + traj.response_ids)
        rerendered = apply_chat_template(
            tok, traj.conversation, builtin_registry().specs(), False, thinking
        )
        # Both tool-call turns keep the think block the model had in its context ...
        assert seen.count(kept) == 2
        # ... which the template would have rewritten in the turns before the last.
        assert rerendered.count(kept) == 0
        assert traj.stats["template_divergence"] == 2.0
