"""The dump records of a training step and of an evaluation (`agentrl.observability.rollout_dump`
writes them): the step's episodes with the rewards, reward terms and advantages it trained on,
and what the trainer saw of each token (`agentrl.observability.token_view`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.observability import QuietObserver, RunObserver
from agentrl.observability.rollout_dump import episode_records
from agentrl.observability.token_view import share_prompts, token_view, vocab_table
from agentrl.training.sources import GroupSource
from agentrl.training.step import StepOutcome
from agentrl.trajectory import Trajectory

Observer = RunObserver | QuietObserver


def step_records(
    outcome: StepOutcome, step: int, max_turns: int, tokenizer: Any = None
) -> list[dict[str, Any]]:
    """One record per trained episode of ``outcome`` ([] when the step trained on nothing).

    With a ``tokenizer``, each record has its ``token_view`` and the first one the dump's
    decoded vocabulary table.
    """
    if outcome.scores is None or outcome.batch is None:
        return []
    advantages = outcome.advantages.tolist() if outcome.advantages is not None else None
    records = episode_records(
        outcome.batch.trajectories,
        kind="train",
        step=step,
        groups=outcome.batch.group_ids.tolist(),
        rewards=outcome.scores.rewards.tolist(),
        details=outcome.scores.dump_terms(),
        max_turns=max_turns,
        advantages=advantages,
        trainer_version=outcome.current_version,
    )
    _add_turns(records, outcome)
    if tokenizer is not None and outcome.tokens is not None:
        _add_token_views(records, outcome)
        if records:
            records[0]["vocab"] = vocab_table(tokenizer, records)
    return records


def _add_turns(records: list[dict[str, Any]], outcome: StepOutcome) -> None:
    """Each episode's reward and advantage per turn, when the step had them."""
    assert outcome.scores is not None
    turn_rewards = outcome.scores.turn_rewards
    turn_adv = outcome.turn_advantages.tolist() if outcome.turn_advantages is not None else None
    for i, record in enumerate(records):
        k = max(int(record.get("turns") or 1), 1)
        if turn_rewards is not None:
            record["turn_rewards"] = [float(v) for v in turn_rewards[i]]
        if turn_adv is not None:
            record["turn_advantages"] = [float(v) for v in turn_adv[i][:k]]


def _add_token_views(records: list[dict[str, Any]], outcome: StepOutcome) -> None:
    batch, tokens = outcome.batch, outcome.tokens
    assert batch is not None and tokens is not None
    ids = batch.input_ids.cpu().tolist()
    lens = batch.seq_lens.cpu().tolist()
    loss = batch.loss_mask.cpu().tolist()
    behaviour = batch.behavior_logps.cpu().tolist()
    trained = tokens.logps.cpu().tolist()
    entropy = tokens.entropy.cpu().tolist()
    adv = tokens.advantages.cpu().tolist()
    seen = tokens.seen.cpu().tolist()  # a row training skipped (no gradient) has no trained view
    for i, (record, traj) in enumerate(zip(records, batch.trajectories, strict=True)):
        n = int(lens[i])
        prompt = max(n - len(traj.response_ids), 0)
        ran = (trained[i], entropy[i]) if seen[i] else (None, None)
        view, gaps = token_view(ids[i][:n], prompt, loss[i], behaviour[i], *ran, adv[i])
        record["token_view"] = view
        record.update(gaps)
    share_prompts(records)


def add_episode_token_views(
    records: list[dict[str, Any]], trajectories: Sequence[Trajectory], tokenizer: Any
) -> list[dict[str, Any]]:
    """Token views from the episodes alone (an evaluation: behaviour log-probs, no trained
    ones); the first record gets the vocabulary table. Returns ``records``."""
    for record, traj in zip(records, trajectories, strict=True):
        pad = [0.0] * (len(traj.prompt_ids) - 1)
        loss = pad + [float(m) for m in traj.response_mask]
        behaviour = pad + [float(v) for v in traj.response_logps]
        ids = list(traj.prompt_ids) + list(traj.response_ids)
        record["token_view"], _ = token_view(ids, len(traj.prompt_ids), loss, behaviour)
    share_prompts(records)
    if records:
        records[0]["vocab"] = vocab_table(tokenizer, records)
    return records


def show_episodes(
    observer: Observer,
    step: int,
    outcome: StepOutcome,
    source: GroupSource,
    max_turns: int,
    tokenizer: Any,
) -> None:
    """The step's debug sample (at ``debug_interval``) and its dump (at ``dump_rollouts``),
    an agent's failed episodes included."""
    if outcome.scores is not None and outcome.batch is not None:
        rewards = outcome.scores.rewards.tolist()
        observer.debug_sample(step, outcome.batch.groups, rewards, outcome.scores.details)
    if observer.dump_due(step):
        records = step_records(outcome, step, max_turns, tokenizer)
        dropped = getattr(source, "dropped_records", None)  # an agent's failures
        records += dropped(step, len(records)) if dropped is not None else []
        observer.dump("train", step, records)


__all__ = ["Observer", "add_episode_token_views", "show_episodes", "step_records"]
