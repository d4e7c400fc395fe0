"""agentrl: reinforcement learning that teaches language models to use tools."""

from agentrl._core import __version__

__all__ = ["__version__"]
