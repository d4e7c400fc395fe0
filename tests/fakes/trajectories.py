"""Trajectories made by hand, for the tests of scoring and of reward functions."""

from __future__ import annotations

from typing import Any

from agentrl.trajectory import Trajectory


def column_trajectory(final: str, columns: dict[str, Any], gt: list[str]) -> Trajectory:
    """A finished two-turn episode whose last turn is ``final``, of a sample with dataset
    ``columns`` and ground truth ``gt``."""
    return Trajectory(
        prompt="p",
        messages=[{"role": "user", "content": "q"}],
        tools=None,
        gt=gt,
        completion="first\n" + final,
        context="",
        prompt_ids=[1],
        response_ids=[5, 6, 7],
        response_mask=[1, 0, 1],
        response_logps=[-0.1, 0.0, -0.2],
        response_versions=[0, -1, 0],
        turn_outputs=["first", final],
        columns=columns,
    )


# Three episodes for reward functions that read dataset columns: a right answer, no answer,
# and an answer to a sample whose ``answer`` column is None.
TRAJECTORIES = [
    column_trajectory("<answer>Kessa</answer>", {"answer": "Kessa", "level": 1}, ["Kessa"]),
    column_trajectory("no idea", {"answer": "Pell", "level": 2}, ["Pell"]),
    column_trajectory("<answer>x</answer>", {"answer": None}, []),
]
