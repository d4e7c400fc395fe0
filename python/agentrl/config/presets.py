"""Named base configurations for `agentrl train` (see :func:`agentrl.config.resolve`).

``tiny``: the built-in CPU run (the default): the warm-started tiny model on generated
tool-use tasks (README); every option it does not list keeps its declared default.
``real``: the RL options of `make real-model`, for a small pretrained chat model.
``compat``: the reference trainers' defaults where they differ from agentrl's
(:mod:`agentrl.config.compat`, docs/compat.md).

Each value says what it is for; the runs that chose it are in docs/tuning.md ("Why the
presets hold their values") and docs/real-models.md.
"""

from __future__ import annotations

from typing import Any

from agentrl.config.compat import COMPAT_DEFAULTS

PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "run_name": "tiny-rl",
        "model": "runs/tiny-sft",
        "filter_mode": "all",
        # The tiny model is taught the Hermes <tool_call> format by its warm start; reading
        # only that family keeps its published run reproducing exactly (docs/tool-formats.md).
        "tool_format": "hermes",
        "device": "cpu",
        # Two threads: faster than one on two idle cores; more only adds overhead here.
        "num_threads": 2,
        "dtype": "float32",
        # Every 10th step's episodes go to runs/tiny-rl/rollouts for `agentrl view`.
        "dump_rollouts": 10,
        # 200 steps of 4 prompts x 8 episodes, rolled out in the loop (reproducible): most
        # of the gain comes in the first 100 steps (docs/tuning.md), and 200 keep
        # `make train` within 15 minutes on two cores.
        # The warm start's demonstrations skip the tool on easy expressions (see
        # agentrl.sft.tasks); RL's job here is to unlearn that (docs/tuning.md).
        "total_steps": 200,
        "batch_size": 4,
        "num_generations": 8,
        "async_workers": 0,
        "max_gen_len": 96,
        "max_context_len": 512,
        "max_total_len": 768,
        # Copying numbers repeats tokens: no repetition penalty (greedy eval = plain greedy).
        "repetition_penalty": 1.0,
        # Small steps: noisy policy-gradient updates easily shake a tiny model's precise
        # number copying.
        "learning_rate": 5e-5,
        "accumulation_steps": 1,
        # Four optimizer updates per rollout batch (one per quarter of its episodes): more
        # learned from each batch than with one update.
        "num_mini_batches": 4,
        "grad_clip": 1.0,
        "micro_batch_size": 8,
        # The warm start already writes tool calls; BC's compact call spelling would fight it.
        "bc_coef": 0.0,
        "eval_interval": 100,
        "eval_samples": 200,
        "eval_max_gen_len": 96,
        "save_interval": 100,
        # A group whose episodes all scored the same teaches nothing; the compatible baseline
        # fallback would push such groups around at random (KL drift, lost tool success).
        "zero_std_advantage_mode": "zero",
        # A wrong answer may still earn up to 3.0 for its tool use (the compatible default
        # caps it at 0), so episodes that call the right tools on the right expressions
        # stand out.
        "zero_answer_cov_reward_cap_initial": 3.0,
        "zero_answer_cov_reward_cap": 3.0,
        # The reward's warm-up schedules, shortened to the length of the run.
        "format_warmup_steps": 30,
        "reward_cap_warmup_steps": 60,
    },
}
# The RL half of `make real-model` (benches/real_model.py, docs/real-models.md): a small
# pretrained chat model (any --model), warm-started by `agentrl sft`, then RL. Only options;
# what a real model needs that the tiny preset's do not give it is said beside each.
PRESETS["real"] = {
    **PRESETS["tiny"],
    "model": "",
    "run_name": "",
    # bfloat16 where the hardware computes it fastest (CUDA, CPUs with AMX or AVX512-BF16),
    # else float32.
    "dtype": "auto",
    "device": "auto",
    "num_threads": 0,
    # A real chat template with the tools block is about 520 prompt tokens.
    "max_context_len": 1024,
    "max_total_len": 1536,
    # A real tokenizer spells a Hermes call in about 30 tokens: a 192-token turn holds the
    # three calls of a three-expression task, a 96-token one cuts the third.
    "max_gen_len": 192,
    "eval_max_gen_len": 192,
    # A turn ends at </answer>: no tokens (or time) spent on what follows an answer.
    "stop_at_answer_end": True,
    # 64 rows a forward pass, in chunks of similar length: a 200-task evaluation decoded as
    # one batch holds every row's KV cache at once, over 20 GB for a real model.
    "rollout_batch_rows": 64,
    # A LoRA adapter (rank 16, every linear layer) at 2e-4: the largest steady gain from a
    # small warm start. One update a batch of 8 prompts x 4 episodes: each update averages
    # over 8 tasks, which keeps the held-out score from wandering.
    "lora_rank": 16,
    "lora_alpha": 32.0,
    "learning_rate": 2e-4,
    "num_mini_batches": 1,
    "batch_size": 8,
    "num_generations": 4,
    # Sampling close to the policy itself, untruncated: after a warm start its distribution
    # is sharp, and truncated, cooler sampling makes a group's episodes alike (they teach
    # nothing); below 1.0, so that few episodes fail on a sampled digit.
    "temperature": 0.85,
    "top_p": 1.0,
    "top_k": 0,
    # The rate held constant: a cosine over 20 steps spends half of them at a fraction of it.
    "min_lr_ratio": 1.0,
    # No KL penalty and so no reference pass: the adapter's small steps stay close to the
    # warm start without one.
    "beta": 0.0,
    "beta_auto_tune": False,
    # 20 steps of about 70 s and two 200-task evaluations keep `make real-model` within 45
    # minutes on two cores.
    "total_steps": 20,
    "eval_interval": 20,
    "save_interval": 0,
    "dump_rollouts": 5,
    "format_warmup_steps": 0,
    "reward_cap_warmup_steps": 10,
    # The RL prompts in the warm start's mix, unit conversions at 0.2 (the generator's
    # default: 0.08): with few conversions a step, RL teaches the policy to send them to
    # calculate_math along with the math tasks.
    "generated_mix": "math=0.68,unit=0.2,time=0.05,none=0.07",
}
PRESETS["compat"] = dict(COMPAT_DEFAULTS)
DEFAULT_PRESET = "tiny"

__all__ = ["DEFAULT_PRESET", "PRESETS"]
