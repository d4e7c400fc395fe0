"""The Python steps of `benches/gpu_check.sh`: build a model, check a run, time generation.

  build-model  --out DIR --size {100m,tiny}   a random Qwen3 over the tiny preset's
               tokenizer, written as an HF directory (no download): ``100m`` is about
               0.1B parameters, ``tiny`` a few million for the CPU dry run
  check-run    --run-dir DIR --steps N        the run trained N steps with finite losses;
               prints its last step's loss, tokens/s and peak memory
  engine-vs-hf --model DIR --device DEV       generated tokens/s of TorchEngine against
               ``transformers`` generate on the same prompts and budget

Each prints one line for the summary table and exits non-zero when the check fails.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

SIZES: dict[str, dict[str, int]] = {
    # 12 layers x 768 wide over a 3k vocabulary: about 0.09B parameters.
    "100m": dict(
        hidden_size=768,
        intermediate_size=2048,
        num_layers=12,
        num_heads=12,
        num_kv_heads=4,
        head_dim=64,
    ),
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
    ),
}


def build_model(out: Path, size: str) -> str:
    import torch
    from agentrl.models import load_policy
    from agentrl.models.tiny import TinySpec, build_model, save_preset

    _, tokenizer = load_policy("tiny", "float32", torch.device("cpu"))
    model = build_model(TinySpec(max_positions=2048, **SIZES[size]), len(tokenizer))
    save_preset(model, tokenizer, out)
    params = sum(p.numel() for p in model.parameters())
    return f"{params / 1e6:.1f}M params at {out}"


def check_run(run_dir: Path, steps: int) -> str:
    from agentrl.observability import read_metrics

    records = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    if len(records) != steps:
        raise SystemExit(f"{run_dir}: {len(records)} training steps logged, expected {steps}")
    losses = [float(r.get("loss/total", math.nan)) for r in records]
    if not all(math.isfinite(v) for v in losses):
        raise SystemExit(f"{run_dir}: non-finite loss in {losses}")
    last = records[-1]
    peak = max(float(r.get("perf/peak_mem_mb", 0.0)) for r in records)
    speed = float(last.get("perf/tokens_per_sec", 0.0))
    return f"{steps} steps, last loss {losses[-1]:.4g}, {speed:.0f} tok/s, peak {peak:.0f} MiB"


def engine_vs_hf(model: str, device: str) -> str:
    import random

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from agentrl.models import load_policy
    from agentrl.rollout.engine import TorchEngine
    from bench_rollout import bench_first_turn, tasks

    dev = torch.device(device)
    policy, tokenizer = load_policy(model, "float32", dev)
    engine = TorchEngine(policy.eval(), tokenizer, device=dev, seed=0)
    samples = tasks(8, seed=7)
    args = argparse.Namespace(g=8, max_new_tokens=64)
    random.seed(0)
    ours, theirs = bench_first_turn(engine, samples, args)
    return f"TorchEngine {ours:.0f} tok/s, transformers.generate {theirs:.0f} tok/s"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build-model")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--size", choices=sorted(SIZES), default="100m")
    c = sub.add_parser("check-run")
    c.add_argument("--run-dir", type=Path, required=True)
    c.add_argument("--steps", type=int, required=True)
    e = sub.add_parser("engine-vs-hf")
    e.add_argument("--model", required=True)
    e.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    line: Any
    if args.what == "build-model":
        line = build_model(args.out, args.size)
    elif args.what == "check-run":
        line = check_run(args.run_dir, args.steps)
    else:
        line = engine_vs_hf(args.model, args.device)
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
