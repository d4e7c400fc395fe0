"""`agentrl serve`: one policy behind the endpoint a run serves its agents, outside any run.

The same parts as the endpoint inside training, only without episodes: the server
(`agentrl.agents.server.EndpointServer`, here with root routes, a chosen port and key),
the renderer and parser (`agentrl.agents.recorder.EpisodeRecorder`, keeping no call: each
request is rendered whole with the model's chat template and its replies parsed in its
family's call format, as a run does) and the batcher (`agentrl.agents.batcher.Batcher`:
the requests in flight meet in one ``engine.generate`` call). ``/v1/responses`` is read as
the chat completion it asks for (`agentrl.agents.responses`); ``/v1/completions`` samples
a raw prompt (text, texts or token ids) through the same batcher.

Not served: log-probs, ``echo`` with log-probs, ``suffix``, ``best_of``; a request asking
for them is answered 400. Streaming sends the whole reply as chunks once it is generated.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from agentrl.agents.batcher import Batcher
from agentrl.agents.recorder import (
    EpisodeRecorder,
    Limits,
    RequestError,
    finish_reason,
    fit_context,
    sampling_of,
)
from agentrl.agents.server import DEFAULT_CAPACITY, EndpointServer
from agentrl.utils.closing import Closing

# Fields of a text completion that ask for what is not served.
_UNSERVED: dict[str, tuple[Any, ...]] = {
    "logprobs": (None,),
    "suffix": (None, ""),
    "best_of": (None, 1),
}


def prompt_ids(body: Mapping[str, Any], tokenizer: Any) -> list[tuple[str, list[int]]]:
    """(text, ids) of each prompt of a ``/v1/completions`` body: a text, a list of texts, a
    list of token ids or a list of such lists (texts tokenized as the tokenizer does by
    default, ids decoded)."""
    prompt = body.get("prompt")
    one_ids = isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)
    if isinstance(prompt, str) or one_ids:
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise RequestError("'prompt' must be a string, a list of strings or of token ids")
    out: list[tuple[str, list[int]]] = []
    for item in prompt:
        if isinstance(item, str):
            out.append((item, list(tokenizer(item)["input_ids"])))
        elif isinstance(item, list) and item and all(isinstance(t, int) for t in item):
            if min(item) < 0 or max(item) >= len(tokenizer):
                raise RequestError(f"'prompt' holds a token id outside 0..{len(tokenizer) - 1}")
            out.append((tokenizer.decode(item), list(item)))
        else:
            raise RequestError("'prompt' must be a string, a list of strings or of token ids")
    return out


def text_completion(
    body: Mapping[str, Any],
    tokenizer: Any,
    limits: Limits,
    generate: Callable[..., list[list[Any]]],
) -> dict[str, Any]:
    """The ``text_completion`` object answering a ``/v1/completions`` body; ``generate``
    is `agentrl.agents.batcher.Batcher.submit_many` (the prompts are sampled together)."""
    for key, unset in _UNSERVED.items():
        if body.get(key) not in unset:
            raise RequestError(f"'{key}' is not served by agentrl serve")
    prompts = prompt_ids(body, tokenizer)
    params, budget, n = sampling_of(body, limits)
    echo = bool(body.get("echo"))
    choices: list[dict[str, Any]] = []
    used = made = 0
    contexts = [fit_context(ids, limits) for _, ids in prompts]
    for (given, ids), outputs in zip(prompts, generate(contexts, params, budget, n), strict=True):
        head = given if echo else ""
        for out in outputs:
            text = head + out.text
            reason = finish_reason(out)
            choices.append(
                {"index": len(choices), "text": text, "finish_reason": reason, "logprobs": None}
            )
            made += len(out.token_ids)
        used += len(ids)
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "agentrl"),
        "choices": choices,
        "usage": {"prompt_tokens": used, "completion_tokens": made, "total_tokens": used + made},
    }


class Throughput:
    """Requests and tokens served since the last line; :meth:`line` reads and resets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since = time.monotonic()
        self.requests = self.prompt_tokens = self.completion_tokens = 0

    def add(self, reply: Mapping[str, Any]) -> None:
        usage = reply.get("usage") or {}
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(usage.get("prompt_tokens", 0))
            self.completion_tokens += int(usage.get("completion_tokens", 0))

    def line(self, busy: int) -> str | None:
        """``served: R requests/s, T tokens/s ...`` over the time since the last line;
        None when nothing was served."""
        with self._lock:
            now = time.monotonic()
            seconds, self._since = max(now - self._since, 1e-9), now
            requests, prompt, made = self.requests, self.prompt_tokens, self.completion_tokens
            self.requests = self.prompt_tokens = self.completion_tokens = 0
        if not requests:
            return None
        return (
            f"served: {requests / seconds:.2f} requests/s, {made / seconds:.1f} tokens/s "
            f"generated, {prompt / seconds:.1f} prompt tokens/s ({requests} requests in "
            f"{seconds:.0f}s, {busy} in flight)"
        )


class ServedPolicy(Closing):
    """A policy's engine behind the endpoint: start it, read ``url`` and ``api_key``,
    :meth:`close` it. Every ``log_every`` seconds with traffic, a throughput line goes to
    ``log``."""

    def __init__(
        self,
        engine: Any,
        tokenizer: Any,
        limits: Limits,
        model: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        capacity: int = DEFAULT_CAPACITY,
        log_every: float = 10.0,
        log: Callable[[str], None] = print,
    ) -> None:
        self.tokenizer, self.limits, self.log = tokenizer, limits, log
        self.throughput = Throughput()
        # Every request in flight is waited for, so concurrent requests share a batch.
        self.batcher = Batcher(engine, lambda: self.server.busy)
        self.recorder = EpisodeRecorder(tokenizer, limits, self.batcher.submit, keep=False)
        routes = {"chat/completions": self._chat, "completions": self._completion}
        try:
            self.server = EndpointServer(
                model, host, capacity, port=port, api_key=api_key, routes=routes
            )
        except BaseException:
            self.batcher.stop()
            raise
        self._stop = threading.Event()
        self._logger = threading.Thread(
            target=self._report, args=(log_every,), daemon=True, name="agentrl-serve-log"
        )
        self._logger.start()

    @property
    def url(self) -> str:
        """The base URL clients take (ends in ``/v1``)."""
        return f"{self.server.url}/v1"

    @property
    def api_key(self) -> str:
        return self.server.api_key

    def _chat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._served(body, self.recorder.complete(body)[1])

    def _completion(self, body: Mapping[str, Any]) -> dict[str, Any]:
        reply = text_completion(body, self.tokenizer, self.limits, self.batcher.submit_many)
        return self._served(body, reply)

    def _served(self, body: Mapping[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        if not body.get("model"):  # named as the model served
            reply["model"] = self.server.model
        self.throughput.add(reply)
        return reply

    def _report(self, every: float) -> None:
        while not self._stop.wait(every):
            line = self.throughput.line(self.server.busy)
            if line is not None:
                self.log(line)

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self.batcher.stop()
        self._logger.join(timeout=5)


__all__ = ["ServedPolicy", "Throughput", "prompt_ids", "text_completion"]
