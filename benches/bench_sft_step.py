"""Supervised step time: the shared prefix run once per batch against every row in full.

The built-in demonstrations all open with the same system prompt and tool specs (64 of
about 148 tokens). ``agentrl.sft.train.masked_loss_sum`` runs that prefix once per batch
(``common_prefix``); the baseline is the same loss with no plan, every row run whole. Both
take the same batches of the tiny preset (forward, backward and AdamW step), alternating
in rounds so that a busy machine slows both alike; the ratio is what to read.

Run:  .venv/bin/python benches/bench_sft_step.py [--threads 2] [--steps 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from agentrl.models.tiny import build_tiny_preset
from agentrl.sft.data import Example, bucketed_batches, build_examples, collate
from agentrl.sft.tasks import generated_demos, tool_env
from agentrl.sft.train import masked_loss_sum
from agentrl.training.forward import masked_logps

Loss = Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]


def every_row_whole(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The same summed loss with no shared-prefix plan."""
    trained = batch["loss_mask"][:, 1:]
    out = masked_logps(model, batch["input_ids"], batch["attention_mask"], trained)
    return -(out.logps * trained).sum()


def seconds_per_step(
    loss: Loss, model: torch.nn.Module, batches: list[dict[str, torch.Tensor]]
) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    began = time.perf_counter()
    for batch in batches:
        loss(model, batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (time.perf_counter() - began) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40, help="batches per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = build_tiny_preset()
    model.train()
    env = tool_env(tokenizer)
    examples: list[Example] = build_examples(
        generated_demos(2000, shortcut_rate=0.75), tokenizer, env.render, max_len=1024
    )
    order = bucketed_batches([len(e) for e in examples], 4096, 16, seed=0)[: args.steps]
    batches = [collate([examples[i] for i in rows], pad_id=0) for rows in order]
    seconds_per_step(masked_loss_sum, model, batches[:5])  # warm-up
    times: dict[str, list[float]] = {"every row whole": [], "shared prefix": []}
    for _ in range(args.rounds):
        times["every row whole"].append(seconds_per_step(every_row_whole, model, batches))
        times["shared prefix"].append(seconds_per_step(masked_loss_sum, model, batches))
    rows = sum(b["input_ids"].size(0) for b in batches) / len(batches)
    print(f"tiny preset, {args.threads} thread(s), {len(batches)} batches of {rows:.1f} rows")
    for name, values in times.items():
        median_ms = 1000 * statistics.median(values)
        print(f"  {name:16s} {median_ms:7.1f} ms/step (median of {len(values)})")
    ratio = [a / b for a, b in zip(times["every row whole"], times["shared prefix"], strict=True)]
    rounds = ", ".join(f"{r:.2f}" for r in ratio)
    print(f"  speed-up {statistics.median(ratio):.2f}x (rounds: {rounds})")


if __name__ == "__main__":
    main()
