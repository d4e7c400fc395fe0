"""Train the agent you already have: an OpenAI-compatible endpoint inside the trainer.

``agentrl train --agent pkg.module:fn`` (or ``Trainer(config, agent=fn)``): ``fn(endpoint,
sample)`` is the user's agent, plain or ``async``, called once per episode with an
:class:`Endpoint` (base URL, API key, model name, ready ``openai`` clients) and the data
record; it returns the episode's reward. The endpoint (`agentrl.agents.server`) samples
from the run's rollout engine and records the ids of every call
(`agentrl.agents.recorder`); calls that extend each other join into one token-in/token-out
sequence (`agentrl.agents.assemble`); `agentrl.training.agent_source` feeds the trainer.
"""

from agentrl.utils.imports import lazy_attributes

_EXPORTS = {
    "AgentConfig": "agentrl.agents.options",
    "AgentFn": "agentrl.agents.endpoint",
    "Endpoint": "agentrl.agents.endpoint",
    "EndpointServer": "agentrl.agents.server",
    "load_agent": "agentrl.agents.endpoint",
    "reward_of": "agentrl.agents.endpoint",
}
__getattr__ = lazy_attributes(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
