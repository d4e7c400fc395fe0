"""An OpenEnv environment, written as OpenEnv's template writes one, trained unchanged.

A walk on a number line: the policy starts at 0 and must reach the record's target with
the ``move`` tool (the action ``MoveAction(steps=...)``); each step's reward is -0.1, and
1.0 on reaching the target, which ends the episode. agentrl reads each step's reward as
its turn's reward (per-turn credit, docs/turn-credit.md).

    pip install 'agentrl[openenv]'
    python examples/openenv_walk.py runs/walk.jsonl          # write 200 prompts
    # in this process, one environment object per episode:
    agentrl train --data runs/walk.jsonl --environment openenv:examples.openenv_walk:WalkEnvironment
    # or served (by uvicorn, as `openenv` serves it) and reached on loopback:
    uvicorn examples.openenv_walk:app --port 8000 &
    agentrl train --data runs/walk.jsonl --environment openenv:http://127.0.0.1:8000

Each record carries ``seed`` (handed to ``reset``) and a ``reset`` object whose keys are
``reset``'s keyword arguments (here ``target``).
"""

from __future__ import annotations

import json
import random
import sys
from uuid import uuid4

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class MoveAction(Action):
    """Move along the number line."""

    steps: int = Field(..., description="how far to move: positive is right, negative left")


class WalkObservation(Observation):
    position: int = Field(default=0, description="where you are now")
    message: str = Field(default="", description="what happened")


class WalkEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self.position = 0
        self.target = 0

    def reset(self, seed=None, episode_id=None, target: int = 5, **kwargs) -> WalkObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self.position, self.target = 0, int(target)
        message = f"You are at 0. Reach {self.target} with the move tool."
        return WalkObservation(position=0, message=message, done=False, reward=0.0)

    def step(self, action: MoveAction) -> WalkObservation:
        self._state.step_count += 1
        self.position += action.steps
        if self.position == self.target:
            return WalkObservation(position=self.position, message="arrived", done=True, reward=1.0)
        side = "left" if self.position > self.target else "right"
        message = f"the target is to your {side}"
        return WalkObservation(position=self.position, message=message, done=False, reward=-0.1)

    @property
    def state(self) -> State:
        return self._state


app = create_app(WalkEnvironment, MoveAction, WalkObservation, max_concurrent_envs=64)


def write_data(path: str, n: int = 200, seed: int = 0) -> None:
    """``n`` prompts, each with a target from -9 to 9 and a seed."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            target = rng.choice([t for t in range(-9, 10) if t])
            record = {
                "prompt": "Walk to the target on the number line.",
                "seed": i,
                "reset": {"target": target},
            }
            handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "walk.jsonl")
