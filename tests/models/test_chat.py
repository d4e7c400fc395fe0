"""Chat rendering (the built-in MiniMind/Qwen layout, declared once as a Jinja template;
tokenizer templates) and the text a tool turn adds to a multi-turn rollout, on a tiny BPE
tokenizer built locally."""

from __future__ import annotations

import json

import pytest
from agentrl.chat import (
    CHAT_TEMPLATE,
    MARKUP_TOKENS,
    SPECIAL_TOKENS,
    ChatTemplateError,
    MessageError,
    apply_chat_template,
    encode_chat,
    normalize_message,
    observation_text,
    render_chat,
)
from agentrl.tools import builtin_registry, tool_message
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = [
    "计算 (12+7)*3 和 2**10",
    "Compute 45*6 and sqrt(81) please.",
    '{"name": "calculate_math", "arguments": {"expression": "1+1"}}',
    '{"value":7.0,"result":"7"} assistant user system',
    "You can call the functions below. <answer>7, 8</answer>",
]


def _tokenizer(template: str | None = CHAT_TEMPLATE) -> PreTrainedTokenizerFast:
    """A 400-token byte-level BPE with the chat markup as single tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.add_tokens(list(MARKUP_TOKENS))
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    hf.chat_template = template
    return hf


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return _tokenizer()


TOOLS = builtin_registry().specs()

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "计算3+4"}],
    [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "计算3+4和5*6"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"name": "calculate_math", "arguments": {"expression": "3+4"}},
                {
                    "type": "function",
                    "function": {"name": "calculate_math", "arguments": '{"expression": "5*6"}'},
                },
            ],
        },
        {"role": "tool", "content": '{"value":7.0,"result":"7"}'},
        {"role": "tool", "content": '{"value":30.0,"result":"30"}'},
        {"role": "assistant", "content": "<think>\nboth done\n</think>\n\n<answer>7, 30</answer>"},
    ],
    [
        {"role": "user", "content": "a"},
        {
            "role": "assistant",
            "content": "let me call",
            "reasoning_content": "\nthink first\n",
            "tool_calls": '[{"name": "f", "arguments": "raw-args"}]',
        },
        {"role": "tool", "content": "done"},
        {"role": "system", "content": "late system turn"},
        {"role": "user", "content": "again"},
    ],
    [{"role": "tool", "content": "orphan result"}, {"role": "user", "content": "x"}],
]


@pytest.mark.parametrize("conversation", CONVERSATIONS)
@pytest.mark.parametrize("tools", [None, TOOLS])
@pytest.mark.parametrize("generation", [True, False])
@pytest.mark.parametrize("open_thinking", [True, False])
def test_render_chat_equals_a_tokenizer_carrying_the_template(
    tokenizer, conversation, tools, generation, open_thinking
) -> None:
    ours = render_chat(conversation, tools, generation, open_thinking)
    jinja = apply_chat_template(tokenizer, conversation, tools, generation, open_thinking)
    assert ours == jinja


def test_the_builtin_layout_is_declared_once(monkeypatch) -> None:
    """render_chat has no layout of its own: it renders CHAT_TEMPLATE, so an edit to the
    template is an edit to everything the built-in layout renders."""
    from agentrl.chat import builtin

    msgs = [{"role": "user", "content": "hi"}]
    before = render_chat(msgs)
    edited = builtin.CHAT_TEMPLATE.replace("'<|im_start|>user\\n'", "'<|im_start|>human\\n'")
    assert edited != builtin.CHAT_TEMPLATE
    monkeypatch.setattr(builtin, "CHAT_TEMPLATE", edited)
    assert render_chat(msgs) == before.replace("<|im_start|>user\n", "<|im_start|>human\n")


def test_layout_of_a_tool_conversation() -> None:
    text = render_chat(CONVERSATIONS[2], TOOLS[:1], add_generation_prompt=False)
    spec_line = json.dumps(TOOLS[0], ensure_ascii=False)
    assert text.startswith("<|im_start|>system\nsys\n\n# Tools\n\n")
    assert f"<tools>\n{spec_line}\n</tools>" in text
    assert (
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        in text
    )
    assert (
        "<|im_start|>user\n计算3+4和5*6<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        '<tool_call>\n{"name": "calculate_math", "arguments": {"expression": "3+4"}}\n'
        "</tool_call>\n"
        '<tool_call>\n{"name": "calculate_math", "arguments": {"expression": "5*6"}}\n'
        "</tool_call>"
        "<|im_end|>\n"
        '<|im_start|>user\n<tool_response>\n{"value":7.0,"result":"7"}\n</tool_response>\n'
        '<tool_response>\n{"value":30.0,"result":"30"}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n<think>\nboth done\n</think>\n\n<answer>7, 30</answer><|im_end|>\n"
    ) in text
    assert text.count("<|im_start|>system") == 1


def test_generation_prompt_closed_or_open_thinking() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    assert render_chat(msgs) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert render_chat(msgs, open_thinking=True).endswith("<|im_start|>assistant\n<think>\n")
    assert render_chat(msgs, add_generation_prompt=False) == "<|im_start|>user\nhi<|im_end|>\n"


def test_reasoning_content_and_content_before_calls() -> None:
    text = render_chat(CONVERSATIONS[3], add_generation_prompt=False)
    assert (
        "<|im_start|>assistant\n<think>\nthink first\n</think>\n\nlet me call\n"
        '<tool_call>\n{"name": "f", "arguments": raw-args}\n</tool_call><|im_end|>\n'
    ) in text
    assert "<|im_start|>system\nlate system turn<|im_end|>\n" in text


def test_tokenizer_without_template_uses_the_builtin_layout() -> None:
    bare = _tokenizer(template=None)
    msgs = CONVERSATIONS[1]
    assert apply_chat_template(bare, msgs, TOOLS) == render_chat(msgs, TOOLS)
    assert apply_chat_template(None, msgs) == render_chat(msgs)


def test_tokenizer_with_its_own_template_is_used_with_thinking_switches() -> None:
    template = (
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% for t in tools or [] %}({{ t.function.name }}){% endfor %}"
        "{% if enable_thinking %}<open>{% endif %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    foreign = _tokenizer(template)
    msgs = [{"role": "user", "content": "q"}]
    names = "".join(f"({t['function']['name']})" for t in TOOLS)
    assert apply_chat_template(foreign, msgs, TOOLS) == f"[user]q{names}[assistant]"
    assert (
        apply_chat_template(foreign, msgs, None, open_thinking=True) == "[user]q<open>[assistant]"
    )


def test_template_failures_are_errors_never_a_silent_fallback() -> None:
    no_tools = _tokenizer("{% if tools %}{{ raise_exception('no tools here') }}{% endif %}plain")
    with pytest.raises(ChatTemplateError, match="no tools here"):
        apply_chat_template(no_tools, [{"role": "user", "content": "q"}], TOOLS)
    broken = _tokenizer("{{ raise_exception('always broken') }}")
    with pytest.raises(ChatTemplateError, match="always broken"):
        apply_chat_template(broken, [{"role": "user", "content": "q"}], TOOLS)


def test_encode_chat_adds_no_extra_special_tokens(tokenizer) -> None:
    ids = encode_chat(tokenizer, [{"role": "user", "content": "hi"}])
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.decode(ids) == render_chat([{"role": "user", "content": "hi"}])
    for token in (*SPECIAL_TOKENS, *MARKUP_TOKENS):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token


def test_normalize_message_accepts_aliases_and_content_shapes() -> None:
    assert normalize_message({"from": "human", "value": "x"}) == {"role": "user", "content": "x"}
    assert normalize_message({"from": "gpt", "value": "y"})["role"] == "assistant"
    assert normalize_message({"role": "function", "content": {"result": 1}}) == {
        "role": "tool",
        "content": '{"result":1}',
    }
    assert normalize_message({"role": "user", "content": None})["content"] == ""
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert normalize_message({"role": "user", "content": parts})["content"] == "ab"
    assert normalize_message({"role": "user", "content": 12})["content"] == "12"
    call = normalize_message(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": '{"name": "f", "arguments": "{\\"a\\": 1}"}',
        }
    )
    assert call["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    ]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("just text", "bad_message"),
        ({"role": "wizard", "content": "x"}, "unknown_role"),
        ({"role": 5, "content": "x"}, "unknown_role"),
        ({"role": "assistant", "content": "", "tool_calls": "{broken"}, "bad_tool_calls"),
        ({"role": "assistant", "content": "", "tool_calls": [{"arguments": {}}]}, "bad_tool_calls"),
        ({"role": "assistant", "content": "", "tool_calls": 7}, "bad_tool_calls"),
        ({"role": "user", "content": {"bad": {1, 2}}}, "bad_content"),
    ],
)
def test_normalize_message_reports_why_a_message_is_unusable(message, reason) -> None:
    with pytest.raises(MessageError) as info:
        normalize_message(message)
    assert info.value.reason == reason


def test_unknown_role_becomes_user_in_lenient_mode() -> None:
    assert normalize_message({"role": "wizard", "content": "x"}, unknown_role="user") == {
        "role": "user",
        "content": "x",
    }


# ---------------------------------------------------------------- observation text


def _ids(tok: PreTrainedTokenizerFast, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _tool_turn(tok, open_thinking: bool, generated: str):
    """One rollout turn: context ids, generated ids, the ids of the text the tool turn adds
    (`observation_text`), and the ids and text of the re-rendered conversation."""
    messages = [{"role": "user", "content": "计算3+4"}]
    context = apply_chat_template(tok, messages, TOOLS, True, open_thinking)
    messages.append({"role": "assistant", "content": generated})
    result = builtin_registry().run("calculate_math", {"expression": "3+4"})
    results = [{"role": "tool", "content": tool_message(result)}]
    added = observation_text(tok, messages, results, TOOLS, True, open_thinking)
    after = apply_chat_template(tok, messages + results, TOOLS, True, open_thinking)
    return _ids(tok, context), _ids(tok, generated), _ids(tok, added), _ids(tok, after), after


CALL = '<tool_call>\n{"name": "calculate_math", "arguments": {"expression": "3+4"}}\n</tool_call>'
OBSERVATION = (
    '<|im_end|>\n<|im_start|>user\n<tool_response>\n{"value":7.0,"result":"7"}\n'
    "</tool_response><|im_end|>\n<|im_start|>assistant\n"
)


@pytest.mark.parametrize("open_thinking", [False, True])
def test_observation_with_a_stable_template_rebuilds_the_rendering(
    tokenizer, open_thinking
) -> None:
    generated = ("weigh it\n</think>\n\n" if open_thinking else "") + CALL
    context_ids, gen_ids, added_ids, after_ids, _ = _tool_turn(tokenizer, open_thinking, generated)
    assert context_ids + gen_ids + added_ids == after_ids
    prompt = "<think>\n" if open_thinking else "<think>\n\n</think>\n\n"
    assert tokenizer.decode(added_ids) == OBSERVATION + prompt


# Qwen3-style: earlier assistant turns lose their <think> block when re-rendered.
DROP_THINK_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content }}"
    "{{- '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
)


def test_observation_when_the_template_drops_earlier_think_blocks() -> None:
    tok = _tokenizer(DROP_THINK_TEMPLATE)
    context_ids, gen_ids, added_ids, after_ids, after = _tool_turn(tok, False, CALL)
    assert CALL + "<|im_end|>" in after and "<think>\n\n</think>\n\n" + CALL not in after
    # Only the new text: the generated call does not come back as observation.
    assert tok.decode(added_ids) == OBSERVATION + "<think>\n\n</think>\n\n"
    running = context_ids + gen_ids + added_ids
    assert running != after_ids  # the re-rendering rewrote history; the running ids did not
    assert "<think>\n\n</think>\n\n" + CALL in tok.decode(running)


# A template whose system turn changes with the conversation (e.g. a turn counter).
COUNTING_TEMPLATE = (
    "{{- '<|im_start|>system\\nturns=' + (messages | length | string) + '<|im_end|>\\n' }}"
    + DROP_THINK_TEMPLATE
)


def test_observation_when_the_template_rewrites_the_start_of_the_context() -> None:
    tok = _tokenizer(COUNTING_TEMPLATE)
    context_ids, _gen, added_ids, after_ids, _ = _tool_turn(tok, False, CALL)
    # The counter of the first turn stays as the model saw it; the new text is appended.
    assert tok.decode(context_ids).startswith("<|im_start|>system\nturns=2<|im_end|>")
    assert tok.decode(added_ids).startswith("<|im_end|>\n<|im_start|>user\n<tool_response>")
    assert "turns=" not in tok.decode(added_ids)
    assert tok.decode(after_ids).startswith("<|im_start|>system\nturns=4<|im_end|>")


def test_observation_text_needs_an_assistant_turn_it_can_find(tokenizer) -> None:
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="ending with an assistant turn"):
        observation_text(tokenizer, user, [{"role": "tool", "content": "1"}])
    silent = _tokenizer(
        "{%- for m in messages %}{%- if m.role != 'assistant' %}{{- m.content }}{%- endif %}"
        "{%- endfor %}"
    )
    conversation = [*user, {"role": "assistant", "content": CALL}]
    with pytest.raises(ChatTemplateError, match="last assistant turn"):
        observation_text(silent, conversation, [{"role": "tool", "content": "1"}])


def test_multi_turn_alignment_with_the_builtin_template(tokenizer) -> None:
    """Prompt + generated (mask 1) + observations (mask 0) rebuild the final rendering."""
    messages = [{"role": "user", "content": "计算3+4和5*6"}]
    prompt_ids = encode_chat(tokenizer, messages, TOOLS)
    response: list[int] = []
    mask: list[int] = []
    script = [CALL, CALL.replace("3+4", "5*6"), "<answer>7, 30</answer>"]
    registry = builtin_registry()
    for turn, generated in enumerate(script):
        gen_ids = _ids(tokenizer, generated)
        response += gen_ids
        mask += [1] * len(gen_ids)
        if turn == len(script) - 1:
            break
        messages.append({"role": "assistant", "content": generated})
        expr = "3+4" if turn == 0 else "5*6"
        result = tool_message(registry.run("calculate_math", {"expression": expr}))
        results = [{"role": "tool", "content": result}]
        added = _ids(tokenizer, observation_text(tokenizer, messages, results, TOOLS))
        messages += results
        response += added
        mask += [0] * len(added)
    assert len(response) == len(mask)
    final = render_chat(messages, TOOLS) + script[-1]
    assert prompt_ids + response == _ids(tokenizer, final)
    assert sum(mask) == sum(len(_ids(tokenizer, s)) for s in script)


def test_nested_tool_calls_reach_templates_that_expect_the_openai_form() -> None:
    # A Llama-style template reads tool_call.function.name and fails on the flat form.
    template = (
        "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
        "{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    llama_like = _tokenizer(template)
    messages = [
        {"role": "user", "content": "q "},
        {"role": "assistant", "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]},
    ]
    assert apply_chat_template(llama_like, messages, add_generation_prompt=False) == 'q f({"x": 1})'
