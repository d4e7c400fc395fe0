"""Rendering through a tokenizer's chat template, telling the model about its tools.

A tokenizer that ships a chat template renders with it (that is the format its model was
trained on); when that template does not render the tools it is given, the tools block goes
into the system turn (or the first user turn) in the template's own role markers, see
:func:`apply_chat_template`. A tokenizer without one renders the built-in layout
(`agentrl.chat.builtin`).

During a multi-turn rollout the policy's context only grows: :func:`observation_text` is
the text a tool turn adds after the model's own tokens (the turn's closing markers, the tool
results, the next generation prompt), whatever the template does to earlier turns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.chat.builtin import CHAT_TEMPLATE, render_chat, tools_block
from agentrl.chat.messages import Message, MessageError, normalize_message, normalize_messages
from agentrl.errors import UserError
from agentrl.tool_formats import render_calls, render_results, tool_format_of

# Named after the package: where its users look for the chat log lines.
logger = logging.getLogger("agentrl.chat")


class ChatTemplateError(UserError, ValueError):
    """A chat template that cannot render a conversation; the message names the template."""


BUILTIN_TEMPLATE = "builtin"
PROBE_TOOL = "agentrl_probe_tool"
_PROBE_SYSTEM = "agentrl-probe-system-text"


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
    chat template uses the built-in layout (a warning, once). Raises :class:`ChatTemplateError`
    when the template fails.
    """
    msgs = normalize_messages(messages)
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not template:
        key = type(tokenizer).__name__
        if key not in _builtin_logged:
            _builtin_logged.add(key)
            logger.warning(
                "%s has no chat template: rendering the built-in layout, which a pretrained "
                "model may never have seen; --chat_template FILE gives it its own",
                key,
            )
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


def turn_end_ids(tokenizer: Any) -> tuple[int, ...]:
    """The special token the chat template closes an assistant turn with, as ids.

    ChatML's ``<|im_end|>`` is usually the tokenizer's EOS as well; Gemma's
    ``<end_of_turn>`` (and others) is not, and a model trained on its own turns stops with
    it: the rollout engines end a turn there too. Found by rendering a one-turn exchange
    whose assistant content is a marker: ``()`` when the text after it does not begin with
    a special token. Remembered on the tokenizer for its current template.
    """
    template = getattr(tokenizer, "chat_template", None)
    known = getattr(tokenizer, "agentrl_turn_end", None)
    if isinstance(known, tuple) and len(known) == 2 and known[0] == template:
        return known[1]
    marker = "agentrl-" + uuid.uuid4().hex
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}]
    text = apply_chat_template(tokenizer, convo, None, add_generation_prompt=False)
    after = text[text.index(marker) + len(marker) :] if marker in text else ""
    ids: tuple[int, ...] = ()
    if after:
        first = tokenizer(after, add_special_tokens=False)["input_ids"][:1]
        special = set(getattr(tokenizer, "all_special_ids", None) or [])
        added = getattr(tokenizer, "added_tokens_encoder", None)
        if isinstance(added, Mapping):
            special.update(int(v) for v in added.values())
        ids = tuple(int(t) for t in first if int(t) in special)
    # A tokenizer that takes no attributes is probed again next time.
    with contextlib.suppress(AttributeError):
        tokenizer.agentrl_turn_end = (template, ids)
    return ids


__all__ = [
    "BUILTIN_TEMPLATE",
    "ChatTemplateError",
    "TemplateTraits",
    "apply_chat_template",
    "encode_chat",
    "observation_text",
    "template_name",
    "template_traits",
    "turn_end_ids",
    "use_chat_template",
]
