"""Supervised warm start: masked demonstrations, the training loop, held-out tasks.

The held-out score is the RL evaluation's (`agentrl.training.evaluation.evaluate_model`).

:func:`run_sft` is the whole pipeline (what `agentrl sft` and the trainer's warm start run).
"""

from agentrl.sft.data import Conversation, Example, build_examples, read_conversations
from agentrl.sft.pipeline import SFTRunOptions, SFTRunResult, run_sft
from agentrl.sft.tasks import HeldoutTask, ToolEnv, tool_env
from agentrl.sft.train import SFTConfig, SFTResult, train_sft

__all__ = [
    "Conversation",
    "Example",
    "HeldoutTask",
    "SFTConfig",
    "SFTResult",
    "SFTRunOptions",
    "SFTRunResult",
    "ToolEnv",
    "build_examples",
    "read_conversations",
    "run_sft",
    "tool_env",
    "train_sft",
]
