"""One episode's chat completions: request -> prompt ids -> engine -> recorded reply.

Token in, token out. A request's messages are rendered with the model's chat template
(`agentrl.chat`), except where they continue an earlier call of the same episode: when
they repeat that call's messages and then the reply it got (content and tool calls as
returned), the prompt is that call's prompt ids, its completion ids exactly as sampled,
and only the text the template adds for the new messages (`agentrl.chat.observation_text`,
the same delta the built-in episode loop appends). So a multi-turn agent's calls join into
one sequence of the ids the model saw, whatever the template would do to a re-rendered
history; a request that repeats nothing earlier (the agent rewrote its history) is
rendered whole and starts a new sequence (`agentrl.agents.assemble`).

Replies carry the tool calls agentrl's parser finds (`agentrl.parsing.parse_message`) in
the OpenAI shape. The engine calls of all episodes go through one
`agentrl.agents.batcher.Batcher`, which gathers concurrent requests into one ``generate``
call.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentrl.agents.batcher import Batcher
from agentrl.chat import (
    MessageError,
    apply_chat_template,
    normalize_message,
    normalize_messages,
    observation_text,
)
from agentrl.parsing import parse_message
from agentrl.rollout.engine import Generation
from agentrl.rollout.sampling import SamplingParams

# Request fields read; fields that change nothing the model samples; the rest is counted.
READ_FIELDS = frozenset(
    (
        "messages",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "n",
        "stream",
        "stream_options",
    )
)
HARMLESS_FIELDS = frozenset(
    (
        "model",
        "user",
        "metadata",
        "store",
        "parallel_tool_calls",
        "seed",
        "service_tier",
        "functions",
        "function_call",
        "logprobs",
        "top_logprobs",
        "extra_body",
    )
)
MAX_CHOICES = 16


class RequestError(ValueError):
    """A request the endpoint cannot serve (answered 400 with this message)."""


@dataclass
class Choice:
    """One sampled completion of a call, as recorded and as returned."""

    completion_ids: list[int]
    logps: list[float]
    version: int
    text: str
    finish_reason: str  # OpenAI's: stop, length, tool_calls
    message: dict[str, Any]  # the reply message as returned to the agent


@dataclass
class CallRecord:
    """One chat completion request of an episode."""

    index: int
    messages: list[dict[str, Any]]  # normalized request messages
    tools: list[dict[str, Any]] | None  # the tools rendered into the prompt
    prompt_ids: list[int]
    choices: list[Choice] = field(default_factory=list)
    extends: tuple[int, int] | None = None  # (call, choice) whose ids this prompt continues
    new_messages: int = 0  # messages after the continued call's reply (all when rendered)
    truncated: bool = False
    ignored: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class Limits:
    """What bounds every call: the run's sampling defaults and token limits."""

    sampling: SamplingParams
    max_new_tokens: int
    max_context_len: int
    # A longer prompt: answered 400 (`agentrl serve`), not cut to its last tokens (a run).
    refuse_longer: bool = False


def _same_reply(sent: Mapping[str, Any], returned: Mapping[str, Any]) -> bool:
    """Whether a (normalized) history message is the reply we returned: the same content
    and the same tool calls (names and arguments; call ids and ``None`` content aside)."""
    if sent.get("role") != "assistant":
        return False
    ours = normalize_message(returned)
    if (sent.get("content") or "").strip() != (ours.get("content") or "").strip():
        return False

    def calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return [
            (c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls", [])
        ]

    return calls(sent) == calls(ours)


def _tool_specs(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RequestError("'tools' must be a list of objects")
    choice = body.get("tool_choice")
    if choice == "none" or not tools:
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        picked = [t for t in tools if (t.get("function") or {}).get("name") == name]
        if not picked:
            raise RequestError(f"tool_choice names {name!r}, which is not among 'tools'")
        return picked
    return list(tools)


def _number(body: Mapping[str, Any], key: str, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"'{key}' must be a number")
    return float(value)


def sampling_of(body: Mapping[str, Any], limits: Limits) -> tuple[SamplingParams, int, int]:
    """(sampling, new-token budget, n) of a request on top of the run's defaults.

    ``temperature`` 0 samples greedily; ``max_tokens`` is capped at the run's
    ``max_gen_len``; the behaviour log-probs keep the run's ``logprob_temperature``.
    """
    base = limits.sampling
    temperature = _number(body, "temperature", base.temperature)
    top_p = _number(body, "top_p", base.top_p)
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise RequestError("'stop' must be a string or a list of strings")
    raw_budget = body.get("max_completion_tokens", body.get("max_tokens"))
    budget = limits.max_new_tokens
    if raw_budget is not None:
        if isinstance(raw_budget, bool) or not isinstance(raw_budget, int) or raw_budget < 1:
            raise RequestError("'max_tokens' must be a positive integer")
        budget = min(raw_budget, limits.max_new_tokens)
    n = body.get("n", 1) if body.get("n") is not None else 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise RequestError(f"'n' must be an integer in 1..{MAX_CHOICES}")
    try:
        params = replace(
            base,
            temperature=max(temperature, 0.0),
            greedy=temperature <= 0.0,
            top_p=top_p,
            stop=tuple(stop),
            max_new_tokens=budget,
        )
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    return params, budget, n


def fit_context(ids: list[int], limits: Limits) -> list[int]:
    """The prompt ids the engine sees: the last ``max_context_len`` (``ids`` itself when
    they fit, so ``is not ids`` says it was cut; a RequestError when the limits refuse
    longer prompts)."""
    limit = limits.max_context_len
    if limit <= 0 or len(ids) <= limit:
        return ids
    if limits.refuse_longer:
        raise RequestError(
            f"the prompt is {len(ids)} tokens, over the {limit} served (--max_context_len)"
        )
    return ids[-limit:]


def finish_reason(generation: Generation, calls: bool = False) -> str:
    """OpenAI's finish reason of a completion: tool_calls, length or stop."""
    if calls:
        return "tool_calls"
    return "length" if generation.finish_reason == "length" else "stop"


def reply_message(
    text: str, tools: list[dict[str, Any]] | None, tool_format: str = "auto"
) -> tuple[dict[str, Any], bool]:
    """The OpenAI reply message of a completion text, and whether it calls tools
    (``tool_format``: the family to read, see `agentrl.parsing.TOOL_FORMATS`)."""
    if not tools:
        return {"role": "assistant", "content": text}, False
    parsed = parse_message(text, tools=tools, tool_format=tool_format)
    calls = [
        {
            "id": "call_" + uuid.uuid4().hex[:24],
            "type": "function",
            "function": {
                "name": c["name"],
                "arguments": json.dumps(c["arguments"], ensure_ascii=False),
            },
        }
        for c in parsed.calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content or None}
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning
    if calls:
        message["tool_calls"] = calls
    return message, bool(calls)


class EpisodeRecorder:
    """The calls of one episode: renders each request, asks the batcher, records."""

    def __init__(
        self,
        tokenizer: Any,
        limits: Limits,
        generate: Callable[
            [list[int], SamplingParams, int, int, Hashable | None], list[Generation]
        ],
        cache_key: Hashable | None = None,
        *,
        keep: bool = True,
    ) -> None:
        """``keep`` False keeps no call (`agentrl serve`: no episode, nothing to train):
        every request is rendered whole and nothing grows with the requests served."""
        self.keep = keep
        self.tokenizer = tokenizer
        self.limits = limits
        self.generate = generate
        self.cache_key = cache_key
        self.calls: list[CallRecord] = []
        self.lock = threading.Lock()
        self.in_flight = 0

    # ------------------------------------------------------------------ prompt ids

    def _tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _continued(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[CallRecord, int] | None:
        """The latest earlier call (and choice) whose messages and reply these repeat."""
        with self.lock:
            calls = list(self.calls)
        for call in reversed(calls):
            n = len(call.messages)
            if call.tools != tools or len(messages) <= n + 1 or messages[:n] != call.messages:
                continue
            for k, choice in enumerate(call.choices):
                if _same_reply(messages[n], choice.message):
                    return call, k
        return None

    def prompt_ids(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[list[int], tuple[int, int] | None, int]:
        """(prompt ids, the (call, choice) they continue or None, new messages)."""
        found = self._continued(messages, tools)
        if found is not None:
            call, k = found
            choice = call.choices[k]
            n = len(call.messages)
            raw = {"role": "assistant", "content": choice.text}
            added = observation_text(
                self.tokenizer, [*call.messages, raw], messages[n + 1 :], tools, True, False
            )
            ids = call.prompt_ids + choice.completion_ids + self._tokenize(added)
            return ids, (call.index, k), len(messages) - n - 1
        text = apply_chat_template(self.tokenizer, messages, tools, True, False)
        return self._tokenize(text), None, len(messages)

    # ------------------------------------------------------------------ a request

    def complete(self, body: Mapping[str, Any]) -> tuple[CallRecord, dict[str, Any]]:
        """Serve one request body; the record and the OpenAI response object."""
        began = time.perf_counter()
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise RequestError("'messages' must be a non-empty list")
        # OpenAI's newer name for the system role.
        raw = [
            dict(m, role="system") if isinstance(m, dict) and m.get("role") == "developer" else m
            for m in raw
        ]
        try:
            messages = normalize_messages(raw)
        except MessageError as exc:
            raise RequestError(f"messages: {exc}") from None
        tools = _tool_specs(body)
        params, budget, n = sampling_of(body, self.limits)
        ignored = sorted(k for k in body if k not in READ_FIELDS and k not in HARMLESS_FIELDS)
        ids, extends, new = self.prompt_ids(messages, tools)
        context = fit_context(ids, self.limits)
        with self.lock:
            key = self.cache_key if (self.in_flight == 0 and n == 1) else None
            self.in_flight += 1
        try:
            outputs = self.generate(context, params, budget, n, key)
        finally:
            with self.lock:
                self.in_flight -= 1
        choices = []
        for out in outputs:
            tool_format = getattr(self.tokenizer, "agentrl_tool_format", "auto")
            message, calls = reply_message(out.text, tools, tool_format)
            finish = finish_reason(out, calls)
            choices.append(
                Choice(
                    list(out.token_ids),
                    list(out.logps),
                    int(out.version),
                    out.text,
                    finish,
                    message,
                )
            )
        with self.lock:
            record = CallRecord(
                len(self.calls),
                messages,
                tools,
                ids,
                choices,
                extends,
                new,
                context is not ids,
                ignored,
                time.perf_counter() - began,
            )
            if self.keep:
                self.calls.append(record)
        return record, response_body(record, str(body.get("model") or "agentrl"))


def response_body(record: CallRecord, model: str) -> dict[str, Any]:
    """The ``chat.completion`` object of a recorded call."""
    completion = sum(len(c.completion_ids) for c in record.choices)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": i, "message": c.message, "finish_reason": c.finish_reason, "logprobs": None}
            for i, c in enumerate(record.choices)
        ],
        "usage": {
            "prompt_tokens": len(record.prompt_ids),
            "completion_tokens": completion,
            "total_tokens": len(record.prompt_ids) + completion,
        },
    }


__all__ = [
    "Batcher",
    "CallRecord",
    "Choice",
    "EpisodeRecorder",
    "Limits",
    "RequestError",
    "finish_reason",
    "fit_context",
    "reply_message",
    "response_body",
    "sampling_of",
]
