"""A verifiers environment's harness as the run's agent (``--environment verifiers:MODULE``).

Each episode asks the environment's bridge process (`agentrl.data.verifiers_env`) to play
the prompt's task (its ``verifiers_task`` column) with verifiers' own harness against this
episode's endpoint, so every model call goes through agentrl's endpoint and is recorded
token in, token out like any agent's. The episode's reward is the rubric's weighted sum;
each reward function's weighted score is logged beside it under its own name. A rollout
that fails in verifiers (its harness, a tool server, the rubric) is an agent that raised:
the episode is dropped and counted (``agent/raised``), with verifiers' error in the dumps.
"""

from __future__ import annotations

from typing import Any

from agentrl.data.verifiers_env import verifiers_process


class VerifiersAgent:
    """``agent(endpoint, sample)`` playing the sample's task in a verifiers environment."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        # What the run's log names it by: verifiers:MODULE?...
        self.__module__, _, self.__qualname__ = spec.partition(":")

    def __call__(self, endpoint: Any, sample: Any) -> dict[str, float]:
        idx = sample.get("verifiers_task")
        if idx is None:
            raise ValueError(
                f"{self.spec}: this prompt has no verifiers_task column; the prompts of a "
                "verifiers environment are its tasks (leave --data out)"
            )
        process = verifiers_process(self.spec)
        reply = process.rollout(
            int(idx), endpoint.base_url, endpoint.api_key, endpoint.model, endpoint.timeout
        )
        if reply.get("error") or reply.get("reward") is None:
            raise RuntimeError(f"verifiers rollout failed: {reply.get('error') or 'no reward'}")
        return {"reward": float(reply["reward"]), **reply["rewards"]}


__all__ = ["VerifiersAgent"]
