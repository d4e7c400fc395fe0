"""The options of ``--agent`` runs (in the ``data`` section: the agent is the run's task)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.utils.options import option

__all__ = ["AgentConfig"]


@dataclass(frozen=True)
class AgentConfig:
    """The user's own agent, trained through an OpenAI-compatible endpoint."""

    SECTION: ClassVar[str] = "data"

    agent: str = option(
        "",
        "your agent, pkg.module:fn called as fn(endpoint, sample) -> reward once per episode "
        "(sync or async); its chat completions are what trains",
        common=True,
    )
    agent_timeout: float = option(
        300.0, "seconds an --agent episode may run; past it the episode is dropped", check=">0"
    )
