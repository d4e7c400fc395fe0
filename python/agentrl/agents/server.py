"""The OpenAI-compatible endpoint a run serves its agents: ``/v1/chat/completions``, ``/v1/models``.

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

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
# How many calls one episode may have in flight at once (parallel tool plans, graph
# branches): the endpoint's capacity is the run's episodes times this.
CALLS_PER_EPISODE = 32
# The capacity of an endpoint made without one (a test, a one-off evaluation).
DEFAULT_CAPACITY = 1024
_EPISODE_PATH = re.compile(r"^/episodes/([A-Za-z0-9_-]+)/v1/(chat/completions|models)/?$")

# One episode's handler: request body -> chat.completion object (raises RequestError).
Handler = Callable[[Mapping[str, Any]], dict[str, Any]]


def endpoint_capacity(episodes: int) -> int:
    """The capacity an endpoint needs for ``episodes`` at once, each with up to
    :data:`CALLS_PER_EPISODE` calls in flight (at least :data:`DEFAULT_CAPACITY`)."""
    return max(DEFAULT_CAPACITY, int(episodes) * CALLS_PER_EPISODE)


class EpisodeGone(Exception):
    """The episode's time is over: its calls are no longer served."""


class EndpointServer:
    """The run's endpoint: start once, register each episode's handler, close at the end."""

    def __init__(
        self, model: str, host: str = "127.0.0.1", capacity: int = DEFAULT_CAPACITY
    ) -> None:
        """``capacity``: the requests it serves at once (episodes x their concurrent
        calls); more connections wait in the listen backlog, more completions get 429."""
        self.model = model
        self.api_key = "agentrl-" + secrets.token_urlsafe(24)
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
        self._httpd = _Listener((host, 0), _Handler, backlog=backlog)
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

    def handler(self, token: str) -> Handler | EpisodeGone | None:
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

    def __enter__(self) -> EndpointServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        if path.rstrip("/") == "/v1/models":
            return "", "models"
        match = _EPISODE_PATH.match(path)
        if match is None:
            self._send(
                404,
                _error(f"no route {path} (use the episode's base_url)", "invalid_request_error"),
            )
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
            self._send(405, _error("use POST for chat completions", "invalid_request_error"))
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
        handler = self.owner.handler(token)
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
            reply = handler(body)
        except RequestError as exc:
            self._send(400, _error(str(exc), "invalid_request_error"))
            return
        except EpisodeGone:
            self._send(410, _error("this episode has ended", "invalid_request_error"))
            return
        except Exception as exc:  # the engine failed: the agent sees a server error
            logger.exception("agent endpoint: a chat completion failed")
            self._send(500, _error(f"{type(exc).__name__}: {exc}", "server_error"))
            return
        finally:
            self.owner.leave()
        if body.get("stream"):
            self._stream(reply, bool((body.get("stream_options") or {}).get("include_usage")))
        else:
            self._send(200, reply)

    def _stream(self, reply: Mapping[str, Any], usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in stream_chunks(reply, usage):
            self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def stream_chunks(reply: Mapping[str, Any], usage: bool) -> list[dict[str, Any]]:
    """A whole ``chat.completion`` as the ``chat.completion.chunk`` events of a stream."""
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


__all__ = [
    "CALLS_PER_EPISODE",
    "DEFAULT_CAPACITY",
    "EndpointServer",
    "EpisodeGone",
    "Handler",
    "endpoint_capacity",
    "stream_chunks",
]
