"""Soak: kill and resume `agentrl train` at random moments, with faults injected, and check
that the final weights and metrics equal those of an uninterrupted run.

    python benches/soak.py [--steps 10] [--budget 480] [--seed 0] [--work DIR]

The policy is a small model warm-started (``agentrl sft``, a few hundred steps) on
demonstrations that call both tools of the task, ``slow_lookup`` (a ``--tools`` user tool)
and ``add`` (an ``--mcp`` server's tool), so the RL runs make tool calls from the first
step. Each fault is keyed on the call's content, never on wall time, so an uninterrupted
run meets the same faults at the same calls:

- tool timeouts: ``slow_lookup`` sleeps 4 s, past its 2 s timeout, for keys whose
  character codes sum to an odd number (in a thread: a worker process started after a
  timeout could itself take 2 s on a loaded machine, failing a fast key);
- a dying tool server: the MCP server exits (status 7) on an ``add`` call whose ``a`` is a
  multiple of 3, after answering the calls sent with it, and the run starts it again
  (``--mcp_max_restarts`` raised so that a whole run may outlive every death); the
  episodes' tool calls run one episode after another (``--tool_workers 1``), so which
  calls reach a server before it dies does not depend on thread timing;
- a full disk on one save: the soak run lives on a small tmpfs, filled up before one
  piece, so its first checkpoint fails (exit 1, one line naming the checkpoint); the
  filler is removed and the run resumes from the last good checkpoint.

One reference run trains ``--steps`` steps without interruption (a checkpoint every step).
The soak run trains the same run in pieces: each piece is started with ``--from_resume 1``
and stopped at a random moment, by SIGKILL (most) or SIGTERM (saves first), until a piece
finishes on its own. The tools write each fault they inject to a log (so a replayed step
counts again); what the runs saw is read from their metrics (``tools/<name>/calls`` x
``error_rate``, ``tools/mcp/restarts``) and consoles. The script prints both and exits 1
when the results differ. It is a bench, not a test: it takes minutes (``--budget`` bounds
the soak's wall time; the warm start and the reference run come on top).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
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
from pathlib import Path

from agentrl.tools import tool

FAULTS = Path(__file__).with_name("faults.log")


def slow(key: str) -> bool:
    return sum(map(ord, str(key))) % 2 == 1


@tool(timeout=2, isolate=False)
def slow_lookup(key: str) -> str:
    """Look a key up (slow for some keys).

    Args:
        key: what to look up
    """
    if slow(key):
        with open(FAULTS, "a") as fh:
            fh.write("timeout\\n")
        time.sleep(4)  # past its timeout (a thread: it ends on its own soon after)
    return key.upper()


def reward(prompts, completions, trajectories, completion_ids=None, **columns):
    """Calls that worked, less half of those that failed."""
    out = []
    for trajectory in trajectories:
        events = trajectory.tool_events
        ok = sum(1 for event in events if event.get("ok"))
        out.append(ok - 0.5 * (len(events) - ok))
    return out
'''

SERVER = """
import json, os, select, sys, time
from pathlib import Path

FAULTS = Path(__file__).with_name("faults.log")
TOOLS = [{"name": "add", "description": "Add two numbers.", "inputSchema": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]


def dies(msg):
    if msg.get("method") != "tools/call":
        return False
    try:
        return int((msg.get("params") or {}).get("arguments", {}).get("a")) % 3 == 0
    except (TypeError, ValueError):
        return False


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "soak", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        args = params.get("arguments") or {}
        try:
            text = str(args.get("a", 0) + args.get("b", 0))
        except TypeError:
            text = "a and b must be numbers"
        result = {"content": [{"type": "text", "text": text}]}
    else:
        return
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)


def messages(data):
    for line in data.split(b"\\n"):
        if line.strip():
            msg = json.loads(line)
            if "id" in msg:
                yield msg


buffer = b""
while True:
    while b"\\n" not in buffer:
        chunk = os.read(0, 65536)
        if not chunk:
            sys.exit(0)
        buffer += chunk
    line, buffer = buffer.split(b"\\n", 1)
    for msg in messages(line):
        if not dies(msg):
            answer(msg)
            continue
        # Die, but first answer the calls sent together with this one (the episodes of a
        # rollout call at once), so which calls fail does not depend on their order.
        deadline = time.monotonic() + 0.5
        while (left := deadline - time.monotonic()) > 0:
            if select.select([0], [], [], left)[0]:
                chunk = os.read(0, 65536)
                if not chunk:
                    break
                buffer += chunk
        for other in messages(buffer):
            if not dies(other):
                answer(other)
        with open(FAULTS, "a") as fh:
            fh.write("server_exit\\n")
        sys.exit(7)
"""

# Metrics that measure time or this process, not the training: not compared.
VOLATILE = ("time", "_s", "seconds", "per_s", "tok_s", "memory", "mem_", "wait", "restarts")

WORDS = [
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "hazel",
    "iris",
    "jade",
    "kelp",
    "lumen",
    "maple",
    "noble",
    "onyx",
    "pearl",
    "quartz",
    "raven",
    "sage",
    "tulip",
    "umber",
    "vale",
    "willow",
    "yarrow",
    "zephyr",
]


def task(rng: random.Random) -> tuple[str, int, int]:
    return rng.choice(WORDS), rng.randint(1, 60), rng.randint(1, 60)


def prompt(word: str, a: int, b: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Look up {word} and add {a} and {b}."}]


def demonstration(word: str, a: int, b: int) -> list[dict[str, Any]]:
    """The prompt, both calls, their results (as the run shows them) and an answer."""
    from agentrl.tools import tool_message

    calls = [
        {"name": "slow_lookup", "arguments": {"key": word}},
        {"name": "add", "arguments": {"a": a, "b": b}},
    ]
    return [
        *prompt(word, a, b),
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": tool_message(word.upper())},
        {"role": "tool", "content": tool_message(str(a + b))},
        {"role": "assistant", "content": f"<answer>{word.upper()} {a + b}</answer>"},
    ]


def tool_specs(root: Path) -> list[dict[str, Any]]:
    """The specs the run shows: the user tool's, then the MCP server's (as the client
    turns them into specs)."""
    sys.path.insert(0, str(root))
    try:
        import soak_tools
    finally:
        sys.path.remove(str(root))
    add = {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            },
        },
    }
    return [soak_tools.slow_lookup.spec, add]


def write_inputs(root: Path, demos: int = 600) -> None:
    """The fault-injecting tools, prompts, demonstrations, and a small random model whose
    tokenizer is trained on those demonstrations."""
    from agentrl.chat import render_chat
    from agentrl.models.tiny import TinySpec, build_model, build_tokenizer, save_preset

    (root / "soak_tools.py").write_text(TOOLS)
    (root / "soak_server.py").write_text(SERVER)
    specs = tool_specs(root)
    rng = random.Random(3)
    with open(root / "prompts.jsonl", "w") as fh:
        for _ in range(32):
            word, a, b = task(rng)
            record = {"messages": prompt(word, a, b), "answer": f"{word.upper()} {a + b}"}
            fh.write(json.dumps(record) + "\n")
    conversations = [demonstration(*task(rng)) for _ in range(demos)]
    with open(root / "demos.jsonl", "w") as fh:
        for messages in conversations:
            fh.write(json.dumps({"messages": messages, "tools": specs}) + "\n")
    spec = TinySpec(
        vocab_size=1024,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=32,
        intermediate_size=128,
        digit_chunk=2,
    )
    corpus = (render_chat(m, specs, add_generation_prompt=False) for m in conversations)
    tokenizer = build_tokenizer(spec, corpus)
    save_preset(build_model(spec, len(tokenizer)), tokenizer, root / "base")


def warm_start(root: Path, steps: int) -> Path:
    """``agentrl sft`` of the base model on the demonstrations: the policy's directory."""
    out = root / "sft"
    argv = [
        sys.executable,
        "-m",
        "agentrl.cli",
        "sft",
        "--model",
        str(root / "base"),
        "--data",
        str(root / "demos.jsonl"),
        "--output",
        str(out),
        "--total_steps",
        str(steps),
        "--warmup_steps",
        "10",
        "--eval_interval",
        "0",
        "--eval_samples",
        "0",
        "--save_interval",
        "0",
        "--progress",
        "0",
    ]
    done = subprocess.run(argv, env=env(root), cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"warm start failed ({done.returncode}): {done.stderr[-2000:]}")
    return out


def train_argv(root: Path, save_dir: Path, steps: int) -> list[str]:
    options = (
        f"--model {root / 'sft'} --data {root / 'prompts.jsonl'} --save_dir {save_dir} "
        f"--run_name run --total_steps {steps} --save_interval 1 --keep_last 2 "
        "--batch_size 2 --num_generations 2 --max_turns 2 --max_gen_len 48 --tool_workers 1 "
        "--eval_before_train 0 --eval_interval 0 --eval_ratio 0 --progress 0 --report 0 "
        "--async_workers 0 --filter_mode all --require_gt 0 --from_resume 1 "
        "--tools soak_tools:slow_lookup --reward_funcs soak_tools:reward "
        "--mcp_max_restarts 1000"
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
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--budget", type=float, default=480.0, help="soak wall seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft_steps", type=int, default=300, help="warm-start steps")
    parser.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(args.work or tempfile.mkdtemp(prefix="agentrl-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root / "ref", ignore_errors=True)  # a --work dir keeps only its policy
    (root / "faults.log").unlink(missing_ok=True)
    began = time.monotonic()
    if not (root / "sft" / "model.safetensors").is_file():
        write_inputs(root)
        warm_start(root, args.sft_steps)
    (root / "soak_tools.py").write_text(TOOLS)  # a --work dir's policy gets today's faults
    (root / "soak_server.py").write_text(SERVER)
    print(f"warm start: {args.sft_steps} sft steps ({time.monotonic() - began:.0f}s)")

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
    ref_injected = injected(root)
    ref_seen = observed(root / "ref" / "run")
    print(
        f"reference run: {args.steps} steps in {ref_seconds:.0f}s "
        f"(start-up ~{startup_s:.0f}s, ~{step_s:.1f}s a step)"
    )
    print("  injected:", json.dumps(ref_injected))
    print("  in its metrics:", json.dumps(ref_seen))

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
        "server_restarts_said": 0,
    }
    disk_full_at = 2 if mounted else -1  # the second piece finds the disk full
    soak_began = time.monotonic()
    done = False
    soak_seconds = 0.0
    try:
        shutil.rmtree(disk / "run", ignore_errors=True)
        (disk / "filler").unlink(missing_ok=True)
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
                out, err = process.communicate(timeout=None if full else delay)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
                out, err = process.communicate()
                counts[how] += 1
                continue
            finally:
                if full:
                    (disk / "filler").unlink(missing_ok=True)
                counts["server_restarts_said"] += len(RESTARTED.findall(out + err))
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
        soak_injected = {k: v - ref_injected.get(k, 0) for k, v in injected(root).items()}
        seen = observed(disk / "run") if done else {}
        equal, notes = (False, ["unfinished"])
        if done:
            equal, notes = compare(root / "ref" / "run", disk / "run")
        shutil.rmtree(root / "soak-run", ignore_errors=True)
        if (disk / "run").is_dir():  # kept beside the reference (the disk goes)
            shutil.copytree(disk / "run", root / "soak-run")
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)
    print(f"soak run: {json.dumps({**counts, 'soak_seconds': round(soak_seconds)})}")
    print("  injected (replayed steps included):", json.dumps(soak_injected))
    print("  in its metrics:", json.dumps(seen))
    print(f"equal: {equal}")
    for note in notes:
        print("  ", note)
    if args.work is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if equal else 1


# What a run prints when its MCP server exited and was started again.
RESTARTED = re.compile(r"exited with status 7; starting it again")


def injected(root: Path) -> dict[str, int]:
    """Faults the tools injected so far, by kind (their log)."""
    path = root / "faults.log"
    lines = path.read_text().split() if path.is_file() else []
    return {kind: lines.count(kind) for kind in ("timeout", "server_exit")}


def observed(run: Path) -> dict[str, float]:
    """What a run's train metrics say of its tools: calls and failed calls per tool (calls x
    error_rate, summed over steps) and the most MCP restarts one process counted."""
    from agentrl.observability import read_metrics

    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    seen: dict[str, float] = {"mcp_restarts_max": 0.0}
    for row in rows:
        for key, value in row.items():
            if value is None or not key.startswith("tools/"):
                continue
            if key.endswith("/calls"):
                name = key[len("tools/") : -len("/calls")]
                seen[f"{name}_calls"] = seen.get(f"{name}_calls", 0.0) + float(value)
                failed = float(value) * float(row.get(f"tools/{name}/error_rate") or 0.0)
                seen[f"{name}_failed"] = seen.get(f"{name}_failed", 0.0) + round(failed)
            elif key == "tools/mcp/restarts":
                seen["mcp_restarts_max"] = max(seen["mcp_restarts_max"], float(value))
    return seen


def step_timing(run: Path, seconds: float, steps: int) -> tuple[float, float]:
    """(seconds a step, seconds of start-up) of a finished run, from its metrics' times."""
    from agentrl.observability import read_metrics

    times = [r["time"] for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "train"]
    step_s = (times[-1] - times[0]) / max(len(times) - 1, 1) if len(times) > 1 else 1.0
    return step_s, max(seconds - steps * step_s, 1.0)


if __name__ == "__main__":
    raise SystemExit(main())
