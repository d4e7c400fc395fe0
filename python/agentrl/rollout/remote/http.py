"""A small JSON-over-HTTP client with timeouts and retries (standard library only).

Rollout servers restart, drop connections under load and answer 503 while they load
weights; a training run should ride that out and fail with a clear message only when the
server is really gone. So every call has a timeout, and failures that can heal by
themselves (connection refused/reset, timeouts, 408/429/5xx answers) are retried with
exponential backoff. Client errors (other 4xx) are not retried: the same request would
be refused again.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrl.errors import UserError

# HTTP statuses worth retrying: timeouts, rate limits and server-side failures.
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# How long one request may take by default (a large batch of long generations).
REQUEST_TIMEOUT_S = 600.0


class RemoteEngineError(UserError, RuntimeError):
    """A rollout server could not be reached or refused a request; the message says which."""


class _Retryable(Exception):
    """Internal: a failure that may go away on a later attempt."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``attempts`` in all, waiting ``backoff_s`` x 2^k (capped) between."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    jitter: float = 0.1

    def delay(self, attempt: int) -> float:
        base = min(self.backoff_s * (2.0**attempt), self.max_backoff_s)
        return max(0.0, base * (1.0 + self.jitter * (2.0 * random.random() - 1.0)))


@dataclass
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        text = self.body.decode("utf-8", errors="replace")
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise RemoteEngineError(
                f"the server answered with invalid JSON: {text[:200]!r}"
            ) from exc


class JsonHttpClient:
    """POST/GET JSON to one base URL, with per-call timeouts and the retry policy."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        headers: dict[str, str] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"the server URL must start with http:// or https://: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.retries_done = 0

    def _once(self, method: str, path: str, payload: Any, timeout_s: float) -> Response:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers=self.headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                return Response(int(answer.status), answer.read())
        except urllib.error.HTTPError as exc:
            body = exc.read() if exc.fp is not None else b""
            if exc.code in RETRYABLE_STATUS:
                raise _Retryable(f"HTTP {exc.code}: {_snippet(body)}") from exc
            return Response(int(exc.code), body)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, socket.timeout | TimeoutError):
                raise _Retryable(f"no answer within {timeout_s:.0f}s") from exc
            raise _Retryable(f"{type(reason).__name__}: {reason}") from exc

    def request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        timeout_s: float | None = None,
        attempts: int | None = None,
    ) -> Response:
        """One call, retried on transient failures; raises RemoteEngineError when out of tries.

        Non-retryable answers (e.g. 400) are returned as they are: the caller decides.
        """
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        tries = max(1, self.retry.attempts if attempts is None else int(attempts))
        last = ""
        for attempt in range(tries):
            try:
                return self._once(method, path, payload, timeout)
            except _Retryable as exc:
                last = str(exc)
                if attempt + 1 < tries:
                    self.retries_done += 1
                    self.sleep(self.retry.delay(attempt))
        raise RemoteEngineError(
            f"{method} {self.base_url}{path} failed after {tries} attempt(s): {last}"
        )

    def post_json(self, path: str, payload: Any, **kwargs: Any) -> Any:
        """POST and decode the JSON answer; a non-2xx answer raises with the server's words."""
        response = self.request("POST", path, payload, **kwargs)
        if not 200 <= response.status < 300:
            raise RemoteEngineError(
                f"POST {self.base_url}{path} answered HTTP {response.status}: "
                f"{_snippet(response.body)}"
            )
        return response.json()


def _snippet(body: bytes, limit: int = 300) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


__all__ = ["RETRYABLE_STATUS", "JsonHttpClient", "RemoteEngineError", "Response", "RetryPolicy"]
