"""What docs/compat.md says is kept from the reference agent trainer, checked against the
reference's own text (``../shared/seeds/000_*.txt``, loaded at test time; skipped when it
is absent). Where compat.md says agentrl differs (the instruction's wording, the tool
descriptions), the test pins the difference so that the page has to change with it."""

from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path

import pytest
from agentrl.data import ANSWER_INSTRUCTION
from agentrl.data.prompt_pool import inject_instruction
from agentrl.tools.builtin import (
    CALCULATE_MATH_SPEC,
    CALCULATOR_ALIAS_SPEC,
    CURRENT_TIME_SPEC,
    UNIT_CONVERTER_SPEC,
)

from tests.fakes.repo import BENCHES, needs_reference

sys.path.insert(0, str(BENCHES))
from reference_baseline import load_reference, reference_path

REFERENCE = load_reference()
pytestmark = needs_reference(REFERENCE)
COMPAT = (Path(__file__).resolve().parents[2] / "docs" / "compat.md").read_text("utf-8")

PAIRS = [
    (CALCULATE_MATH_SPEC, "CALCULATE_MATH_TOOL_SPEC"),
    (UNIT_CONVERTER_SPEC, "UNIT_CONVERTER_TOOL_SPEC"),
    (CURRENT_TIME_SPEC, "TIME_TOOL_SPEC"),
    (CALCULATOR_ALIAS_SPEC, "CALCULATOR_ALIAS_TOOL_SPEC"),
]


def _without_descriptions(value):
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


@pytest.mark.parametrize(("ours", "name"), PAIRS, ids=[p[1] for p in PAIRS])
def test_tool_names_and_argument_schemas_are_the_references(ours, name) -> None:
    theirs = REFERENCE[name]
    assert _without_descriptions(ours) == _without_descriptions(theirs)
    # compat.md: the descriptions are agentrl's own wording.
    assert ours["function"]["description"] != theirs["function"]["description"]


def _reference_injection():
    """The reference's own ``_maybe_inject_instruction`` (a method of its prompt dataset),
    parsed out of its file and run as a function."""
    path = reference_path()
    assert path is not None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "PromptPoolDataset":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "_maybe_inject_instruction":
                    namespace = {"MATH_AGENT_SYSTEM_INSTRUCTION": ANSWER_INSTRUCTION}
                    module = ast.Module(body=[item], type_ignores=[])
                    exec(compile(module, str(path), "exec"), namespace)
                    return namespace["_maybe_inject_instruction"]
    raise AssertionError(f"{path}: no PromptPoolDataset._maybe_inject_instruction")


CONVERSATIONS = [
    [{"role": "user", "content": "2+3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}],
    [
        {"role": "system", "content": "Use calculate_math and reply <answer>x</answer>."},
        {"role": "user", "content": "2+3?"},
    ],
    [{"role": "system", "content": "calculate_math only"}, {"role": "user", "content": "q"}],
    [{"role": "user", "content": "q"}, {"role": "system", "content": "late system turn"}],
    [{"role": "system", "content": "   "}, {"role": "user", "content": "q"}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_instruction_is_placed_by_the_references_rule(messages) -> None:
    """compat.md: where and when the instruction goes follows the reference exactly (with
    its text swapped for agentrl's)."""
    reference = _reference_injection()
    holder = type("Pool", (), {"inject_answer_instruction": True})()
    want = reference(holder, copy.deepcopy(messages), ["calculate_math"])
    assert inject_instruction(copy.deepcopy(messages), ANSWER_INSTRUCTION) == want


def test_compat_md_says_the_instruction_text_and_descriptions_differ() -> None:
    theirs = REFERENCE["MATH_AGENT_SYSTEM_INSTRUCTION"]
    assert theirs != ANSWER_INSTRUCTION
    for point in ("calculate_math", "<answer>", "<tool_call>"):  # what both say
        assert point in theirs and point in ANSWER_INSTRUCTION
    assert "the instruction's text is agentrl's own" in COMPAT
    assert "descriptions are agentrl's own" in COMPAT
    assert "keeps the groups that lost trajectories" in COMPAT
