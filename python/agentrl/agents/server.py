"""The OpenAI-compatible endpoint a run serves its agents: ``/v1/chat/completions``,
``/v1/responses`` (read as the chat completion it asks for, `agentrl.agents.responses`),
``/v1/models``.

A standard-library HTTP server (``ThreadingHTTPServer``: one thread per connection, so
the requests of concurrent episodes wait together for the batcher) bound to 127.0.0.1 on a
free port. It is sized for ``capacity`` requests at once (a run passes its episodes x
:data:`CALLS_PER_EPISODE`, agents that fan out included): its listen backlog holds that
many connections, ``SOMAXCONN`` at least (as the kernel's ``somaxconn`` allows), so a
burst of connects is queued, never reset, and a chat completion beyond ``capacity`` in
flight is answered 429 with ``Retry-After``, a refusal every HTTP client understands.

Every request must carry the run's key (``Authorization: Bearer <key>``, a fresh random
key per run), or it is answered 401: no other process can sample from the policy.
Each episode gets its own base URL, ``http://127.0.0.1:<port>/episodes/<id>/v1``, so its
calls are recorded as its own; an episode that has ended is answered 410.

Streaming (``"stream": true``) answers with server-sent events in OpenAI's chunk format:
the whole reply is generated first, then sent as a content chunk, one chunk per tool call
and a last chunk with the finish reason (and usage when ``stream_options.include_usage``).

`agentrl serve` is this same server with ``routes``: ``/v1/chat/completions`` and
``/v1/completions`` outside any episode, on a port and key of the user's choosing
(`agentrl.agents.serving`).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrl.agents.recorder import RequestError
from agentrl.agents.responses import ResponseStore, response_events, serve_response
from agentrl.utils.closing import Closing

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
# How many calls one episode may have in flight at once (parallel tool plans, graph
# branches): the endpoint's capacity is the run's episodes times this.
CALLS_PER_EPISODE = 32
# The capacity of an endpoint made without one (a test, a one-off evaluation).
DEFAULT_CAPACITY = 1024
_EPISODE_PATH = re.compile(r"^/episodes/([A-Za-z0-9_-]+)/v1/(chat/completions|responses|models)/?$")
_ROOT_PATH = re.compile(r"^/v1/(chat/completions|completions|responses|models)/?$")

# One episode's handler: request body -> chat.completion object (raises RequestError).
Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


def endpoint_capacity(episodes: int) -> int:
    """The capacity an endpoint needs for ``episodes`` at once, each with up to
    :data:`CALLS_PER_EPISODE` calls in flight (at least :data:`DEFAULT_CAPACITY`)."""
    return max(DEFAULT_CAPACITY, int(episodes) * CALLS_PER_EPISODE)


class EpisodeGone(Exception):
    """The episode's time is over: its calls are no longer served."""


class EndpointServer(Closing):
    """The run's endpoint: start once, register each episode's handler, close at the end."""

    def __init__(
        self,
        model: str,
        host: str = "127.0.0.1",
        capacity: int = DEFAULT_CAPACITY,
        *,
        port: int = 0,
        api_key: str | None = None,
        routes: Mapping[str, Handler] | None = None,
    ) -> None:
        """``capacity``: the requests it serves at once (episodes x their concurrent
        calls); more connections wait in the listen backlog, more completions get 429.
        ``port`` 0 takes a free one; ``api_key`` None makes a fresh random key. ``routes``
        serve requests outside any episode, at ``/v1/<route>`` (``chat/completions``,
        ``completions``): `agentrl serve` (`agentrl.agents.serving`); a run has none."""
        self.model = model
        self.api_key = api_key or new_api_key()
        self.routes = dict(routes or {})
        if "chat/completions" in self.routes:  # answered by the chat completions handler
            self.routes.setdefault("responses", self.routes["chat/completions"])
        self.responses = ResponseStore()  # for previous_response_id
        self._episodes: dict[str, Handler] = {}
        self._ended: set[str] = set()
        self._lock = threading.Lock()
        self.refused = 0  # requests without the key
        self.capacity = max(1, int(capacity))
        self.busy = 0  # completions in flight
        self.too_busy = 0  # completions answered 429
        server = self

        class _Handler(_RequestHandler):
            owner = server

        # Connections wait in the backlog for a thread: one per request in flight, and the
        # kernel's own ceiling at least (a refusal needs an accepted connection to say 429).
        backlog = max(self.capacity, socket.SOMAXCONN)
        self._httpd = _Listener((host, port), _Handler, backlog=backlog)
        self.host, self.port = self._httpd.server_address[:2]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, daemon=True, name="agentrl-agent-endpoint"
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def open_episode(self, handler: Handler) -> str:
        """Register an episode; its base URL (ends in ``/v1``)."""
        token = uuid.uuid4().hex
        with self._lock:
            self._episodes[token] = handler
        return f"{self.url}/episodes/{token}/v1"

    def close_episode(self, base_url: str) -> None:
        token = base_url.rstrip("/").split("/")[-2]
        with self._lock:
            if self._episodes.pop(token, None) is not None:
                self._ended.add(token)

    def handler(self, token: str, route: str = "chat/completions") -> Handler | EpisodeGone | None:
        """The handler of an episode's calls (``token``), or of a root ``route`` (token "")."""
        if not token:
            return self.routes.get(route)
        with self._lock:
            if token in self._ended:
                return EpisodeGone()
            return self._episodes.get(token)

    def enter(self) -> bool:
        """Take a slot for one completion; False when ``capacity`` are in flight."""
        with self._lock:
            if self.busy >= self.capacity:
                self.too_busy += 1
                return False
            self.busy += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.busy -= 1

    def authorized(self, header: str | None) -> bool:
        expected = f"Bearer {self.api_key}"
        return header is not None and hmac.compare_digest(header.encode(), expected.encode())

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def new_api_key() -> str:
    """A fresh random API key."""
    return "agentrl-" + secrets.token_urlsafe(24)


class _Listener(ThreadingHTTPServer):
    """A threading HTTP server whose listen backlog is ``backlog`` (the standard library's
    is 5: a burst of concurrent connects overflows it and the kernel drops or resets them)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, *, backlog: int) -> None:
        self.request_queue_size = backlog  # read by server_activate(), inside __init__
        super().__init__(address, handler)


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


class _RequestHandler(BaseHTTPRequestHandler):
    owner: EndpointServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("agent endpoint: " + format, *args)

    def _send(self, status: int, body: Mapping[str, Any], retry_after: int = 0) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        if retry_after:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, str] | None:
        """(episode token, route) of the path; answers the request itself when it is
        refused (no key, unknown path) and returns None."""
        if not self.owner.authorized(self.headers.get("Authorization")):
            self.owner.refused += 1
            self._send(
                401, _error("missing or wrong API key", "invalid_request_error", "invalid_api_key")
            )
            return None
        path = self.path.split("?", 1)[0]
        root = _ROOT_PATH.match(path)
        if root is not None and (root.group(1) == "models" or root.group(1) in self.owner.routes):
            return "", root.group(1)
        match = _EPISODE_PATH.match(path)
        if match is None:
            served = ", ".join(f"/v1/{r}" for r in ("models", *self.owner.routes))
            hint = f"served: {served}" if self.owner.routes else "use the episode's base_url"
            self._send(404, _error(f"no route {path} ({hint})", "invalid_request_error"))
            return None
        return match.group(1), match.group(2)

    def _models(self) -> None:
        self._send(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": self.owner.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "agentrl",
                    }
                ],
            },
        )

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return
        if route[1] != "models":
            self._send(405, _error(f"use POST for /v1/{route[1]}", "invalid_request_error"))
            return
        self._models()

    def do_POST(self) -> None:
        route = self._route()
        if route is None:
            return
        token, name = route
        if name == "models":
            self._models()
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._send(413, _error(f"request over {MAX_BODY_BYTES} bytes", "invalid_request_error"))
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as exc:
            self._send(400, _error(f"body is not JSON: {exc}", "invalid_request_error"))
            return
        if not isinstance(body, dict):
            self._send(400, _error("body must be a JSON object", "invalid_request_error"))
            return
        handler = self.owner.handler(token, name)
        if isinstance(handler, EpisodeGone):
            self._send(410, _error("this episode has ended", "invalid_request_error"))
            return
        if handler is None:
            self._send(404, _error("unknown episode", "invalid_request_error"))
            return
        if not self.owner.enter():
            message = f"{self.owner.capacity} requests in flight: retry"
            self._send(429, _error(message, "rate_limit_error", "too_busy"), retry_after=1)
            return
        try:
            if name == "responses":
                reply = serve_response(body, handler, self.owner.responses)
            else:
                reply = handler(body)
        except RequestError as exc:
            self._send(400, _error(str(exc), "invalid_request_error"))
            return
        except EpisodeGone:
            self._send(410, _error("this episode has ended", "invalid_request_error"))
            return
        except Exception as exc:  # the engine failed: the agent sees a server error
            logger.exception("agent endpoint: a completion failed")
            self._send(500, _error(f"{type(exc).__name__}: {exc}", "server_error"))
            return
        finally:
            self.owner.leave()
        if not body.get("stream"):
            self._send(200, reply)
        elif reply["object"] == "response":  # named events, no [DONE]
            self._stream(response_events(reply), named=True)
        else:
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(stream_chunks(reply, usage), named=False)

    def _stream(self, events: list[dict[str, Any]], named: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            if named:
                self.wfile.write(f"event: {event['type']}\n".encode())
            self.wfile.write(b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n")
        if not named:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def stream_chunks(reply: Mapping[str, Any], usage: bool) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` as the ``chat.completion.chunk`` events of a stream (a
    ``text_completion`` as its own: its text, then its finish reason)."""
    if reply["object"] == "text_completion":
        return _text_chunks(reply, usage)
    base = {
        "id": reply["id"],
        "object": "chat.completion.chunk",
        "created": reply["created"],
        "model": reply["model"],
    }
    chunks: list[dict[str, Any]] = []
    for choice in reply["choices"]:
        i, message = choice["index"], choice["message"]
        first: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("reasoning_content"):
            first["reasoning_content"] = message["reasoning_content"]
        chunks.append({**base, "choices": [{"index": i, "delta": first, "finish_reason": None}]})
        for k, call in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{"index": k, **call}]}
            chunks.append(
                {**base, "choices": [{"index": i, "delta": delta, "finish_reason": None}]}
            )
        chunks.append(
            {
                **base,
                "choices": [{"index": i, "delta": {}, "finish_reason": choice["finish_reason"]}],
            }
        )
    if usage:
        chunks.append({**base, "choices": [], "usage": reply["usage"]})
    return chunks


def _text_chunks(reply: Mapping[str, Any], usage: bool) -> list[dict[str, Any]]:
    base = {k: reply[k] for k in ("id", "object", "created", "model")}
    chunks: list[dict[str, Any]] = []
    for choice in reply["choices"]:
        for text, finish in ((choice["text"], None), ("", choice["finish_reason"])):
            row = {"index": choice["index"], "text": text, "finish_reason": finish}
            chunks.append({**base, "choices": [{**row, "logprobs": None}]})
    if usage:
        chunks.append({**base, "choices": [], "usage": reply["usage"]})
    return chunks


__all__ = [
    "CALLS_PER_EPISODE",
    "DEFAULT_CAPACITY",
    "EndpointServer",
    "EpisodeGone",
    "Handler",
    "endpoint_capacity",
    "new_api_key",
    "stream_chunks",
]
