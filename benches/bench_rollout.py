"""Rollout throughput: the batched multi-turn loop against one episode at a time.

For each model, 8 calculator tasks x G=8 episodes, up to ``--max-turns`` turns each:

  (a) batched   ``run_episodes`` on all 64 episodes at once (one generate call per turn,
                shared prefill of each group's prompt, compaction of finished rows);
  (b) one-by-one the same loop called for one episode at a time, sequentially;
  (c) first turn only: ``TorchEngine.generate`` against ``transformers``' ``generate`` on
                the same 8 prompts x 8 samples, same sampling settings and budget;
  (d) KV reuse: the batched loop of (a) with ``--reuse-turns`` turns (default 2 and 4), on
                an engine that keeps each episode's KV cache between turns and on one that
                prefills every context in full, measured alternately in the same run
                (best of ``--reuse-repeats``); the ratio is the speed-up of reuse;
  (e) compiled decoding: the batched loop of (a) on an engine with ``compile_decode`` (the
                trainer's ``--rollout_compile 1``; compiled in a warm-up episode) and on an
                eager one, alternately, best of ``--reuse-repeats``; the ratio is its
                speed-up.

A random model never writes a tool call, so for random models every turn's output is
treated as a ``calculate_math`` call (``--forced-calls``, default for random models):
each episode then really runs ``--max-turns`` turns with tool execution, rendering of the
observation tokens, and the loop's cost is measured rather than the model's skill. A
warm-started model (``--model runs/tiny-sft``) uses the real parser instead.

Run:  nice .venv/bin/python benches/bench_rollout.py            (about 3-6 minutes on CPU)
      ... --parts reuse --models random-20m                     (only (d))
      ... --parts compiled --models tiny --threads 2            (only (e))
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from agentrl.data.instructions import ANSWER_INSTRUCTION
from agentrl.data.synthetic import TaskConfig, TaskGenerator
from agentrl.rollout import EpisodeConfig, SamplingParams, TorchEngine, run_episodes
from agentrl.tools import builtin_registry


def forced_call(_text: str, _tools: Any) -> list[dict[str, Any]]:
    """Every turn calls the calculator (random models never write a call themselves)."""
    return [{"name": "calculate_math", "arguments": {"expression": "12*(3+4)"}, "canonical": True}]


def tasks(n: int, seed: int) -> list[dict[str, Any]]:
    gen = TaskGenerator(TaskConfig(mix=(("math", 1.0),)), seed=seed)
    tools = gen.tools()
    return [
        {
            "messages": [
                {"role": "system", "content": ANSWER_INSTRUCTION},
                {"role": "user", "content": t.text},
            ],
            "tools": tools,
            "gt": t.gt,
        }
        for t in gen.tasks(n)
    ]


def random_20m(tokenizer: Any) -> torch.nn.Module:
    """A ~20M-parameter random Qwen3 over the tiny preset's tokenizer."""
    from agentrl.models.tiny import TinySpec, build_model

    size = TinySpec(
        hidden_size=512,
        intermediate_size=1408,
        num_layers=6,
        num_heads=8,
        num_kv_heads=4,
        head_dim=64,
        max_positions=4096,
    )
    return build_model(size, len(tokenizer))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def loop_figures(groups: list[Any], seconds: float) -> dict[str, float]:
    trajs = [t for g in groups for t in g.trajectories]
    generated = sum(sum(t.response_mask) for t in trajs)
    turns = sum(len(t.turn_outputs) for t in trajs)
    return {
        "episodes": len(trajs),
        "seconds": seconds,
        "episodes_per_s": len(trajs) / seconds,
        "tokens_per_s": generated / seconds,
        "turns_per_episode": turns / max(len(trajs), 1),
        "tool_calls": sum(len(t.tool_events) for t in trajs),
    }


def bench_loop(
    engine: TorchEngine, samples: list[dict[str, Any]], args: argparse.Namespace, parser: Any
) -> tuple[dict[str, float], dict[str, float]]:
    config = EpisodeConfig(
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_context_len=args.max_context_len,
        sampling=SamplingParams.compat_defaults(),
    )
    registry = builtin_registry()

    def batched() -> list[Any]:
        engine.reseed(1)
        return run_episodes(
            engine,
            samples,
            registry,
            num_generations=args.g,
            config=config,
            rng=random.Random(0),
            call_parser=parser,
        )

    def one_by_one() -> list[Any]:
        engine.reseed(1)
        rng = random.Random(0)
        out = []
        for sample in samples:
            for _ in range(args.g):
                out += run_episodes(
                    engine, [sample], registry, config=config, rng=rng, call_parser=parser
                )
        return out

    run_episodes(engine, samples[:1], registry, config=config, call_parser=parser)  # warm-up
    a, ta = timed(batched)
    b, tb = timed(one_by_one)
    return loop_figures(a, ta), loop_figures(b, tb)


def bench_engines(
    engines: dict[Any, TorchEngine],
    samples: list[dict[str, Any]],
    args: argparse.Namespace,
    parser: Any,
    turns: int,
) -> dict[Any, dict[str, float]]:
    """Seconds (best of ``args.reuse_repeats``) and prefill counters of the batched loop on
    each engine; the engines take turns so that load changes hit all alike, after one
    warm-up episode each (which also compiles a compiled engine)."""
    config = EpisodeConfig(
        max_turns=turns,
        max_new_tokens=args.max_new_tokens,
        max_context_len=args.max_context_len,
        sampling=SamplingParams.compat_defaults(),
    )
    registry = builtin_registry()
    figures: dict[Any, dict[str, float]] = {}
    for engine in engines.values():  # warm-up
        run_episodes(engine, samples[:1], registry, config=config, call_parser=parser)
    for _ in range(max(1, args.reuse_repeats)):
        for key, engine in engines.items():
            engine.reseed(1)
            engine.reset_stats()
            groups, seconds = timed(
                lambda engine=engine: run_episodes(
                    engine,
                    samples,
                    registry,
                    num_generations=args.g,
                    config=config,
                    rng=random.Random(0),
                    call_parser=parser,
                )
            )
            best = figures.get(key)
            if best is None or seconds < best["seconds"]:
                figures[key] = {
                    **loop_figures(groups, seconds),
                    "prefilled": float(engine.stats["prefill_tokens"]),
                    "reused": float(engine.stats["prefill_tokens_reused"]),
                }
    return figures


def bench_first_turn(
    engine: TorchEngine, samples: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[float, float]:
    """Generated tokens/s of our engine and of `transformers` generate, first turn only."""
    from agentrl.chat import apply_chat_template

    tok = engine.tokenizer
    prompts = [
        tok(apply_chat_template(tok, s["messages"], s["tools"]), add_special_tokens=False)[
            "input_ids"
        ]
        for s in samples
    ]
    params = SamplingParams.compat_defaults()
    eos = sorted(engine.eos_token_ids)

    def ours() -> int:
        outs = engine.generate(
            prompts, params, num_samples=args.g, max_new_tokens=args.max_new_tokens
        )
        return sum(len(o.token_ids) for o in outs)

    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(p)
        attn[r, width - len(p) :] = 1

    def theirs() -> int:
        with torch.inference_mode():
            out = engine.model.generate(
                input_ids=ids,
                attention_mask=attn,
                do_sample=True,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k,
                repetition_penalty=params.repetition_penalty,
                num_return_sequences=args.g,
                max_new_tokens=args.max_new_tokens,
                eos_token_id=eos,
                pad_token_id=pad,
            )
        new = out[:, width:].tolist()
        count = 0
        for row in new:
            for t in row:
                if t in eos:
                    break
                count += 1
        return count

    ours()  # warm-up
    n_ours, t_ours = timed(ours)
    n_hf, t_hf = timed(theirs)
    return n_ours / t_ours, n_hf / t_hf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,random-20m", help="tiny, random-20m, or paths")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--g", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-context-len", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--parts",
        default="loop,first-turn,reuse,compiled",
        help="which of loop (a, b), first-turn (c), reuse (d), compiled (e) to run",
    )
    ap.add_argument("--reuse-turns", default="2,4", help="turns per episode for (d)")
    ap.add_argument("--reuse-repeats", type=int, default=2, help="timed runs per setting in (d)")
    ap.add_argument(
        "--forced-calls",
        choices=("auto", "yes", "no"),
        default="auto",
        help="treat every turn as a calculator call (auto: for random models)",
    )
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"loop", "first-turn", "reuse", "compiled"}
    if unknown:
        ap.error(f"unknown --parts {sorted(unknown)}: use loop, first-turn, reuse, compiled")
    torch.set_num_threads(args.threads)
    from agentrl.models.loading import load_policy

    load = os.getloadavg()
    print(
        f"rollout bench: {args.prompts} prompts x G={args.g}, max_turns={args.max_turns}, "
        f"max_new_tokens={args.max_new_tokens}, device={args.device}, threads={args.threads}, "
        f"load avg {load[0]:.2f}/{load[1]:.2f} on {os.cpu_count()} CPUs"
    )
    samples = tasks(args.prompts, seed=7)
    base_tok = None
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name == "random-20m":
            if base_tok is None:
                _, base_tok = load_policy("tiny")
            model, tok, random_model = random_20m(base_tok), base_tok, True
        else:
            model, tok = load_policy(name)
            random_model = name == "tiny" or not Path(name).exists()
            if name == "tiny":
                base_tok = tok
        model = model.to(args.device).eval()
        forced = args.forced_calls == "yes" or (args.forced_calls == "auto" and random_model)
        parser = forced_call if forced else None
        engine = TorchEngine(model, tok, device=args.device, seed=0)
        params = sum(p.numel() for p in model.parameters()) / 1e6
        print(f"\n== {name} ({params:.1f}M params, forced calls: {forced})", flush=True)
        if "loop" in parts:
            a, b = bench_loop(engine, samples, args, parser)
            for label, f in (("(a) batched", a), ("(b) one episode at a time", b)):
                print(
                    f"  {label:28s} {f['episodes_per_s']:8.2f} episodes/s "
                    f"{f['tokens_per_s']:9.1f} gen tokens/s  {f['seconds']:6.1f} s  "
                    f"turns/episode {f['turns_per_episode']:.2f}  tool calls {f['tool_calls']}"
                )
            episodes_ratio = a["episodes_per_s"] / b["episodes_per_s"]
            tokens_ratio = a["tokens_per_s"] / b["tokens_per_s"]
            print(
                f"  ratios: batched/one-by-one episodes/s {episodes_ratio:.1f}x, tokens/s "
                f"{tokens_ratio:.1f}x"
            )
        if "first-turn" in parts:
            ours, hf = bench_first_turn(engine, samples, args)
            print(
                f"  (c) first turn, tokens/s:    TorchEngine {ours:9.1f}   "
                f"transformers.generate {hf:9.1f}   ratio {ours / hf:.2f}x"
            )
        if "reuse" in parts:
            for turns in [int(t) for t in args.reuse_turns.split(",") if t.strip()]:
                engines = {
                    reuse: TorchEngine(model, tok, device=args.device, seed=0, kv_reuse=reuse)
                    for reuse in (True, False)
                }
                f = bench_engines(engines, samples, args, parser, turns)
                on, off = f[True], f[False]
                speedup = off["seconds"] / on["seconds"]
                print(
                    f"  (d) {turns} turns: KV reuse {on['seconds']:6.2f} s (prefilled "
                    f"{on['prefilled']:.0f}, reused {on['reused']:.0f} tokens), no reuse "
                    f"{off['seconds']:6.2f} s (prefilled {off['prefilled']:.0f}); generated "
                    f"{on['tokens_per_s'] * on['seconds']:.0f} / "
                    f"{off['tokens_per_s'] * off['seconds']:.0f} tokens; turns/episode "
                    f"{on['turns_per_episode']:.2f}; speed-up {speedup:.2f}x",
                    flush=True,
                )
        if "compiled" in parts:
            engines = {
                compiled: TorchEngine(
                    model, tok, device=args.device, seed=0, compile_decode=compiled
                )
                for compiled in (True, False)
            }
            f = bench_engines(engines, samples, args, parser, args.max_turns)
            fast, eager = f[True], f[False]
            print(
                f"  (e) compiled decoding, {args.max_turns} turns: {fast['seconds']:6.2f} s "
                f"({fast['tokens_per_s']:.1f} gen tokens/s), eager {eager['seconds']:6.2f} s "
                f"({eager['tokens_per_s']:.1f}); speed-up {eager['seconds'] / fast['seconds']:.2f}x"
                f" (shared prefix held once: "
                f"{engines[True].stats['shared_prefix_decodes'] > 0})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
