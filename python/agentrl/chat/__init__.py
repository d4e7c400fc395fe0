"""Rendering conversations for a model, and the text a tool turn adds to a rollout context.

* `agentrl.chat.messages`: every message shape datasets and agents write, normalised to
  ``{role, content[, tool_calls][, reasoning_content]}``;
* `agentrl.chat.builtin`: the built-in layout (MiniMind's Qwen-style turns), declared once
  as the Jinja template :data:`CHAT_TEMPLATE`, and :func:`render_chat` that renders it;
* `agentrl.chat.templates`: rendering through a tokenizer's own chat template so that the
  model always sees its tools (:func:`apply_chat_template`), ``--chat_template``, and the
  text a tool turn appends to a rollout (:func:`observation_text`).
"""

from agentrl.chat.builtin import (
    CHAT_TEMPLATE,
    MARKUP_TOKENS,
    SPECIAL_TOKENS,
    render_chat,
    tools_block,
)
from agentrl.chat.messages import (
    ROLE_ALIASES,
    ROLES,
    Message,
    MessageError,
    normalize_message,
    normalize_messages,
)
from agentrl.chat.templates import (
    BUILTIN_TEMPLATE,
    ChatTemplateError,
    TemplateTraits,
    apply_chat_template,
    encode_chat,
    observation_text,
    template_name,
    template_traits,
    turn_end_ids,
    use_chat_template,
)

__all__ = [
    "BUILTIN_TEMPLATE",
    "CHAT_TEMPLATE",
    "MARKUP_TOKENS",
    "ROLES",
    "ROLE_ALIASES",
    "SPECIAL_TOKENS",
    "ChatTemplateError",
    "Message",
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
    "turn_end_ids",
    "use_chat_template",
]
