"""Run directories with dumped episodes, made without training, for the view's tests.

Each episode is a real `Trajectory` scored by the real reward, with the behaviours the
browser must show: right and wrong answers, failed tool calls, turns cut by the limit.
Which behaviour an episode gets is drawn from a seeded generator, so rewards spread.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from agentrl.observability.metrics_log import MetricsLog
from agentrl.observability.rollout_dump import dump_path, episode_records, write_records
from agentrl.observability.token_view import share_prompts, token_view
from agentrl.rewards import RewardConfig
from agentrl.training.scoring import score_trajectories
from agentrl.trajectory import Trajectory

SYSTEM = "Call calculate_math for each expression, then reply <answer>r1, r2</answer>."


def _call(expression: str) -> str:
    args = {"name": "calculate_math", "arguments": {"expression": expression}}
    return f"<tool_call>{json.dumps(args)}</tool_call>"


def episode(rng: random.Random, task: int, version: int) -> Trajectory:
    """One episode of task ``task`` (a + b, then c * d) with a drawn behaviour."""
    task_rng = random.Random(task)
    a, b, c, d = (task_rng.randint(2, 99) for _ in range(4))
    first, second = f"{a}+{b}", f"{c}*{d}"
    values = [str(a + b), str(c * d)]
    behaviour = rng.choice(["right", "right", "wrong", "tool_error", "no_tools", "cut"])
    turns = [_call(first) + "\n" + _call(second)]
    events = [
        {
            "ok": True,
            "name": "calculate_math",
            "args": {"expression": e},
            "result": {"value": float(v), "result": v},
            "canonical": True,
        }
        for e, v in ((first, values[0]), (second, values[1]))
    ]
    unfinished = False
    if behaviour == "tool_error":
        events[1] = {
            "ok": False,
            "name": "calculate_math",
            "args": {"expression": f"{c}*"},
            "result": {"error": "invalid expression"},
            "canonical": True,
        }
        turns = [_call(first) + "\n" + _call(f"{c}*"), f"<answer>{values[0]}, 0</answer>"]
    elif behaviour == "no_tools":
        turns, events = [f"<answer>{a + b + 1}, {c * d}</answer>"], []
    elif behaviour == "cut":
        turns.append(_call(first))
        events.append(dict(events[0]))
        unfinished = True
    else:
        answer = values if behaviour == "right" else [values[0], str(c * d + 7)]
        turns.append(f"<answer>{', '.join(answer)}</answer>")
    turn_of = [0] * min(len(events), 2) + [1] * max(len(events) - 2, 0)
    generated = 12 * len(turns)
    return Trajectory(
        prompt=f"task {task}",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Compute {first}, then {second}."},
        ],
        tools=None,
        gt=values,
        completion="\n".join(turns),
        context="",
        prompt_ids=list(range(40)),
        response_ids=list(range(generated + 6)),
        response_mask=[1] * generated + [0] * 6,
        response_logps=[-0.5] * generated + [0.0] * 6,
        response_versions=[version] * generated + [-1] * 6,
        turn_outputs=turns,
        tool_events=events,
        tool_turns=turn_of,
        tool_seconds=[0.0004 + 0.0001 * rng.random() for _ in events],
        unfinished=unfinished,
        policy_version=version,
        data_index=task,
        rollout_time=0.05 + 0.1 * rng.random(),
    )


def add_token_views(records: list[dict[str, Any]], trajs: list[Trajectory], rng: random.Random):
    """Token views as the trainer dumps them: the trainer's log-probs off the behaviour ones
    by 0.3 in about a quarter of the episodes (0.001 elsewhere); a vocabulary of ``w<id>``."""
    for record, traj in zip(records, trajs, strict=True):
        ids = traj.prompt_ids + traj.response_ids
        n_prompt = len(traj.prompt_ids)
        loss = [0.0] * (n_prompt - 1) + [float(m) for m in traj.response_mask]
        behaviour = [0.0] * (n_prompt - 1) + list(traj.response_logps)
        gap = 0.3 if rng.random() < 0.25 else 0.001
        trained = [b - gap * m for b, m in zip(behaviour, loss, strict=True)]
        entropy = [1.5 * m for m in loss]
        advantages = [float(record["advantage"] or 0.0) * m for m in loss]
        view, gaps = token_view(ids, n_prompt, loss, behaviour, trained, entropy, advantages)
        record["token_view"] = view
        record.update(gaps)
    share_prompts(records)
    used = {i for t in trajs for i in t.prompt_ids + t.response_ids}
    records[0]["vocab"] = {str(i): f"w{i} " for i in sorted(used)}


def _group_advantages(rewards: list[float], g: int) -> list[float]:
    out = []
    for start in range(0, len(rewards), g):
        chunk = rewards[start : start + g]
        mean = sum(chunk) / len(chunk)
        std = (sum((r - mean) ** 2 for r in chunk) / len(chunk)) ** 0.5
        out += [(r - mean) / (std + 1e-4) for r in chunk]
    return out


def write_run(
    run_dir: Path,
    *,
    steps: int,
    dump_every: int,
    groups: int,
    g: int,
    eval_tasks: int,
    seed: int = 0,
) -> dict[str, Any]:
    """A run directory with config, metrics and dumps; returns what was written."""
    rng = random.Random(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(f'[run]\nsave_weight = "{run_dir.name}"\nseed = {seed}\n')
    log = MetricsLog(run_dir / "metrics.jsonl")
    reward = RewardConfig()
    train: list[dict[str, Any]] = []
    for step in range(1, steps + 1):
        tasks = [rng.randrange(500) for _ in range(groups)]  # the G episodes share a prompt
        trajs = [episode(rng, task, step - 1) for task in tasks for _ in range(g)]
        scores = score_trajectories(trajs, reward, step)
        rewards = scores.rewards.tolist()
        log.write(
            step,
            "train",
            {
                "reward/mean": sum(rewards) / len(rewards),
                "reward_detail/exact_match": scores.means.get("exact_match", 0.0),
                "policy/kl_ref": 0.001 * step,
                "policy/entropy": 2.0 - 0.01 * step,
                "policy/ratio_clip_frac": 0.02 * rng.random(),
            },
        )
        if step % dump_every == 0:
            records = episode_records(
                trajs,
                kind="train",
                step=step,
                groups=[i // g for i in range(len(trajs))],
                rewards=rewards,
                details=scores.details,
                max_turns=2,
                advantages=_group_advantages(rewards, g),
                trainer_version=step,
            )
            add_token_views(records, trajs, rng)
            write_records(dump_path(run_dir, "train", step), records)
            train += records
    trajs = [episode(rng, task, steps) for task in range(eval_tasks)]
    scores = score_trajectories(trajs, reward, None)
    evals = episode_records(
        trajs,
        kind="eval",
        step=steps,
        groups=list(range(eval_tasks)),
        rewards=scores.rewards.tolist(),
        details=scores.details,
        max_turns=2,
        trainer_version=steps,
    )
    write_records(dump_path(run_dir, "eval", steps), evals)
    exact = scores.means.get("exact_match", 0.0)
    log.write(
        steps, "eval", {"eval/reward": float(scores.rewards.mean()), "eval/exact_match": exact}
    )
    log.close()
    return {"train": train, "eval": evals}
