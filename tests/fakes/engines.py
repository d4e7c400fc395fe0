"""A scripted policy for the episode loop: each reply is chosen from the turn and the
context so far, and tokenized with `tiny_tokenizer`; no model runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentrl.rollout.engine import Generation
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.models import tiny_tokenizer

# The calculator the endpoint and serving tests offer (an OpenAI tool spec).
CALC_SPEC = {
    "type": "function",
    "function": {
        "name": "calculate_math",
        "description": "evaluate arithmetic",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


def tool_call(name: str, args: str = "{}") -> str:
    """A model's call of tool ``name`` with ``args`` (JSON text), as the policy writes it."""
    return f'<tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>'


class ScriptedEngine:
    """A fake policy: the reply depends on how many assistant turns the context holds."""

    def __init__(self, script: Callable[[int, str], str], version: int = 0) -> None:
        self.tokenizer = tiny_tokenizer()
        self.script = script
        self.version = version
        self.calls: list[int] = []

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        *,
        max_new_tokens: int | Sequence[int] | None = None,
        **_: object,
    ) -> list[Generation]:
        tok = self.tokenizer
        self.calls.append(len(prompts))
        out = []
        for n, prompt in enumerate(prompts):
            context = tok.decode(list(prompt))
            turn = context.count("<|im_start|>assistant") - 1
            ids = tok(self.script(turn, context), add_special_tokens=False)["input_ids"]
            if isinstance(max_new_tokens, Sequence):
                ids = ids[: max_new_tokens[n]]
            text = tok.decode(ids, skip_special_tokens=True)
            logps = [-0.25 - 0.01 * k for k in range(len(ids))]
            out.append(
                Generation(ids, logps, logps, text, "eos", tok.eos_token_id, -0.1, self.version, 0)
            )
        return out
