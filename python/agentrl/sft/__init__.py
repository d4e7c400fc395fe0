"""Supervised warm start: masked demonstrations, the training loop, greedy tool-use eval."""

from agentrl.sft.data import Conversation, Example, build_examples, read_conversations
from agentrl.sft.evaluate import EvalTask, evaluate, exact_match
from agentrl.sft.train import EvalEnv, SFTConfig, SFTResult, train_sft

__all__ = [
    "Conversation",
    "EvalEnv",
    "EvalTask",
    "Example",
    "SFTConfig",
    "SFTResult",
    "build_examples",
    "evaluate",
    "exact_match",
    "read_conversations",
    "train_sft",
]
