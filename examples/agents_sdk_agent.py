"""An agent written with the OpenAI Agents SDK the way its README shows, trained unchanged.

It uses the SDK's defaults (its default model API, the Responses API, and its default
client), a ``function_tool`` calculator and ``Runner.run``; it never reads the endpoint it
is handed. While a run plays, agentrl points the SDK's default client at each episode's
own endpoint (`agentrl.agents.sdk_routing`), so every model call is the policy's and trains
token-in/token-out:

    agentrl train --agent examples.agents_sdk_agent:agent --total_steps 2

(``pip install openai-agents``; on the built-in arithmetic tasks, or ``--data FILE``). The
reward is the share of the record's ground-truth numbers found in the final answer.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded

from examples.openai_agent import calculate, score


@function_tool
def calculate_math(expression: str) -> float:
    """Evaluate an arithmetic expression, e.g. 2*(3+4)."""
    return round(calculate(expression), 6)


calculator_agent = Agent(
    name="calculator",
    instructions="Answer the question. Use calculate_math for every computation.",
    tools=[calculate_math],
)


def question(sample: dict[str, Any]) -> str:
    """The record's last user turn (the SDK takes the question as text)."""
    users = [m["content"] for m in sample["messages"] if m.get("role") == "user"]
    return str(users[-1]) if users else ""


async def agent(endpoint: Any, sample: dict[str, Any]) -> float:
    """One episode: ``Runner.run`` with the SDK's defaults, the final answer scored."""
    try:
        result = await Runner.run(calculator_agent, question(sample), max_turns=3)
    except MaxTurnsExceeded:
        return 0.0  # still calling tools when the turns ran out: no answer
    return score(str(result.final_output), sample.get("gt") or [])
