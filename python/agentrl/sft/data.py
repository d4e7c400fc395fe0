"""Supervised examples from conversations: token ids plus a mask of the assistant tokens.

Loss is taken only on what the model itself must write (assistant turns, including the
end-of-turn token); system/user prompts and tool responses are context. Each assistant span
is found by rendering the conversation up to that turn, so any chat template works; the
pieces are tokenized separately so the boundary tokens match what the model sees when it
generates after a rendered prompt.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

Message = dict[str, Any]
# render(messages, tools, add_generation_prompt) -> text
Renderer = Callable[[list[Message], list[dict[str, Any]] | None, bool], str]


class BadConversation(ValueError):
    """A record that holds no usable demonstration; `reason` is a short counter key."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass
class Conversation:
    """One demonstration: messages in chat form and the tool specs shown to the model."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None


@dataclass
class Example:
    """Token ids of one training sequence and the 0/1 loss mask over them."""

    input_ids: list[int]
    loss_mask: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class LoadStats:
    """What happened to each input record; nothing is dropped without a reason."""

    loaded: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"loaded": self.loaded, "kept": self.kept, "dropped": dict(self.dropped)}


def normalize_conversation(record: dict[str, Any]) -> Conversation:
    """Accept `messages` or `conversations` (role/content or from/value), tools anywhere.

    Message shapes are normalised by `agentrl.chat` and tool fields by `agentrl.tools`, the
    same code the prompt pool and the renderer use. Raises `BadConversation` with a reason
    key for a record that holds no usable demonstration.
    """
    from agentrl.chat import MessageError, normalize_messages
    from agentrl.tools import ToolSchemaError, parse_tool_schema

    raw = record.get("messages", record.get("conversations"))
    if not isinstance(raw, list) or not raw:
        raise BadConversation("no_messages")
    try:
        messages = normalize_messages(raw)
    except MessageError as exc:
        raise BadConversation(exc.reason, exc.detail) from None
    tools_field = record.get("tools", record.get("functions"))
    if tools_field is None:
        tools_field = next(
            (m.get("tools") for m in raw if isinstance(m, dict) and m.get("tools") is not None),
            None,
        )
    try:
        tools = parse_tool_schema(tools_field)
    except ToolSchemaError as exc:
        raise BadConversation("bad_tools", str(exc)) from None
    # A trailing empty assistant turn is a generation slot, not a demonstration.
    while (
        messages
        and messages[-1]["role"] == "assistant"
        and not messages[-1]["content"]
        and not messages[-1].get("tool_calls")
    ):
        messages.pop()
    if not any(m["role"] == "assistant" for m in messages):
        raise BadConversation("no_assistant_turn")
    return Conversation(messages, tools)


def read_conversations(
    paths: Sequence[str | Path], stats: LoadStats | None = None
) -> list[Conversation]:
    """Load every good conversation from JSONL files; bad lines are counted by reason."""
    stats = stats if stats is not None else LoadStats()
    out: list[Conversation] = []
    for path in paths:
        with open(path, "rb") as handle:  # decoded line by line: one bad line is one skip
            for raw in handle:
                if not raw.strip():
                    continue
                stats.loaded += 1
                try:
                    line = raw.decode("utf-8-sig")
                except UnicodeDecodeError:
                    stats.dropped["bad_encoding"] += 1
                    continue
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):  # RecursionError: nesting too deep
                    stats.dropped["bad_json"] += 1
                    continue
                if not isinstance(record, dict):
                    stats.dropped["not_an_object"] += 1
                    continue
                try:
                    out.append(normalize_conversation(record))
                except BadConversation as exc:
                    stats.dropped[exc.reason] += 1
                    continue
                stats.kept += 1
    return out


def assistant_spans(
    conv: Conversation, render: Renderer, eos_text: str | None
) -> list[tuple[str, list[tuple[int, int]]]]:
    """Texts to train on, each with the character spans the model must produce.

    Usually one text holds every assistant turn. A template that re-renders earlier turns
    differently (e.g. drops old reasoning) breaks that; each turn then becomes its own text.
    """
    msgs = conv.messages
    full = render(msgs, conv.tools, False)
    per_turn: list[tuple[str, tuple[int, int]]] = []
    for i, msg in enumerate(msgs):
        if msg["role"] != "assistant":
            continue
        before = render(msgs[:i], conv.tools, True)
        upto = render(msgs[: i + 1], conv.tools, False)
        if not upto.startswith(before):
            raise ValueError(f"template output for turn {i} does not extend its prompt")
        end = len(upto)
        stripped = upto.rstrip()
        if eos_text and stripped.endswith(eos_text):
            end = len(stripped)
        per_turn.append((upto, (len(before), end)))
    if all(full.startswith(text) for text, _ in per_turn):
        return [(full, [span for _, span in per_turn])]
    return [(text, [span]) for text, span in per_turn]


def _pieces(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """`text` cut at the span edges, each piece flagged 1 inside a span, 0 outside."""
    out: list[tuple[str, int]] = []
    cursor = 0
    for start, end in sorted(spans):
        if start > cursor:
            out.append((text[cursor:start], 0))
        out.append((text[start:end], 1))
        cursor = end
    if cursor < len(text):
        out.append((text[cursor:], 0))
    return out


def _encode_many(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"])


def build_examples(
    conversations: Iterable[Conversation],
    tokenizer: Any,
    render: Renderer,
    max_len: int,
    stats: LoadStats | None = None,
) -> list[Example]:
    """Examples of at most `max_len` tokens; longer ones are dropped and counted.

    All pieces are tokenized in one batched call, which is much faster than one call each.
    """
    stats = stats if stats is not None else LoadStats()
    layouts: list[list[tuple[str, int]]] = []
    for conv in conversations:
        try:
            texts = assistant_spans(conv, render, tokenizer.eos_token)
        except ValueError:
            stats.dropped["template_mismatch"] += 1
            continue
        layouts.extend(_pieces(text, spans) for text, spans in texts)
    encoded = iter(_encode_many(tokenizer, [p for layout in layouts for p, _ in layout]))
    out: list[Example] = []
    for layout in layouts:
        ids: list[int] = []
        mask: list[int] = []
        for _, flag in layout:
            piece_ids = next(encoded)
            ids.extend(piece_ids)
            mask.extend([flag] * len(piece_ids))
        if len(ids) > max_len:
            stats.dropped["too_long"] += 1
        elif not any(mask):
            stats.dropped["empty_target"] += 1
        else:
            out.append(Example(ids, mask))
    return out


def bucketed_batches(
    lengths: Sequence[int],
    batch_tokens: int,
    max_batch: int,
    seed: int,
    window: int = 64,
    group_by_length: bool = True,
) -> list[list[int]]:
    """Index batches, each at most `batch_tokens` padded tokens. Deterministic for a seed.

    Grouped by length (the default): shuffles, sorts within windows of `window` batches'
    worth of examples (less padding), then shuffles the batch order. Sorting also groups
    what length correlates with: in generated demonstrations a task answered without a
    tool call is short, so its batches hold nothing else and the last few batches of a
    short run decide the habit for every prompt. ``group_by_length=False`` fills batches
    in shuffled order instead, so every batch carries the data's own mix.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    chunk = max(1, window * max_batch) if group_by_length else max(1, len(order))
    for lo in range(0, len(order), chunk):
        part = order[lo : lo + chunk]
        if group_by_length:
            part = sorted(part, key=lambda i: lengths[i])
        current: list[int] = []
        longest = 0
        for idx in part:
            longest_if = max(longest, lengths[idx])
            if current and (
                longest_if * (len(current) + 1) > batch_tokens or len(current) >= max_batch
            ):
                batches.append(current)
                current, longest_if = [], lengths[idx]
            current.append(idx)
            longest = longest_if
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(examples: Sequence[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask and loss mask; padding never carries loss."""
    width = max(len(e) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    loss = torch.zeros((len(examples), width), dtype=torch.long)
    for row, ex in enumerate(examples):
        n = len(ex)
        ids[row, :n] = torch.tensor(ex.input_ids, dtype=torch.long)
        attn[row, :n] = 1
        loss[row, :n] = torch.tensor(ex.loss_mask, dtype=torch.long)
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": loss}
