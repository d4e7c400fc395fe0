"""Supervised warm start: masked demonstrations, the training loop, greedy tool-use eval.

:func:`run_sft` is the whole pipeline (what `agentrl sft` and the trainer's warm start run).
"""

from agentrl.sft.data import Conversation, Example, build_examples, read_conversations
from agentrl.sft.evaluate import EvalEnv, EvalTask, evaluate, exact_match
from agentrl.sft.pipeline import SFTRunOptions, SFTRunResult, run_sft
from agentrl.sft.train import SFTConfig, SFTResult, train_sft

__all__ = [
    "Conversation",
    "EvalEnv",
    "EvalTask",
    "Example",
    "SFTConfig",
    "SFTResult",
    "SFTRunOptions",
    "SFTRunResult",
    "build_examples",
    "evaluate",
    "exact_match",
    "read_conversations",
    "run_sft",
    "train_sft",
]
