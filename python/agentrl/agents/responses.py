"""OpenAI's Responses API (``/v1/responses``) on the endpoint's chat completions.

A Responses request is read as the chat completion it asks for, served by the same
handler (an episode's recorder in a run, the served policy in `agentrl serve`), and its
reply written back as a ``response`` object. So a Responses call is rendered, sampled,
parsed and recorded (token in, token out) exactly as a chat completion.

Read: ``input`` (a text, or a list of messages, ``function_call`` and
``function_call_output`` items), ``instructions``, function ``tools``, ``tool_choice``,
``temperature``, ``top_p``, ``max_output_tokens``, ``stream`` and ``previous_response_id``
(the conversation of a response this endpoint returned, kept for the last
:data:`KEPT_RESPONSES`). Other tool types (web search, file search, ...) are answered 400;
``reasoning`` items of the input are dropped (the model's own reasoning is not replayed,
as the chat template drops it).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from agentrl.agents.recorder import RequestError

KEPT_RESPONSES = 4096
# Fields of a request that shape nothing the model samples.
_PASSED = ("temperature", "top_p", "model", "user", "metadata", "store", "parallel_tool_calls")


def _text(content: Any, where: str) -> str:
    """A message's content: a text, or the text of its ``input_text``/``output_text`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("input_text", "output_text", "text"):
                raise RequestError(f"{where}: content part {kind!r} is not served (text only)")
            parts.append(str(part.get("text") or ""))
        return "".join(parts)
    raise RequestError(f"{where}: 'content' must be a string or a list of text parts")


def input_messages(raw: Any) -> list[dict[str, Any]]:
    """The chat messages of a Responses ``input``."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise RequestError("'input' must be a string or a list of items")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise RequestError(f"{where} must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(f"{where}: role {role!r} is not user, system or assistant")
            messages.append({"role": role, "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            call = {
                "id": str(item.get("call_id") or item.get("id") or ""),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
            }
            last = messages[-1] if messages else None  # one reply: its text and calls
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                messages.append(last)
            last.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, str) else _text(output, where)
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id") or ""), "content": content}
            )
        elif kind == "reasoning":
            continue
        else:
            raise RequestError(f"{where}: item type {kind!r} is not served")
    return messages


def _tools(body: Mapping[str, Any]) -> dict[str, Any]:
    tools = body.get("tools")
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise RequestError("'tools' must be a list")
    specs = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else tool
            raise RequestError(f"tool type {kind!r} is not served (function tools only)")
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        specs.append({"type": "function", "function": function})
    out: dict[str, Any] = {"tools": specs}
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        out["tool_choice"] = choice
    return out


class ResponseStore:
    """The conversations of the last :data:`KEPT_RESPONSES` responses, by id, for
    ``previous_response_id``."""

    def __init__(self, size: int = KEPT_RESPONSES) -> None:
        self.size = size
        self._kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, response_id: str) -> list[dict[str, Any]]:
        with self._lock:
            if response_id not in self._kept:
                raise RequestError(f"previous_response_id {response_id!r}: no such response")
            return list(self._kept[response_id])

    def put(self, response_id: str, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            self._kept[response_id] = messages
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


def chat_body(body: Mapping[str, Any], store: ResponseStore) -> dict[str, Any]:
    """The chat completion body a Responses request asks for."""
    messages: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if previous is not None:
        messages = store.get(str(previous))
    elif body.get("instructions"):
        messages = [{"role": "system", "content": str(body["instructions"])}]
    if body.get("input") is None:
        raise RequestError("'input' is required")
    messages += input_messages(body["input"])
    chat: dict[str, Any] = {"messages": messages, **_tools(body)}
    chat.update({k: body[k] for k in _PASSED if k in body})
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    return chat


def response_object(
    body: Mapping[str, Any], chat: Mapping[str, Any], reply: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``response`` object of a chat completion ``reply`` (its first choice)."""
    choice = reply["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    if message.get("content"):
        part = {"type": "output_text", "text": message["content"], "annotations": []}
        output.append(
            {
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:24],
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for call in message.get("tool_calls") or []:
        output.append(
            {
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    cut = choice["finish_reason"] == "length"
    usage = reply["usage"]
    return {
        "id": "resp_" + uuid.uuid4().hex[:24],
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": reply["model"],
        "instructions": body.get("instructions"),
        "output": output,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(body.get("tools") or []),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "previous_response_id": body.get("previous_response_id"),
        "metadata": body.get("metadata") or {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }


def conversation(chat: Mapping[str, Any], reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages a later ``previous_response_id`` continues: the request's and the reply."""
    message = {k: v for k, v in reply["choices"][0]["message"].items() if k != "reasoning_content"}
    return [*chat["messages"], message]


def serve_response(
    body: Mapping[str, Any],
    handler: Callable[[Mapping[str, Any]], dict[str, Any]],
    store: ResponseStore,
) -> dict[str, Any]:
    """Answer a Responses request with a chat completion ``handler``; the ``response``,
    kept in ``store`` for a later ``previous_response_id``."""
    chat = chat_body(body, store)
    reply = handler(chat)
    response = response_object(body, chat, reply)
    store.put(response["id"], conversation(chat, reply))
    return response


def response_events(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A whole ``response`` as the server-sent events of a Responses stream."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for k, part in enumerate(item["content"]):
                empty = {**part, "text": ""}
                emit("response.content_part.added", **at, content_index=k, part=empty)
                text = part["text"]
                emit("response.output_text.delta", **at, content_index=k, delta=text, logprobs=[])
                emit("response.output_text.done", **at, content_index=k, text=text, logprobs=[])
                emit("response.content_part.done", **at, content_index=k, part=part)
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            emit("response.function_call_arguments.delta", **at, delta=item["arguments"])
            emit(
                "response.function_call_arguments.done",
                **at,
                name=item["name"],
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)
    done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    emit(done, response=response)
    return events


__all__ = [
    "KEPT_RESPONSES",
    "ResponseStore",
    "chat_body",
    "conversation",
    "input_messages",
    "response_events",
    "response_object",
    "serve_response",
]
