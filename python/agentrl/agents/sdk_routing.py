"""Agents written with the OpenAI Agents SDK's defaults, trained unchanged.

The SDK sends a model call through one default client per process (made from
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, or set with ``agents.set_default_openai_client``),
while every episode of a run has its own endpoint URL, and episodes play at the same time.
So while a run's agents play, the SDK's default client is one whose transport sends each
request to the endpoint of the episode that made it. The episode is a context variable set
around each agent call: an asyncio task and a thread each see their own, and the SDK's
``Runner.run_sync`` (which starts an event loop in the calling thread) inherits it.

The SDK's tracing, which would export every run to OpenAI's servers, is turned off. An
agent that hands the SDK a client of its own (``OpenAIChatCompletionsModel(model,
openai_client=endpoint.async_client)``, ``set_default_openai_client`` in its own code) keeps
it: only the default changes. Nothing happens when the SDK is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from agentrl.agents.endpoint import Endpoint

# What the SDK's default client is given as its base URL: the path prefix each request
# starts with, replaced by the calling episode's endpoint.
_PLACEHOLDER = "http://agentrl-episode.invalid/v1"
_PREFIX = "/v1"

CURRENT: ContextVar[Endpoint | None] = ContextVar("agentrl_episode_endpoint", default=None)


@contextmanager
def episode_scope(endpoint: Endpoint) -> Iterator[Endpoint]:
    """Model calls the Agents SDK makes by default in this context go to ``endpoint``."""
    token = CURRENT.set(endpoint)
    try:
        yield endpoint
    finally:
        CURRENT.reset(token)


def _transport() -> Any:
    import httpx2

    class EpisodeTransport(httpx2.AsyncBaseTransport):
        """Sends a request to the calling episode's endpoint, with its key.

        A connection pool belongs to one event loop and a run starts a loop per batch, so
        each request opens its own connection (to the loopback endpoint) and is read whole.
        """

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            endpoint = CURRENT.get()
            if endpoint is None:
                raise RuntimeError(
                    "an OpenAI Agents SDK model call outside an agentrl episode: while a run "
                    "plays, the SDK's default client serves the run's agents only"
                )
            base = httpx2.URL(endpoint.base_url)
            path = request.url.path
            suffix = path[len(_PREFIX) :] if path.startswith(_PREFIX) else path
            request.url = base.copy_with(
                path=base.path.rstrip("/") + suffix, query=request.url.query or None
            )
            request.headers["Authorization"] = f"Bearer {endpoint.api_key}"
            request.headers["Host"] = request.url.netloc.decode("ascii")
            async with httpx2.AsyncHTTPTransport() as inner:
                response = await inner.handle_async_request(request)
                body = await response.aread()
            return httpx2.Response(
                response.status_code, headers=response.headers, content=body, request=request
            )

    return EpisodeTransport()


def route_sdk_default_client() -> bool:
    """Make the OpenAI Agents SDK's default client route each call to its episode (see the
    module doc); False, and nothing changed, when the SDK is not installed."""
    try:
        import agents
    except ImportError:
        return False
    import httpx2
    import openai

    client = openai.AsyncOpenAI(
        base_url=_PLACEHOLDER,
        api_key="agentrl-episode",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=_transport(), timeout=None),
    )
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_tracing_disabled(True)
    return True


__all__ = ["CURRENT", "episode_scope", "route_sdk_default_client"]
