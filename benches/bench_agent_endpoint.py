"""What one agent endpoint sustains: requests per second and latency under fan-out.

``E`` agent episodes run at once against one `agentrl.agents.server.EndpointServer`, each
sending ``C`` chat completions at the same moment (a parallel tool plan, a graph's
branches) through the ``openai`` client, for ``rounds`` rounds; the policy is the built-in
tiny model (random weights, 0.1M parameters) on the CPU, sampling ``--max_tokens`` tokens
per call through the run's batcher and torch engine, exactly as `agentrl train --agent`
serves it. Prints the calls, failures (a reset connection or an HTTP error the client
gave up on), requests per second over the whole burst and the p50 / p99 latency.

Run: ``nice .venv/bin/python benches/bench_agent_endpoint.py [--episodes 64 --calls 20]``
(under a minute on two cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from agentrl.agents.recorder import Limits
from agentrl.agents.runner import AgentRunner
from agentrl.agents.server import EndpointServer, endpoint_capacity
from agentrl.models.tiny import build_tiny_preset
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.sampling import SamplingParams


def fan_out_agent(calls: int, rounds: int, max_tokens: int, latencies: list[float]) -> Any:
    lock = threading.Lock()

    def agent(endpoint: Any, sample: dict[str, Any]) -> float:
        def one(k: int) -> None:
            began = time.perf_counter()
            endpoint.client.chat.completions.create(
                model=endpoint.model,
                messages=[{"role": "user", "content": f"{sample['messages'][0]['content']} {k}"}],
                max_tokens=max_tokens,
            )
            with lock:
                latencies.append(time.perf_counter() - began)

        with ThreadPoolExecutor(calls) as pool:
            for _ in range(rounds):
                list(pool.map(one, range(calls)))
        return 1.0

    return agent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max_tokens", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    model, tokenizer = build_tiny_preset()
    engine = TorchEngine(model.eval(), tokenizer, device=torch.device("cpu"), seed=0)
    engine.lock = threading.RLock()
    limits = Limits(SamplingParams(temperature=1.0), max_new_tokens=64, max_context_len=512)
    latencies: list[float] = []
    agent = fan_out_agent(args.calls, args.rounds, args.max_tokens, latencies)
    n = args.episodes
    samples = [{"messages": [{"role": "user", "content": f"what is {i}+1?"}]} for i in range(n)]
    with EndpointServer("tiny", capacity=endpoint_capacity(args.episodes)) as server:
        runner = AgentRunner(agent, server, engine, limits, timeout=600.0)
        runner.run(samples[:1], [0], 1)  # warm-up: the engine's first batch, the client import
        latencies.clear()
        began = time.perf_counter()
        batch = runner.run(samples[: args.episodes], list(range(args.episodes)), 1)
        seconds = time.perf_counter() - began
    dropped = [ep.error for ep in batch.episodes if ep.reward is None]
    latencies.sort()
    figures = {
        "episodes": args.episodes,
        "concurrent_calls_per_episode": args.calls,
        "calls": len(latencies),
        "failed_episodes": len(dropped),
        "refused_429": server.too_busy,
        "seconds": round(seconds, 2),
        "requests_per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(figures))
    if dropped:
        print("first failure:", dropped[0])
    return 1 if dropped else 0


if __name__ == "__main__":
    raise SystemExit(main())
