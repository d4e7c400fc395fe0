"""The episode environment's part in a batch of episodes: each episode's own object opened
and always closed, the reward of each turn, and the episode's rewards read into its
trajectory."""

from __future__ import annotations

from agentrl.envs import EnvironmentTools
from agentrl.errors import UserCodeError
from agentrl.rollout.episode_state import EpisodeState
from agentrl.tools import ToolRegistry
from agentrl.trajectory import ToolEvent, Trajectory


def open_environments(episodes: list[EpisodeState], tools: ToolRegistry) -> None:
    """Give each episode its own environment object (when the tools come with one)."""
    if not isinstance(tools, EnvironmentTools):
        return
    for ep in episodes:
        ep.environment = tools.open_episode(ep.sample)
        ep.registry = ep.environment.tools
        if ep.environment.observation is not None:
            ep.messages.append({"role": "user", "content": ep.environment.observation})


def close_environments(episodes: list[EpisodeState]) -> None:
    """``close()`` every environment opened, each once, even when one of them fails."""
    error: BaseException | None = None
    for ep in episodes:
        if ep.environment is None:
            continue
        try:
            ep.environment.close()
        except BaseException as exc:
            error = error or exc
        ep.environment = None
    if error is not None:
        raise error


def score_turn(ep: EpisodeState, turn: int, events: list[ToolEvent]) -> None:
    """The environment's reward of the turn just played, once its calls ran (if it scores
    turns)."""
    if ep.environment is not None and ep.environment.scores_turns:
        text = ep.turn_outputs[turn] if turn < len(ep.turn_outputs) else ""
        ep.turn_rewards.append(ep.environment.turn_reward(turn, text, list(events)))


def environment_rewards(traj: Trajectory, ep: EpisodeState) -> None:
    """The environment's rewards: the episode's (a scalar or one per turn) and each turn's.

    Per-turn values (from ``turn_reward`` or a list from ``reward``) go to
    ``traj.turn_rewards``; with both, the lists add up turn by turn and a scalar episode
    reward joins the last turn. ``env_reward`` is the episode's total.
    """
    assert ep.environment is not None
    value = ep.environment.reward(traj)
    turns: list[float | None] | None = (
        list(ep.turn_rewards) if ep.environment.scores_turns else None
    )
    if isinstance(value, list):
        if len(value) != traj.num_turns:
            raise UserCodeError(
                f"environment {type(ep.environment.env).__name__}.reward() returned "
                f"{len(value)} per-turn rewards for an episode of {traj.num_turns} turn(s)"
            )
        turns = value if turns is None else [_add(a, b) for a, b in zip(turns, value, strict=True)]
        value = None
    if turns is not None and value is not None:
        turns = [*turns[:-1], _add(turns[-1] if turns else None, value)]
    traj.turn_rewards = turns
    if turns is not None:
        given = [v for v in turns if v is not None]
        traj.env_reward = float(sum(given)) if given else None
    else:
        traj.env_reward = value


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else (a if b is None else a + b)


__all__ = ["close_environments", "environment_rewards", "open_environments", "score_turn"]
