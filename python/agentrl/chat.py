"""Rendering conversations for a model, and the observation delta of a tool turn.

A tokenizer that ships a chat template renders with it (that is the format its model was
trained on). Otherwise the built-in template is used: MiniMind's Qwen-style layout with
``<|im_start|>``/``<|im_end|>`` turns, a ``# Tools`` block in the system turn, a
``<think>`` block in every assistant turn, tool calls as ``<tool_call>`` JSON blocks and
consecutive tool results grouped into one user turn of ``<tool_response>`` blocks.
:data:`CHAT_TEMPLATE` is the same layout as a Jinja template, for tokenizers we build.

During a multi-turn rollout the policy's context is re-rendered after each tool turn;
:func:`observation_delta` returns exactly the tokens the environment added (to be appended
with loss mask 0), even when the template re-renders earlier turns differently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

Message = dict[str, Any]

# Tokens of the chat layout, in MiniMind's id order (ids 0-2 are the special tokens;
# the tool and thinking markers are ordinary added tokens; the answer tags are agentrl's additions).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MARKUP_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
)

ROLE_ALIASES = {
    "human": "user",
    "gpt": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}
ROLES = ("system", "user", "assistant", "tool")

TOOLS_INTRO = (
    "# Tools\n\nYou can call the functions below to help with the request. "
    "Their signatures are listed inside <tools></tools> XML tags:\n<tools>"
)
TOOLS_OUTRO = (
    "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments "
    'inside <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)


def _jinja_literal(text: str) -> str:
    """``text`` as a single-quoted Jinja string literal."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


CHAT_TEMPLATE = (
    "{%- if open_thinking is defined %}{%- set think_open = open_thinking %}"
    "{%- elif enable_thinking is defined %}{%- set think_open = enable_thinking %}"
    "{%- else %}{%- set think_open = false %}{%- endif %}"
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- " + _jinja_literal(TOOLS_INTRO) + " }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- " + _jinja_literal(TOOLS_OUTRO) + " }}"
    "{%- elif messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.content is string %}{%- set content = message.content %}"
    "{%- elif message.content is none %}{%- set content = '' %}"
    "{%- else %}{%- set content = message.content | tojson %}{%- endif %}"
    "{%- if message.role == 'system' %}"
    "{%- if not loop.first %}"
    "{{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message.role == 'user' %}"
    "{{- '<|im_start|>user\\n' + content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set reasoning = '' %}"
    "{%- if message.reasoning_content is string %}"
    "{%- set reasoning = message.reasoning_content %}"
    "{%- elif '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') }}"
    "{%- if message.tool_calls %}{%- for call in message.tool_calls %}"
    "{%- if (loop.first and content) or (not loop.first) %}{{- '\\n' }}{%- endif %}"
    "{%- if call.function %}{%- set call = call.function %}{%- endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' }}'
    "{%- if call.arguments is string %}{{- call.arguments }}"
    "{%- else %}{{- call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if think_open %}{{- '<think>\\n' }}{%- else %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


class MessageError(ValueError):
    """A message that cannot be rendered; ``reason`` is a short machine-readable key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content_text(content: Any) -> str:
    """Message content as text: strings as is, text parts joined, other JSON compact."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, bool | int | float):
        return str(content)
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    try:
        return _compact_json(content)
    except (TypeError, ValueError) as exc:
        raise MessageError("bad_content", f"content is not text or JSON: {exc}") from None


def _normalize_tool_calls(raw: Any) -> list[dict[str, Any]]:
    """Assistant ``tool_calls`` (list, one object, or a JSON string; flat ``{name,
    arguments}`` as in MiniMind's data or OpenAI's nested form) in the OpenAI form
    ``{"type": "function", "function": {name, arguments}}`` that HF chat templates read.
    Arguments given as a JSON object string are decoded."""
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise MessageError("bad_tool_calls", "tool_calls is not valid JSON") from None
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise MessageError("bad_tool_calls", f"tool_calls is a {type(raw).__name__}")
    calls = []
    for item in raw:
        if not isinstance(item, dict):
            raise MessageError("bad_tool_calls", "a tool call is not an object")
        body = item["function"] if isinstance(item.get("function"), dict) else item
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise MessageError("bad_tool_calls", "a tool call has no name")
        arguments = body.get("arguments", {})
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                arguments = decoded
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def normalize_message(message: Any, unknown_role: str = "error") -> Message:
    """One message as ``{role, content[, tool_calls][, reasoning_content]}``.

    Accepts ``role``/``content`` and ``from``/``value`` keys and common role aliases
    (``human``, ``gpt``, ``function``, ...). ``unknown_role="user"`` maps any other role to
    ``user`` (the lenient reading of old datasets); the default raises :class:`MessageError`.
    """
    if not isinstance(message, Mapping):
        raise MessageError("bad_message", f"a message is a {type(message).__name__}, not an object")
    role = message.get("role", message.get("from", "user"))
    if not isinstance(role, str):
        raise MessageError("unknown_role", f"role {role!r} is not a string")
    role = ROLE_ALIASES.get(role.strip().lower(), role.strip().lower())
    if role not in ROLES:
        if unknown_role != "user":
            raise MessageError("unknown_role", f"unknown role {role!r}")
        role = "user"
    content = message.get("content", message.get("value", ""))
    out: Message = {"role": role, "content": _content_text(content)}
    if role == "assistant":
        calls = _normalize_tool_calls(message.get("tool_calls"))
        if calls:
            out["tool_calls"] = calls
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = reasoning
    return out


def normalize_messages(messages: Sequence[Any], unknown_role: str = "error") -> list[Message]:
    """:func:`normalize_message` over a conversation."""
    return [normalize_message(m, unknown_role=unknown_role) for m in messages]


def _split_reasoning(message: Message) -> tuple[str, str]:
    content = message.get("content", "")
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning, content
    if "</think>" in content:
        head, _, _ = content.partition("</think>")
        reasoning = head.rstrip("\n").split("<think>")[-1].lstrip("\n")
        return reasoning, content.split("</think>")[-1].lstrip("\n")
    return "", content


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> str:
    """Render with the built-in layout; identical to :data:`CHAT_TEMPLATE` in Jinja."""
    msgs = normalize_messages(messages)
    parts: list[str] = []
    leading_system = bool(msgs) and msgs[0]["role"] == "system"
    if tools:
        parts.append("<|im_start|>system\n")
        if leading_system:
            parts.append(msgs[0]["content"] + "\n\n")
        parts.append(TOOLS_INTRO)
        for spec in tools:
            parts.append("\n" + json.dumps(spec, ensure_ascii=False))
        parts.append(TOOLS_OUTRO)
    elif leading_system:
        parts.append("<|im_start|>system\n" + msgs[0]["content"] + "<|im_end|>\n")
    for index, msg in enumerate(msgs):
        role = msg["role"]
        if role == "system":
            if index > 0:
                parts.append("<|im_start|>system\n" + msg["content"] + "<|im_end|>\n")
        elif role == "user":
            parts.append("<|im_start|>user\n" + msg["content"] + "<|im_end|>\n")
        elif role == "assistant":
            reasoning, content = _split_reasoning(msg)
            parts.append(
                "<|im_start|>assistant\n<think>\n"
                + reasoning.strip("\n")
                + "\n</think>\n\n"
                + content.lstrip("\n")
            )
            for n, call in enumerate(msg.get("tool_calls", [])):
                if n > 0 or content:
                    parts.append("\n")
                call = call["function"]
                arguments = call["arguments"]
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                parts.append(
                    '<tool_call>\n{"name": "'
                    + call["name"]
                    + '", "arguments": '
                    + arguments
                    + "}\n</tool_call>"
                )
            parts.append("<|im_end|>\n")
        else:  # tool
            if index == 0 or msgs[index - 1]["role"] != "tool":
                parts.append("<|im_start|>user")
            parts.append("\n<tool_response>\n" + msg["content"] + "\n</tool_response>")
            if index == len(msgs) - 1 or msgs[index + 1]["role"] != "tool":
                parts.append("<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
        parts.append("<think>\n" if open_thinking else "<think>\n\n</think>\n\n")
    return "".join(parts)


_fallback_warned: set[str] = set()


def apply_chat_template(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> str:
    """Render through the tokenizer's own chat template, else the built-in one.

    The thinking switch is passed both as ``open_thinking`` (MiniMind) and
    ``enable_thinking`` (Qwen3). A template that rejects those arguments is retried
    without them, then without tools (in that order); one that fails every way falls
    back to the built-in layout. Fallbacks are logged once per tokenizer class.
    """
    msgs = normalize_messages(messages)
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if template:
        attempts: list[dict[str, Any]] = [
            {"tools": tools, "open_thinking": open_thinking, "enable_thinking": open_thinking},
            {"tools": tools},
            {},
        ]
        for index, extra in enumerate(attempts):
            try:
                text = tokenizer.apply_chat_template(
                    msgs, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
                )
            except Exception as exc:
                key = f"{type(tokenizer).__name__}:{index}"
                if key not in _fallback_warned:
                    _fallback_warned.add(key)
                    logger.warning("chat template attempt %d failed: %s", index + 1, exc)
                continue
            if isinstance(text, str):
                return text
    return render_chat(msgs, tools, add_generation_prompt, open_thinking)


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> list[int]:
    """Token ids of the rendered conversation (no extra BOS/EOS: the template has them)."""
    text = apply_chat_template(tokenizer, messages, tools, add_generation_prompt, open_thinking)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def suffix_delta(old_ids: Sequence[int], new_ids: Sequence[int]) -> list[int]:
    """The part of ``new_ids`` after its longest common prefix with ``old_ids``."""
    old, new = list(old_ids), list(new_ids)
    if len(new) >= len(old) and new[: len(old)] == old:
        return new[len(old) :]
    limit = min(len(old), len(new))
    common = 0
    while common < limit and old[common] == new[common]:
        common += 1
    return new[common:]


def observation_delta(
    context_ids: Sequence[int], generated_ids: Sequence[int], rerendered_ids: Sequence[int]
) -> list[int]:
    """Tokens the environment added after a generation, to append with loss mask 0.

    ``context_ids`` is the full rendered context the model generated from,
    ``generated_ids`` what it generated (without padding or EOS), ``rerendered_ids`` the
    conversation re-rendered with the assistant turn and the tool results appended.
    The delta is whatever follows the common prefix of ``context + generated`` and the
    re-rendering. If the template re-rendered the assistant turn differently so that the
    generated tokens reappear at the start of the delta, they are stripped: training on
    them twice would corrupt the policy-gradient context.
    """
    generated = list(generated_ids)
    delta = suffix_delta([*context_ids, *generated], rerendered_ids)
    if generated and len(delta) >= len(generated) and delta[: len(generated)] == generated:
        delta = delta[len(generated) :]
    return delta


__all__ = [
    "CHAT_TEMPLATE",
    "MARKUP_TOKENS",
    "ROLES",
    "ROLE_ALIASES",
    "SPECIAL_TOKENS",
    "MessageError",
    "apply_chat_template",
    "encode_chat",
    "normalize_message",
    "normalize_messages",
    "observation_delta",
    "render_chat",
    "suffix_delta",
]
