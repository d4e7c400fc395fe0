"""The agent endpoint under a burst: 64 episodes of 20 concurrent calls each connect at
once; every call is answered (or refused with 429 and Retry-After), none is reset."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from agentrl.agents.server import EndpointServer, endpoint_capacity

EPISODES, CALLS = 64, 20


def _reply(body: Any) -> dict[str, Any]:
    time.sleep(0.05)  # the batcher's wait: every call of the burst is in flight together
    return {"id": "x", "object": "chat.completion", "echo": body["n"]}


def _burst(server: EndpointServer, urls: list[str], calls: int) -> list[tuple[int, Any]]:
    """Every episode's ``calls`` calls at once, released together: (status, reply or error)."""
    jobs = [(url, n) for url in urls for n in range(calls)]
    results: list[tuple[int, Any]] = [(0, None)] * len(jobs)
    start = threading.Barrier(len(jobs), timeout=60)

    def call(k: int) -> None:
        url, n = jobs[k]
        path = url.split(f":{server.port}", 1)[1] + "/chat/completions"
        start.wait()
        try:
            conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
            headers = {"Authorization": f"Bearer {server.api_key}"}
            conn.request("POST", path, json.dumps({"n": n}), headers)
            response = conn.getresponse()
            results[k] = (response.status, (json.loads(response.read()), response.headers))
            conn.close()
        except OSError as exc:  # a reset or refused connection: what must not happen
            results[k] = (-1, exc)

    threads = [threading.Thread(target=call, args=(k,), daemon=True) for k in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_64_episodes_of_20_concurrent_calls_are_all_answered() -> None:
    with EndpointServer("tiny", capacity=endpoint_capacity(EPISODES)) as server:
        urls = [server.open_episode(_reply) for _ in range(EPISODES)]
        results = _burst(server, urls, CALLS)
    failed = [r for r in results if r[0] != 200]
    assert not failed, f"{len(failed)} of {len(results)} calls failed: {failed[:3]}"
    assert sorted(r[1][0]["echo"] for r in results) == sorted(list(range(CALLS)) * EPISODES)
    assert server.too_busy == 0 and server.busy == 0


def test_calls_beyond_the_capacity_are_refused_with_429_never_reset() -> None:
    with EndpointServer("tiny", capacity=8) as server:
        urls = [server.open_episode(_reply) for _ in range(4)]
        results = _burst(server, urls, 16)
    statuses = [status for status, _ in results]
    assert set(statuses) <= {200, 429}, [r for r in results if r[0] not in (200, 429)][:3]
    assert statuses.count(429) == server.too_busy > 0 and statuses.count(200) >= 8
    refused = next(reply for status, reply in results if status == 429)
    assert refused[1]["Retry-After"] == "1"
    assert refused[0]["error"]["type"] == "rate_limit_error"
