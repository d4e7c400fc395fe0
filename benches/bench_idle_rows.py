"""RL step time: rows that carry no gradient left out of training, against every row run.

With no KL term, a row whose advantage is zero (its group's episodes all scored alike)
adds nothing to the gradient of the clipped objective, and `agentrl.training.step` leaves
it out of the forward and backward passes (``train/idle_rows``). The baseline is the same
step with that skip turned off. Both train the tiny preset's model on the same rolled-out
batch (8 prompts x 4 episodes, forward, backward and AdamW), whose advantages are set so
that ``--flat`` of its groups are flat, as an RL batch of a model that solves some
prompts every time (or never) is; they alternate in rounds so that a busy machine slows
both alike: the ratio is what to read. The two runs' losses are checked to agree.

Run:  .venv/bin/python benches/bench_idle_rows.py [--threads 2] [--flat 0.5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

import agentrl.training.step as step_module
import torch
from agentrl.assembly.prompts import generated_heldout_samples
from agentrl.assembly.settings import config_sections
from agentrl.config import resolve
from agentrl.models.tiny import build_tiny_preset
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.rollout import EpisodeConfig, PolicyVersion, SamplingParams
from agentrl.rollout.engine import TorchEngine
from agentrl.tools import builtin_registry
from agentrl.training.models import Models, autocast_factory
from agentrl.training.sources import InlineSource
from agentrl.training.step import StepSettings, train_on_groups

PROMPTS, EPISODES = 8, 4


def rolled_out(model: torch.nn.Module, tokenizer: Any) -> list[Any]:
    sampling = SamplingParams(temperature=1.0, max_new_tokens=96)
    episode = EpisodeConfig(max_turns=3, max_new_tokens=96, sampling=sampling)
    source = InlineSource(
        TorchEngine(copy.deepcopy(model), tokenizer, seed=0),
        generated_heldout_samples(PROMPTS),
        builtin_registry(),
        episode,
        num_generations=EPISODES,
        batch_size=PROMPTS,
        seed=0,
        version=PolicyVersion(),
    )
    return source.next_batch(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--flat", type=float, default=0.5, help="share of flat groups")
    parser.add_argument("--steps", type=int, default=3, help="steps per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = build_tiny_preset()
    groups = rolled_out(model, tokenizer)
    config = resolve(preset="tiny", overrides={"beta": 0.0, "beta_auto_tune": False})
    loss, advantage, bc = config_sections(config)
    settings = StepSettings(
        loss,
        advantage,
        bc,
        config.reward,
        num_generations=EPISODES,
        max_total_len=config.max_total_len,
        strict_group_packing=True,
        stale_discount=0.65,
        micro_batch_size=config.micro_batch_size,
    )
    flat_groups = round(args.flat * PROMPTS)
    real_advantages = step_module.compute_advantages

    def some_flat(*a: Any, **k: Any) -> Any:
        advantages, metrics = real_advantages(*a, **k)
        fixed = torch.tensor([-1.5, -0.5, 0.5, 1.5]).repeat(PROMPTS)[: advantages.numel()]
        fixed[: flat_groups * EPISODES] = 0.0
        return fixed.to(advantages), metrics

    step_module.compute_advantages = some_flat
    weighted = step_module.advantage_weighted

    def one(skip: bool) -> tuple[float, list[float]]:
        step_module.advantage_weighted = weighted if skip else (lambda level: False)
        policy = copy.deepcopy(model).train()
        cpu = torch.device("cpu")
        models = Models(
            policy, policy, policy, policy, tokenizer, cpu, autocast_factory(cpu, "float32"), ""
        )
        opt = Optimization(policy, OptimConfig(learning_rate=1e-5, accumulation_steps=1), 100)
        control = BetaController(BetaConfig(beta=0.0, beta_auto_tune=False))
        losses = []
        began = time.perf_counter()
        for step in range(args.steps):
            out = train_on_groups(
                groups,
                step=step + 1,
                current_version=step,
                reward_baseline=0.0,
                settings=settings,
                models=models,
                optimization=opt,
                beta=control,
            )
            losses.append(out.metrics["loss/total"])
        return (time.perf_counter() - began) / args.steps, losses

    rows = sum(len(g.trajectories) for g in groups)
    print(f"{rows} rows, {flat_groups * EPISODES} of them in flat groups; {args.threads} threads")
    ratios = []
    for r in range(args.rounds):
        skipped, skip_losses = one(True)
        whole, whole_losses = one(False)
        gap = max(abs(a - b) for a, b in zip(skip_losses, whole_losses, strict=True))
        assert gap < 1e-4, f"the two updates differ: losses {skip_losses} vs {whole_losses}"
        ratios.append(whole / skipped)
        print(f"round {r + 1}: {skipped:.3f} s/step skipping idle rows, {whole:.3f} every row")
    print(f"every row / skipping: {statistics.median(ratios):.2f}x (median of {args.rounds})")


if __name__ == "__main__":
    main()
