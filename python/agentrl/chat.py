"""Rendering conversations for a model, and the text a tool turn adds to a rollout context.

A tokenizer that ships a chat template renders with it (that is the format its model was
trained on); when that template does not render the tools it is given, the tools block goes
into the system turn (or the first user turn) in the template's own role markers, see
:func:`apply_chat_template`. Otherwise the built-in template is used: MiniMind's
Qwen-style layout with ``<|im_start|>``/``<|im_end|>`` turns, a ``# Tools`` block in the
system turn, a ``<think>`` block in every assistant turn, tool calls as ``<tool_call>``
JSON blocks and consecutive tool results grouped into one user turn of ``<tool_response>`` blocks.
:data:`CHAT_TEMPLATE` is the same layout as a Jinja template, for tokenizers we build.

During a multi-turn rollout the policy's context only grows: :func:`observation_text` is
the text a tool turn adds after the model's own tokens (the turn's closing markers, the tool
results, the next generation prompt), whatever the template does to earlier turns.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.tool_formats import protocol_text, render_calls, render_results, tool_format_of

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


class ChatTemplateError(UserError, ValueError):
    """A chat template that cannot render a conversation; the message names the template."""


BUILTIN_TEMPLATE = "builtin"
PROBE_TOOL = "agentrl_probe_tool"
_PROBE_SYSTEM = "agentrl-probe-system-text"


def tools_block(tools: Sequence[Mapping[str, Any]], family: str = "hermes") -> str:
    """The tool list and call protocol as plain text, for a template that renders no tools.

    Same wording as the built-in layout's ``# Tools`` block, without its role markers: the
    caller places it inside a turn of the model's own template. The protocol shows calls in
    ``family``'s own format (see `agentrl.tool_formats`).
    """
    specs = "".join("\n" + json.dumps(spec, ensure_ascii=False) for spec in tools)
    return TOOLS_INTRO + specs + "\n</tools>\n\n" + protocol_text(family)


def use_chat_template(tokenizer: Any, choice: str) -> None:
    """Apply ``--chat_template``: ``''`` keeps the tokenizer's own template, ``builtin`` the
    built-in layout, anything else is a file: Jinja text, or a ``tokenizer_config.json``
    whose ``chat_template`` is used. The choice is remembered for error messages and logs."""
    if not choice:
        return
    if choice == BUILTIN_TEMPLATE:
        text, name = CHAT_TEMPLATE, "the built-in template"
    else:
        path = Path(choice).expanduser()
        if not path.is_file():
            raise ChatTemplateError(f"--chat_template {choice}: no such file (or 'builtin')")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            try:
                text = json.loads(text)["chat_template"]
            except (ValueError, KeyError, TypeError):
                raise ChatTemplateError(
                    f"--chat_template {choice}: a JSON file must hold a 'chat_template' string"
                ) from None
            if not isinstance(text, str):
                raise ChatTemplateError(f"--chat_template {choice}: 'chat_template' is not text")
        name = f"chat template {path}"
    tokenizer.chat_template = text
    tokenizer.agentrl_template_name = name


def template_name(tokenizer: Any) -> str:
    """How errors and logs name the template in use."""
    chosen = getattr(tokenizer, "agentrl_template_name", None)
    if isinstance(chosen, str):
        return chosen
    source = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return f"the chat template of {source}"


@dataclass(frozen=True)
class TemplateTraits:
    """What a chat template does with tools and a system turn (probed once per template).

    ``tool_path`` is how tools reach the prompt: ``template`` (the template renders the
    ``tools`` it is given), ``system`` (agentrl writes a tools block into the system turn)
    or ``first_user`` (into the first user turn: the template has no system role).
    """

    renders_tools: bool
    system_role: bool

    @property
    def tool_path(self) -> str:
        if self.renders_tools:
            return "template"
        return "system" if self.system_role else "first_user"

    def describe(self) -> str:
        """Where tools go, in words (for the log line and ``--show_prompt``)."""
        return {
            "template": "rendered by the template itself",
            "system": "not rendered by the template: agentrl writes a tools block into the "
            "system turn",
            "first_user": "not rendered by the template, which has no system role: agentrl "
            "writes a tools block at the start of the first user turn",
        }[self.tool_path]


_traits: dict[str, TemplateTraits] = {}


def _render(
    tokenizer: Any, messages: list[Message], add_generation_prompt: bool, **extra: Any
) -> str:
    try:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
        )
    except Exception as exc:
        raise ChatTemplateError(
            f"{template_name(tokenizer)} failed to render the conversation: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(text, str):
        raise ChatTemplateError(
            f"{template_name(tokenizer)} rendered a {type(text).__name__}, not text"
        )
    return text


def template_traits(tokenizer: Any) -> TemplateTraits:
    """Probe the tokenizer's template with a one-tool conversation and a system turn.

    A template renders tools when the probe tool's name appears in its output; it has a
    system role when a system turn renders (no error) with its text. Logged once per
    template, with the path tools take.
    """
    template = tokenizer.chat_template
    known = _traits.get(template)
    if known is not None:
        return known
    probe_tool = {
        "type": "function",
        "function": {
            "name": PROBE_TOOL,
            "description": "probe",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    user = {"role": "user", "content": "hi"}
    with_tools = _render(tokenizer, [user], True, tools=[probe_tool])
    try:
        system = _render(tokenizer, [{"role": "system", "content": _PROBE_SYSTEM}, user], True)
        system_role = _PROBE_SYSTEM in system
    except ChatTemplateError:
        system_role = False
    traits = TemplateTraits(PROBE_TOOL in with_tools, system_role)
    _traits[template] = traits
    logger.info("%s: tools are %s", template_name(tokenizer), traits.describe())
    return traits


def _inline_tool_protocol(messages: list[Message], family: str = "hermes") -> list[Message]:
    """Tool calls and results written as text, for a template that knows no tool role.

    Assistant calls are written after the content in ``family``'s own format; consecutive
    tool results become one user turn in that family's result form (`<tool_response>`
    blocks for most; see `agentrl.tool_formats.render_results`).
    """
    out: list[Message] = []
    pending: list[tuple[str, str]] = []
    last_calls: list[str] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": render_results(family, pending)})
            pending.clear()

    for msg in messages:
        if msg["role"] == "tool":
            # The result names its tool, else the call it answers (in order).
            answered = last_calls[len(pending)] if len(pending) < len(last_calls) else "tool"
            pending.append((str(msg.get("name") or answered), msg["content"]))
            continue
        flush()
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                body = call["function"]
                arguments = body["arguments"]
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except ValueError:
                        raise MessageError(
                            "bad_tool_calls", f"{body['name']}: arguments are not JSON"
                        ) from None
                if not isinstance(arguments, Mapping):
                    raise MessageError(
                        "bad_tool_calls", f"{body['name']}: arguments are not an object"
                    )
                calls.append((body["name"], arguments))
            last_calls = [name for name, _ in calls]
            try:
                text = render_calls(family, calls, msg["content"])
            except ValueError as exc:
                raise MessageError("bad_tool_calls", str(exc)) from None
            out.append({**{k: v for k, v in msg.items() if k != "tool_calls"}, "content": text})
        else:
            out.append(dict(msg))
    flush()
    return out


def _fold_system(messages: list[Message], extra: str) -> list[Message]:
    """Leading system text (and ``extra``) moved to the start of the first user turn."""
    head: list[str] = []
    rest = list(messages)
    while rest and rest[0]["role"] == "system":
        head.append(rest.pop(0)["content"])
    if extra:
        head.append(extra)
    if not head:
        return rest
    prefix = "\n\n".join(h for h in head if h)
    for index, msg in enumerate(rest):
        if msg["role"] == "user":
            rest[index] = {**msg, "content": prefix + "\n\n" + msg["content"]}
            return rest
    return [{"role": "user", "content": prefix}, *rest]


def _with_system_block(messages: list[Message], block: str) -> list[Message]:
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{**first, "content": first["content"] + "\n\n" + block}, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


_builtin_logged: set[str] = set()


def apply_chat_template(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> str:
    """Render through the tokenizer's chat template, telling the model about ``tools``.

    A template that renders tools gets them as ``tools``; for one that does not, a tools
    block goes into the system turn (or, without a system role, the first user turn) and
    tool calls/results are written as text (see :func:`template_traits`), in the model
    family's own format (``--tool_format``, or detected: `agentrl.tool_formats`). A template
    without a system role gets leading system text in the first user turn. The thinking
    switch is passed as ``open_thinking`` and ``enable_thinking``. A tokenizer without a
    chat template uses the built-in layout (logged once). Raises :class:`ChatTemplateError`
    when the template fails.
    """
    msgs = normalize_messages(messages)
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not template:
        key = type(tokenizer).__name__
        if key not in _builtin_logged:
            _builtin_logged.add(key)
            logger.info("%s has no chat template: using the built-in layout", key)
        return render_chat(msgs, tools, add_generation_prompt, open_thinking)
    thinking = {"open_thinking": open_thinking, "enable_thinking": open_thinking}
    traits = template_traits(tokenizer)
    if tools and traits.renders_tools:
        if not traits.system_role:
            msgs = _fold_system(msgs, "")
        return _render(tokenizer, msgs, add_generation_prompt, tools=list(tools), **thinking)
    if tools:
        family = tool_format_of(tokenizer).family
        msgs = _inline_tool_protocol(msgs, family)
        block = tools_block(tools, family)
        msgs = _with_system_block(msgs, block) if traits.system_role else _fold_system(msgs, block)
    elif not traits.system_role:
        msgs = _fold_system(msgs, "")
    return _render(tokenizer, msgs, add_generation_prompt, **thinking)


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


def observation_text(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    new_messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    open_thinking: bool = False,
) -> str:
    """The text a template writes after the content of the last assistant turn of
    ``messages`` once ``new_messages`` (tool results) follow it: that turn's closing
    markers, the new messages and, when asked, the next generation prompt.

    Why: during a rollout the model's context grows by appending, so only this text is
    new; re-rendering the whole conversation could rewrite earlier turns (a template that
    drops past ``<think>`` blocks, normalises whitespace, ...). The assistant content is
    replaced by a unique marker, so whatever the template does to the content itself does
    not matter; the text after the marker is the answer.
    """
    if not messages or normalize_message(messages[-1])["role"] != "assistant":
        raise ValueError("observation_text needs a conversation ending with an assistant turn")
    marker = "agentrl-" + uuid.uuid4().hex
    probe = [*messages[:-1], {"role": "assistant", "content": marker}, *new_messages]
    text = apply_chat_template(tokenizer, probe, tools, add_generation_prompt, open_thinking)
    if text.count(marker) != 1:
        raise ChatTemplateError(
            f"{template_name(tokenizer)} does not render the content of the last assistant "
            "turn once, so the text a tool turn adds cannot be found"
        )
    return text[text.index(marker) + len(marker) :]


__all__ = [
    "BUILTIN_TEMPLATE",
    "CHAT_TEMPLATE",
    "MARKUP_TOKENS",
    "ROLES",
    "ROLE_ALIASES",
    "SPECIAL_TOKENS",
    "ChatTemplateError",
    "MessageError",
    "TemplateTraits",
    "apply_chat_template",
    "encode_chat",
    "normalize_message",
    "normalize_messages",
    "observation_text",
    "render_chat",
    "template_name",
    "template_traits",
    "tools_block",
    "use_chat_template",
]
