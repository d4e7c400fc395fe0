"""Soak: kill and resume `agentrl train` at random moments, with faults injected, and check
that the final weights and metrics equal those of an uninterrupted run.

    python benches/soak.py [--steps 16] [--budget 480] [--seed 0] [--work DIR]

One reference run trains ``--steps`` steps without interruption (a checkpoint every step).
The soak run trains the same run in pieces: each piece is started with ``--from_resume 1``
and stopped at a random moment, by SIGKILL (most) or SIGTERM (saves first), until a piece
finishes on its own. Faults on the way:

- a full disk on one save: the soak run lives on a small tmpfs, filled up before one
  piece, so its first checkpoint fails (exit 1, one line naming the checkpoint); the
  filler is removed and the run resumes from the last good checkpoint;
- tool timeouts: a user tool (``--tools``) that sleeps past its own timeout for some keys;
- a dying tool server: an MCP server (``--mcp``) that exits on some calls and is restarted.

The tool faults happen only when the policy calls those tools; the small random policy
here seldom does, so the counts below say how many calls there were. The script exits 1
when the results differ. It is a bench, not a test: it takes minutes (``--budget`` bounds
the soak's wall time; the reference run comes on top).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

TOOLS = '''
import time
from agentrl.tools import tool


@tool(timeout=0.5)
def slow_lookup(key: str) -> str:
    """Look a key up (slow for some keys).

    Args:
        key: what to look up
    """
    if sum(map(ord, key)) % 2:
        time.sleep(3)  # past its timeout
    return key.upper()
'''

SERVER = """
import json, sys
TOOLS = [{"name": "add", "description": "Add two numbers.", "inputSchema": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "soak", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        args = params.get("arguments") or {}
        if int(args.get("a", 0) or 0) % 3 == 0:
            sys.exit(7)  # the server dies on these calls
        result = {"content": [{"type": "text", "text": str(args.get("a", 0) + args.get("b", 0))}]}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""

# Metrics that measure time or this process, not the training: not compared.
VOLATILE = ("time", "_s", "seconds", "per_s", "tok_s", "memory", "mem_", "wait", "restarts")


def write_inputs(root: Path) -> tuple[Path, Path]:
    """A small random model and prompts (and the fault-injecting tools)."""
    from agentrl.data.synthetic import TaskGenerator, write_tasks
    from agentrl.models.tiny import TinySpec, build_model, build_tokenizer, demo_corpus, save_preset

    spec = TinySpec(
        vocab_size=3072,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        corpus_tasks=150,
    )
    tokenizer = build_tokenizer(spec, demo_corpus(spec.corpus_tasks, spec.corpus_seed))
    save_preset(build_model(spec, len(tokenizer)), tokenizer, root / "model")
    generator = TaskGenerator(seed=3)
    write_tasks(str(root / "prompts.jsonl"), list(generator.tasks(24)), generator.tools())
    (root / "soak_tools.py").write_text(TOOLS)
    (root / "soak_server.py").write_text(SERVER)
    return root / "model", root / "prompts.jsonl"


def train_argv(root: Path, save_dir: Path, steps: int) -> list[str]:
    options = (
        f"--model {root / 'model'} --data {root / 'prompts.jsonl'} --save_dir {save_dir} "
        f"--save_weight run --total_steps {steps} --save_interval 1 --keep_last 2 "
        "--batch_size 2 --num_generations 2 --max_turns 2 --max_gen_len 16 "
        "--eval_before_train 0 --eval_interval 0 --eval_ratio 0 --progress 0 --report 0 "
        "--async_workers 0 --filter_mode all --from_resume 1 --tools soak_tools:slow_lookup"
    ).split()
    server = f"{sys.executable} {root / 'soak_server.py'}"
    return [sys.executable, "-m", "agentrl.cli", "train", *options, "--mcp", server]


def env(root: Path) -> dict[str, str]:
    path = os.pathsep.join([str(root), str(REPO / "python"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "AGENTRL_DEBUG": ""}


def mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


def fill(disk: Path, leave: int) -> None:
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize - leave
    with open(disk / "filler", "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * max(free, 0))


def final_state(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import torch
    from agentrl.observability import read_metrics
    from agentrl.training.checkpoint import latest_checkpoint

    latest = latest_checkpoint(run / "checkpoints")
    assert latest is not None, f"no checkpoint in {run}"
    weights = torch.load(latest / "model.pt", map_location="cpu", weights_only=True)
    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    return weights, rows


def compare(ref: Path, soak: Path) -> tuple[bool, list[str]]:
    import torch

    (wa, ra), (wb, rb) = final_state(ref), final_state(soak)
    notes = []
    same_weights = wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    if not same_weights:
        notes.append("final weights differ")
    if [r["step"] for r in ra] != [r["step"] for r in rb]:
        notes.append(f"metric steps differ: {[r['step'] for r in ra]} vs {[r['step'] for r in rb]}")
    for a, b in zip(ra, rb, strict=False):
        for key in sorted(set(a) | set(b)):
            if any(v in key for v in VOLATILE):
                continue
            if a.get(key) != b.get(key):
                notes.append(f"step {a['step']} {key}: {a.get(key)} vs {b.get(key)}")
    return not notes, notes[:10]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--budget", type=float, default=480.0, help="soak wall seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(args.work or tempfile.mkdtemp(prefix="agentrl-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    write_inputs(root)

    began = time.monotonic()
    ref = subprocess.run(
        train_argv(root, root / "ref", args.steps),
        env=env(root),
        cwd=root,
        capture_output=True,
        text=True,
    )
    ref_seconds = time.monotonic() - began
    if ref.returncode != 0:
        print(ref.stderr[-2000:])
        return 1
    step_s, startup_s = step_timing(root / "ref" / "run", ref_seconds, args.steps)
    print(
        f"reference run: {args.steps} steps in {ref_seconds:.0f}s "
        f"(start-up ~{startup_s:.0f}s, ~{step_s:.1f}s a step)"
    )

    disk = root / "disk"
    mounted = mount_tmpfs(disk, "64m")
    if not mounted:
        print("cannot mount a tmpfs here: the full-disk fault is skipped")
    counts = {
        "cycles": 0,
        "sigkill": 0,
        "sigterm": 0,
        "finished": 0,
        "disk_full": 0,
        "disk_full_exit_1": 0,
        "other_exits": 0,
    }
    disk_full_at = 2 if mounted else -1  # the second piece finds the disk full
    soak_began = time.monotonic()
    done = False
    try:
        while not done and time.monotonic() - soak_began < args.budget:
            counts["cycles"] += 1
            full = counts["cycles"] == disk_full_at
            if full:
                fill(disk, leave=96 * 1024)  # room for metrics, not for a checkpoint
                counts["disk_full"] += 1
            process = subprocess.Popen(
                train_argv(root, disk, args.steps),
                env=env(root),
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            how = "sigterm" if rng.random() < 0.3 else "sigkill"
            # A random moment from the start-up to a few steps in: mid-step, mid-save, ...
            delay = rng.uniform(0.5 * startup_s, startup_s + 1.5 * step_s)
            try:
                _, err = process.communicate(timeout=None if full else delay)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
                _, err = process.communicate()
                counts[how] += 1
                continue
            finally:
                if full:
                    (disk / "filler").unlink(missing_ok=True)
            if process.returncode == 0:
                counts["finished"] += 1
                done = True
            elif full and process.returncode == 1 and "cannot save" in err:
                counts["disk_full_exit_1"] += 1
                print("disk full:", err.strip().splitlines()[-1])
            else:
                counts["other_exits"] += 1
                print(f"exit {process.returncode}:", (err.strip().splitlines() or [""])[-1])
        soak_seconds = time.monotonic() - soak_began
        calls = tool_counts(disk / "run") if done else {}
        equal, notes = (False, ["unfinished"])
        if done:
            equal, notes = compare(root / "ref" / "run", disk / "run")
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)
    print(json.dumps({**counts, "soak_seconds": round(soak_seconds), **calls, "equal": equal}))
    for note in notes:
        print("  ", note)
    if args.work is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if equal else 1


def step_timing(run: Path, seconds: float, steps: int) -> tuple[float, float]:
    """(seconds a step, seconds of start-up) of a finished run, from its metrics' times."""
    from agentrl.observability import read_metrics

    times = [r["time"] for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    step_s = (times[-1] - times[0]) / max(len(times) - 1, 1) if len(times) > 1 else 1.0
    return step_s, max(seconds - steps * step_s, 1.0)


def tool_counts(run: Path) -> dict[str, float]:
    """Tool calls over the run's steps and the most MCP restarts one piece saw (metrics)."""
    from agentrl.observability import read_metrics

    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    total: dict[str, float] = {"mcp_restarts_max": 0.0}
    for row in rows:
        for key, value in row.items():
            if value is None:
                continue
            if key.startswith("tools/") and key.endswith("/calls"):
                total[key] = total.get(key, 0.0) + float(value)
            elif key == "tools/mcp/restarts":
                total["mcp_restarts_max"] = max(total["mcp_restarts_max"], float(value))
    return total


if __name__ == "__main__":
    raise SystemExit(main())
