"""Tool-aware rendering on the chat templates of three model families.

Each template is set on a locally built tokenizer: a Qwen3-style one that renders tools
itself, a ChatML one that ignores them (SmolLM-style) and one without a system role that
raises on it (Gemma/Mistral-style). The tools must reach the prompt in every case.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from agentrl.chat import (
    ChatTemplateError,
    apply_chat_template,
    template_traits,
    tools_block,
    use_chat_template,
)

from tests.fakes.chat_templates import CHATML_NO_TOOLS, NO_SYSTEM_ROLE, QWEN3_STYLE
from tests.fakes.models import tiny_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate_math",
            "description": "Evaluate an arithmetic expression",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "unit_converter",
            "description": "Convert units",
            "parameters": {"type": "object", "properties": {"value": {"type": "number"}}},
        },
    },
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 17*23?"},
    {"role": "assistant", "content": '<tool_call>\n{"name": "calculate_math"}\n</tool_call>'},
    {"role": "tool", "content": "391"},
    {"role": "tool", "content": "ok"},
]


def _tokenizer(template: str) -> Any:
    tok = copy.deepcopy(tiny_tokenizer())
    tok.chat_template = template
    return tok


def test_qwen3_style_template_renders_tools_itself() -> None:
    tok = _tokenizer(QWEN3_STYLE)
    traits = template_traits(tok)
    assert (traits.renders_tools, traits.system_role, traits.tool_path) == (True, True, "template")
    text = apply_chat_template(tok, CONVERSATION[:2], TOOLS)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\n")
    assert text.count('"name": "calculate_math"') == 1
    assert "You can call the functions" not in text  # no second, agentrl-written block
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_chatml_without_tools_gets_a_block_in_its_system_turn() -> None:
    tok = _tokenizer(CHATML_NO_TOOLS)
    assert template_traits(tok).tool_path == "system"
    text = apply_chat_template(tok, CONVERSATION, TOOLS)
    expected_system = "<|im_start|>system\nBe brief.\n\n" + tools_block(TOOLS) + "<|im_end|>\n"
    assert text.startswith(expected_system)
    assert '"name": "unit_converter"' in text
    # Tool results in the protocol the block states, as one user turn in ChatML markers.
    assert "<|im_start|>user\n<tool_response>\n391\n</tool_response>\n<tool_response>\nok\n" in text
    assert "<|im_start|>tool" not in text
    # Without a system message the block makes one (replacing the template's default).
    bare = apply_chat_template(tok, CONVERSATION[1:2], TOOLS)
    assert bare.startswith("<|im_start|>system\n" + tools_block(TOOLS) + "<|im_end|>\n")
    assert "You are a helpful assistant." not in bare
    # No tools: the template alone.
    plain = apply_chat_template(tok, CONVERSATION[1:2], None)
    assert plain.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")


def test_template_without_system_role_gets_the_block_in_the_first_user_turn() -> None:
    tok = _tokenizer(NO_SYSTEM_ROLE)
    traits = template_traits(tok)
    assert (traits.renders_tools, traits.system_role, traits.tool_path) == (
        False,
        False,
        "first_user",
    )
    text = apply_chat_template(tok, CONVERSATION, TOOLS)
    first_user = "<start_of_turn>user\nBe brief.\n\n" + tools_block(TOOLS).strip()
    assert text.startswith(tok.bos_token + first_user)
    assert "What is 17*23?<end_of_turn>\n<start_of_turn>model\n<tool_call>" in text
    assert text.count("<start_of_turn>user\n<tool_response>") == 1
    assert text.endswith("<start_of_turn>model\n")
    # A system message without tools is folded too, instead of raising.
    plain = apply_chat_template(tok, CONVERSATION[:2], None)
    assert plain.startswith(tok.bos_token + "<start_of_turn>user\nBe brief.\n\nWhat is")


def test_the_tool_path_is_logged_once_per_template(caplog: pytest.LogCaptureFixture) -> None:
    tok = _tokenizer(CHATML_NO_TOOLS + "{# log probe #}")
    with caplog.at_level(logging.INFO, logger="agentrl.chat"):
        apply_chat_template(tok, CONVERSATION[1:2], TOOLS)
        apply_chat_template(tok, CONVERSATION[1:2], TOOLS)
    lines = [r.getMessage() for r in caplog.records if "tools are" in r.getMessage()]
    assert len(lines) == 1
    assert "agentrl writes a tools block into the system turn" in lines[0]


def test_a_template_that_raises_is_an_error_naming_it(tmp_path: Any) -> None:
    tok = _tokenizer("{{ raise_exception('this template needs a date string') }}")
    path = tmp_path / "broken.jinja"
    path.write_text(tok.chat_template)
    use_chat_template(tok, str(path))
    with pytest.raises(ChatTemplateError, match=r"broken\.jinja.*needs a date string"):
        apply_chat_template(tok, CONVERSATION[1:2], TOOLS)


def test_chat_template_override_from_file_json_and_builtin(tmp_path: Any) -> None:
    tok = _tokenizer(CHATML_NO_TOOLS)
    jinja = tmp_path / "qwen.jinja"
    jinja.write_text(QWEN3_STYLE)
    use_chat_template(tok, str(jinja))
    assert tok.chat_template == QWEN3_STYLE
    config = tmp_path / "tokenizer_config.json"
    config.write_text('{"chat_template": "{{ messages[0].content }}"}')
    use_chat_template(tok, str(config))
    assert apply_chat_template(tok, CONVERSATION[1:2], None) == "What is 17*23?"
    use_chat_template(tok, "builtin")
    text = apply_chat_template(tok, CONVERSATION[1:2], TOOLS)
    assert "# Tools" in text and '"name": "calculate_math"' in text
    with pytest.raises(ChatTemplateError, match="no such file"):
        use_chat_template(tok, str(tmp_path / "missing.jinja"))
    with pytest.raises(ChatTemplateError, match="'chat_template' string"):
        (tmp_path / "bad.json").write_text("{}")
        use_chat_template(tok, str(tmp_path / "bad.json"))


def test_the_turn_end_token_of_a_template_ends_generation() -> None:
    """Gemma's <end_of_turn> is not its EOS: the engines stop there all the same."""
    from agentrl.chat import turn_end_ids
    from agentrl.rollout.batch_engine import tokenizer_end_ids

    tok = _tokenizer(NO_SYSTEM_ROLE)
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    end_of_turn = tok.convert_tokens_to_ids("<end_of_turn>")
    assert end_of_turn != tok.eos_token_id
    assert turn_end_ids(tok) == (end_of_turn,)
    assert tokenizer_end_ids(tok)[-1] == end_of_turn
    # ChatML closes a turn with its EOS: nothing new.
    chatml = _tokenizer(CHATML_NO_TOOLS)
    assert turn_end_ids(chatml) == (chatml.convert_tokens_to_ids("<|im_end|>"),)
    assert sorted(set(tokenizer_end_ids(chatml))) == sorted(
        {chatml.eos_token_id, chatml.pad_token_id}
    )
    # Without the special token the text after the turn is plain: no end id is added.
    plain = _tokenizer(NO_SYSTEM_ROLE)
    assert turn_end_ids(plain) == ()


def test_the_gemma3_example_template_folds_system_text_into_the_first_user_turn() -> None:
    from pathlib import Path

    from agentrl.chat import turn_end_ids

    tok = copy.deepcopy(tiny_tokenizer())
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    path = Path(__file__).resolve().parents[2] / "examples" / "gemma3_chat_template.jinja"
    use_chat_template(tok, str(path))
    text = apply_chat_template(tok, CONVERSATION, TOOLS)
    assert text.startswith(tok.bos_token + "<start_of_turn>user\nBe brief.\n\n# Tools\n")
    assert "What is 17*23?<end_of_turn>\n<start_of_turn>model\n<tool_call>" in text
    assert "<start_of_turn>user\n<tool_response>\n391\n</tool_response>" in text
    assert text.endswith("<start_of_turn>model\n")
    assert turn_end_ids(tok) == (tok.convert_tokens_to_ids("<end_of_turn>"),)
