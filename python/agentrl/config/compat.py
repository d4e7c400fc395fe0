"""Compatibility with the reference trainers, in one place (see docs/compat.md).

Three things translate command lines written for them:

- :data:`COMPAT_DEFAULTS`: their defaults where agentrl's own differ (paths of their
  checkout, their run and project names, trackers on, total steps shared among ranks);
  ``--preset compat`` applies them.
- :data:`COMPAT_ONLY`: options they have that agentrl cannot honour with another value;
  each accepts its compatible default (or agentrl's) and rejects anything else with the
  reason and what to use instead.
- :data:`ALIASES`: their spellings of agentrl's options, accepted on the command line and
  in TOML files (``--lr`` for ``--learning_rate``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALIASES", "COMPAT_DEFAULTS", "COMPAT_ONLY", "compat_only_error"]

COMPAT_DEFAULTS: dict[str, Any] = {
    "save_dir": "../out",
    "run_name": "agentic_async_rl_tooluse_v5_fix",
    "use_wandb": True,
    "wandb_project": "MiniMind-Agentic-Async-RL",
    "scale_total_steps_by_world_size": True,
    "data_path": "/workspace/minimind/dataset/agent_rl_math.jsonl",
    "reward_model_path": "../../internlm2-1_8b-reward",
    "sglang_model_path": "../model",
    "sglang_shared_path": "./sglang_ckpt_agentic_async",
}

_NO_REWARD_MODEL = (
    "scoring with a learned reward model is not part of this build; the rule-based "
    "tool-use reward scores every episode (tune it with the reward options)"
)

COMPAT_ONLY: dict[str, str] = {
    "num_hidden_layers": "the depth is read from the checkpoint's weights; drop the flag",
    "max_seq_len": (
        "lengths are set by max_context_len (prompt tokens kept), max_gen_len (new tokens "
        "per turn) and max_total_len (packed training sequence); use those"
    ),
    "torch_rollout_use_cache": (
        "the torch rollout engine always generates with a KV cache (the same tokens, "
        "less compute); drop the flag"
    ),
    "global_prefetch_groups": (
        "each process fills its own rollout queue; size it with max_queue_groups"
    ),
    "use_reward_model": _NO_REWARD_MODEL,
    "reward_model_path": _NO_REWARD_MODEL,
}

# Other spellings of agentrl's options (the supervised warm start's short flags among
# them): accepted, and translated to the option's own name.
ALIASES: dict[str, str] = {
    "lr": "learning_rate",
    "steps": "total_steps",
    "warmup": "warmup_steps",
    "grad_accum": "accumulation_steps",
    "clip": "grad_clip",
    "max_new_tokens": "max_gen_len",
    "max_len": "max_total_len",
    "eval_data": "eval_data_path",
    "eval_tasks": "eval_samples",
    "save_weight": "run_name",
}


def compat_only_error(name: str, value: Any, accepted: tuple[Any, ...]) -> str | None:
    """Why ``value`` is refused for a compatibility-only option (None: accepted)."""
    if name not in COMPAT_ONLY or value in accepted:
        return None
    shown = " or ".join(repr(a) for a in dict.fromkeys(accepted))
    return (
        f"option {name}={value!r}: accepted only at {shown}, for compatibility: {COMPAT_ONLY[name]}"
    )
