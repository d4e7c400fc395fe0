"""A LangGraph ReAct agent (``langchain-openai``'s ``ChatOpenAI``), trained unchanged.

The same arithmetic task as `examples.openai_agent`, written the way a LangGraph user
would: a ``@tool`` calculator and the ReAct graph (model -> tools -> model until the model
stops calling tools), with the chat model pointed at the endpoint agentrl hands the
agent. Needs ``pip install 'agentrl[examples]'`` (langgraph, langchain-openai):

    agentrl train --agent examples.langgraph_agent:agent --total_steps 2
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from examples.openai_agent import calculate, score


@tool
def calculate_math(expression: str) -> str:
    """Evaluate an arithmetic expression such as 2*(3+4)."""
    try:
        return json.dumps({"result": round(calculate(expression), 6)})
    except Exception as exc:  # the model reads the error
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


def agent(endpoint: Any, sample: dict[str, Any]) -> float:
    """One episode: the ReAct loop until the model answers (at most three model calls)."""
    model = ChatOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key,
        model=endpoint.model,
        temperature=0.7,
        max_tokens=96,
        max_retries=0,
    )
    llm = model.bind_tools([calculate_math])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([calculate_math]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    graph = builder.compile()
    try:
        state = graph.invoke({"messages": sample["messages"]}, {"recursion_limit": 6})
    except GraphRecursionError:
        return 0.0  # still calling tools when its steps ran out
    return score(str(state["messages"][-1].content), sample.get("gt") or [])
