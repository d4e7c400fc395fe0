"""Named base configurations for `agentrl train` (see :func:`agentrl.config.resolve`).

``seed``: the first seed's defaults, untouched. ``tiny``: the built-in CPU run (the default):
the warm-started tiny model on generated tool-use tasks, sized to finish in about ten
minutes on two cores; every option it does not list keeps the seed's default.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "seed": {},
    "tiny": {
        "save_dir": "runs",
        "save_weight": "tiny-rl",
        "model": "runs/tiny-sft",
        "data_path": "",
        "device": "cpu",
        "dtype": "float32",
        "use_wandb": False,
        "total_steps": 60,
        "batch_size": 4,
        "num_generations": 8,
        "max_turns": 3,
        "max_gen_len": 64,
        "max_context_len": 512,
        "max_total_len": 768,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "repetition_penalty": 1.0,
        "learning_rate": 2e-4,
        "accumulation_steps": 1,
        "grad_clip": 1.0,
        "beta": 0.01,
        "kl_target": 0.2,
        "bc_coef": 0.05,
        "bc_min_coef": 0.0,
        "bc_hold_steps": 20,
        "bc_decay_steps": 40,
        "bc_max_examples": 8,
        "bc_max_len": 512,
        "eval_interval": 30,
        "eval_samples": 200,
        "eval_max_gen_len": 64,
        "save_interval": 30,
        "log_interval": 1,
        "async_workers": 1,
        "format_warmup_steps": 10,
        "reward_cap_warmup_steps": 20,
    },
}
DEFAULT_PRESET = "tiny"

__all__ = ["DEFAULT_PRESET", "PRESETS"]
