"""The built-in chat layout: MiniMind's Qwen-style turns, declared once as a Jinja template.

``<|im_start|>``/``<|im_end|>`` turns, a ``# Tools`` block in the system turn, a
``<think>`` block in every assistant turn, tool calls as ``<tool_call>`` JSON blocks and
consecutive tool results grouped into one user turn of ``<tool_response>`` blocks.

:data:`CHAT_TEMPLATE` is the only declaration of the layout. Tokenizers we build carry it
(so a saved model renders in any HF-compatible runtime), and :func:`render_chat` renders
the same text through Jinja directly: the template compiled once, the way
``transformers`` compiles chat templates, without the tokenizer's per-call overhead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from agentrl.chat.messages import normalize_messages
from agentrl.tool_formats import protocol_text

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

TOOLS_INTRO = (
    "# Tools\n\nYou can call the functions below to help with the request. "
    "Their signatures are listed inside <tools></tools> XML tags:\n<tools>"
)
TOOLS_OUTRO = "\n</tools>\n\n" + protocol_text("hermes") + "<|im_end|>\n"


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


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """``transformers``' ``tojson`` filter: plain ``json.dumps`` (Jinja's own escapes HTML)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


@lru_cache(maxsize=4)
def _compiled(template: str) -> Any:
    """``template`` compiled with the environment options ``transformers`` uses."""
    import jinja2

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    return env.from_string(template)


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> str:
    """The conversation in the built-in layout: :data:`CHAT_TEMPLATE` rendered over the
    normalised messages (the text a tokenizer carrying the template renders)."""
    return _compiled(CHAT_TEMPLATE).render(
        messages=normalize_messages(messages),
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        open_thinking=open_thinking,
    )


def tools_block(tools: Sequence[Mapping[str, Any]], family: str = "hermes") -> str:
    """The tool list and call protocol as plain text, for a template that renders no tools.

    Same wording as the built-in layout's ``# Tools`` block, without its role markers: the
    caller places it inside a turn of the model's own template. The protocol shows calls in
    ``family``'s own format (see `agentrl.tool_formats`).
    """
    specs = "".join("\n" + json.dumps(spec, ensure_ascii=False) for spec in tools)
    return TOOLS_INTRO + specs + "\n</tools>\n\n" + protocol_text(family)


__all__ = [
    "CHAT_TEMPLATE",
    "MARKUP_TOKENS",
    "SPECIAL_TOKENS",
    "render_chat",
    "tools_block",
]
