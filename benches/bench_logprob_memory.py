"""Peak memory of one training forward + backward with a Qwen3-sized vocabulary (151,936):
full-vocabulary float32 logits over every position, as a plain implementation computes
them, against agentrl's training forward (`agentrl.training.forward.masked_logps`: output
layer at trained positions only, a slice of tokens at a time).

Each way runs in a fresh process; the peak resident set above the loaded model is
reported (Linux ``VmHWM``, reset after loading). A 1-layer, 64-wide random model keeps the
decoder's share small, so what is measured is the output layer and the softmax.

Run:  nice .venv/bin/python benches/bench_logprob_memory.py       (about a minute, ~11 GiB)
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
from pathlib import Path

import torch

VOCAB = 151_936


def peak_mib() -> float:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmHWM line")


def measure(way: str, rows: int, length: int, trained: int) -> float:
    """Peak MiB above the loaded model of one forward + backward done ``way``."""
    from agentrl.rl.logprobs import sanitize_logits
    from agentrl.training.forward import masked_logps
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config).train()
    ids = torch.randint(0, VOCAB, (rows, length))
    attn = torch.ones_like(ids)
    mask = torch.zeros(rows, length - 1)
    mask[:, length - 1 - trained :] = 1
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    base = peak_mib()
    if way == "full":
        logits = sanitize_logits(model(input_ids=ids, attention_mask=attn).logits[:, :-1])
        logp = torch.log_softmax(logits, dim=-1)
        picked = logp.gather(2, ids[:, 1:, None]).squeeze(-1)
        (picked * mask).sum().backward()
    else:
        out = masked_logps(model, ids, attn, mask, with_entropy=True)
        (out.logps * mask).sum().backward()
    return peak_mib() - base


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--length", type=int, default=768, help="tokens per row")
    p.add_argument("--trained", type=int, default=256, help="trained (response) tokens per row")
    p.add_argument("--way", choices=("full", "agentrl"), default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.way:
        print(f"{measure(args.way, args.rows, args.length, args.trained):.1f}")
        return 0
    peaks = {}
    for way in ("full", "agentrl"):
        command = [
            sys.executable,
            __file__,
            "--way",
            way,
            "--rows",
            str(args.rows),
            "--length",
            str(args.length),
            "--trained",
            str(args.trained),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        peaks[way] = float(done.stdout.split()[-1])
    print(
        f"{args.rows} rows x {args.length} tokens, {args.trained} trained per row, "
        f"vocabulary {VOCAB}; peak memory above the model, forward + backward:"
    )
    print(f"  full float32 logits, every position: {peaks['full']:>8.0f} MiB")
    print(f"  agentrl training forward:            {peaks['agentrl']:>8.0f} MiB")
    print(f"  ratio: {peaks['full'] / max(peaks['agentrl'], 1.0):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
