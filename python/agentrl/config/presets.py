"""Named base configurations for `agentrl train` (see :func:`agentrl.config.resolve`).

``tiny``: the built-in CPU run (the default): the warm-started tiny model on generated
tool-use tasks (README); every option it does not list keeps its declared default.
``real``: the RL options of `make real-model`, for a small pretrained chat model.
``compat``: the reference trainers' defaults where they differ from agentrl's
(:mod:`agentrl.config.compat`, docs/compat.md).
"""

from __future__ import annotations

from typing import Any

from agentrl.config.compat import COMPAT_DEFAULTS

PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "save_weight": "tiny-rl",
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
        # Small steps: a tiny model's precise number copying is easily shaken by noisy
        # policy-gradient updates (2e-4 lost 6 points from a clean warm start).
        "learning_rate": 5e-5,
        "accumulation_steps": 1,
        # Four optimizer updates per rollout batch (one per quarter of its episodes): from
        # the same warm start, +11.5 points at step 100 against +7 with one update.
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
    "save_weight": "",
    # bfloat16 where the hardware computes it fastest (CUDA, CPUs with AMX or AVX512-BF16),
    # else float32.
    "dtype": "auto",
    "device": "auto",
    "num_threads": 0,
    # A real chat template with the tools block is about 520 prompt tokens.
    "max_context_len": 1024,
    "max_total_len": 1536,
    # A real tokenizer spells a Hermes call in about 30 tokens: 96-token turns cut the third
    # call of three-expression tasks (41 of the warm start's 98 failures); 192 do not.
    "max_gen_len": 192,
    "eval_max_gen_len": 192,
    # A turn ends at </answer>: no tokens (or time) spent on what follows an answer.
    "stop_at_answer_end": True,
    # A 200-task evaluation decoded as one batch held every row's KV cache at once: 21-23 GB
    # once the policy made two or three calls a task, and one run was killed for memory on a
    # 24 GB box. 64 rows a forward pass, in chunks of similar length.
    "rollout_batch_rows": 64,
    # A LoRA adapter (rank 16, every linear layer) at 2e-4 moved a 135M warm start +5.5
    # points in 30 steps (docs/real-models.md); full fine-tuning at 1e-5 gave +1.5 (with
    # 96-token turns), at 3e-5 its training exact match fell, and so did the adapter's at
    # 5e-4. One update a batch of 8 prompts x 4 episodes: with 4 prompts (16 episodes) the
    # held-out score of the same warm start wandered (seed 7: 58.0% -> 69.0%, 68.0%, 66.5%
    # at steps 10, 20, 30; tool success 89.8%, 88.6%, 87.8%); with 8 the update averages
    # twice the tasks (docs/real-models.md).
    "lora_rank": 16,
    "lora_alpha": 32.0,
    "learning_rate": 2e-4,
    "num_mini_batches": 1,
    "batch_size": 8,
    "num_generations": 4,
    # Sampling close to the policy itself, untruncated: after a warm start its distribution
    # is sharp (entropy 0.05-0.10 a token), so at the tiny preset's 0.7 / top-p 0.88 / top-k
    # 40 most groups' four episodes came out alike and taught nothing (8-15 of 16 rows
    # idle). At 1.0 a third of the sampled episodes failed on a sampled digit, noise around
    # the greedy path (30 steps: 60.5% -> 59.5%); at 0.85, with the rate held constant
    # (a cosine over 20-30 steps spends half of them at a fraction of it): 60.5% -> 63.5%
    # in 20 steps, 4.6 of 16 rows idle a step (docs/real-models.md).
    "temperature": 0.85,
    "top_p": 1.0,
    "top_k": 0,
    "min_lr_ratio": 1.0,
    # No KL penalty and so no reference pass: the adapter's small steps stayed within
    # 0.02 of the warm start (k3 estimate) without one.
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
    # The RL prompts in the warm start's mix: unit conversions at 0.2 rather than 0.08. At
    # 0.08 a step of 8 prompts held 0.6 conversions on average; the policy learned to call a
    # tool on every task from the math ones and sent half the held-out conversions to
    # calculate_math ("316 meters"), where its warm start had answered them without a call.
    "generated_mix": "math=0.68,unit=0.2,time=0.05,none=0.07",
}
PRESETS["compat"] = dict(COMPAT_DEFAULTS)
DEFAULT_PRESET = "tiny"

__all__ = ["DEFAULT_PRESET", "PRESETS"]
