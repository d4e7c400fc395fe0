"""What a placement answers, and the one-process answers.

A placement says where the parts of one run live: how many processes share it, which of
them trains, which rolls out, which writes. The one `agentrl.trainer.Trainer` asks its
placement at a few named points and is otherwise the same everywhere:

- **build models**: :meth:`Placement.preparing` (one process writes the files the others
  read: a warm start, generated prompts), :meth:`Placement.load_prompts` (this process's
  share of them), :meth:`Placement.share_weights` (every process starts from the same
  weights);
- **sync weights**: :meth:`Placement.rollout_source`, the engine that samples and the way
  trained weights reach it (in this process, a server, or other processes);
- **reduce gradients**: :meth:`Placement.optimization` and :meth:`Placement.beta_controller`;
- **agree**: :meth:`Placement.gather` (the batch size, the resume step),
  :meth:`Placement.ranks_able_to_train`, :meth:`Placement.agree_on_stop`;
- **gather metrics**: :meth:`Placement.gather_metrics`, :meth:`Placement.batch_reward_baseline`;
- **save**: only where :attr:`Placement.is_main` holds does the trainer evaluate, write the
  run's files, checkpoints and exports.

A process that only rolls out (:attr:`Placement.is_rollout_rank`) runs
:meth:`Placement.rollout_worker` instead of a trainer.

:class:`SingleProcess` is the one-process answer to each question;
`agentrl.placement.ddp` (data parallel) and `agentrl.placement.split` (trainer/rollout
split) hold the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from agentrl.assembly.engines import rollout_engine
from agentrl.assembly.prompts import load_prompts
from agentrl.assembly.sources import local_source
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.rollout import EpisodeConfig
from agentrl.tools import ToolRegistry
from agentrl.training.models import Models
from agentrl.training.signals import StopRequest
from agentrl.training.sources import GroupSource
from agentrl.training.step import StepOutcome

Log = Callable[[str], None]


@dataclass(frozen=True)
class RolloutSetup:
    """What a placement builds the run's rollout source from."""

    config: TrainConfig
    models: Models
    prompts: PromptPool
    tools: ToolRegistry
    episode: EpisodeConfig
    log: Log
    agent: Any = None  # the user's agent (`agentrl.agents`): it plays the episodes

    def local_source(self, *, seed: int) -> GroupSource:
        """Groups sampled in this process by the engine ``config.rollout_engine`` names."""
        engine = rollout_engine(self.config, self.models, seed=seed)
        if self.agent is not None:
            from agentrl.assembly.sources import agent_source

            cfg = self.config
            return agent_source(
                self.agent, engine, self.prompts, self.episode, cfg, seed=seed, log=self.log
            )
        return local_source(engine, self.prompts, self.tools, self.episode, self.config, seed=seed)


class Placement(Protocol):
    """The questions the trainer asks about where the run's parts live (see module doc)."""

    name: str
    collective_io: bool  # every process takes part in writing checkpoints and exports

    @property
    def is_main(self) -> bool:
        """This process logs, evaluates and writes the run's files."""
        ...

    @property
    def is_rollout_rank(self) -> bool:
        """This process only rolls out: it runs :meth:`rollout_worker`, not a trainer."""
        ...

    @property
    def data_shards(self) -> int:
        """How many processes train, each on its own share of the prompts."""
        ...

    def check(self, config: TrainConfig) -> None:
        """Raise ValueError when ``config`` asks for something this placement cannot do."""
        ...

    def preparing(self) -> contextlib.AbstractContextManager[None]:
        """The block in which the run's shared files are made (one process first)."""
        ...

    def load_prompts(
        self, config: TrainConfig, tools: ToolRegistry, log: Log
    ) -> tuple[PromptPool, PromptPool]:
        """(this process's training prompts, held-out prompts)."""
        ...

    def share_weights(self, models: Models) -> None:
        """Make every process's models start from the same weights."""
        ...

    def rollout_source(self, setup: RolloutSetup) -> GroupSource:
        """Where the training groups come from and where synced weights go."""
        ...

    def optimization(
        self, policy: torch.nn.Module, config: OptimConfig, total_steps: int
    ) -> Optimization:
        """The optimizer steps, with gradients reduced over the training processes."""
        ...

    def beta_controller(self, config: BetaConfig) -> BetaController:
        """The KL coefficient's controller, fed the same values in every process."""
        ...

    def gather(self, value: Any, what: str) -> list[Any]:
        """``value`` from every training process, in rank order."""
        ...

    def ranks_able_to_train(self, can_train: Callable[[], bool]) -> list[bool]:
        """Whether each training process has a batch it can train on."""
        ...

    def batch_reward_baseline(self, outcome: StepOutcome, before: float, decay: float) -> None:
        """Make ``outcome``'s reward baseline follow the whole batch of every process."""
        ...

    def gather_metrics(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The step's metrics as the run logs them (averaged over training processes)."""
        ...

    def agree_on_stop(self, stop: StopRequest) -> bool:
        """Whether the run stops now; every training process gets the same answer."""
        ...

    def final_policy(self, models: Models) -> torch.nn.Module | None:
        """The whole trained policy to export (None where this process exports nothing)."""
        ...

    def rollout_worker(self, config: TrainConfig) -> Any:
        """The rollout loop of a process where :attr:`is_rollout_rank` holds."""
        ...


class SingleProcess:
    """The whole run in this process: nothing to share, agree on or reduce."""

    name = "single"
    collective_io = False

    @property
    def is_main(self) -> bool:
        return True

    @property
    def is_rollout_rank(self) -> bool:
        return False

    @property
    def data_shards(self) -> int:
        return 1

    def check(self, config: TrainConfig) -> None:
        if config.fsdp:
            raise ValueError(
                "fsdp=1 shards over the ranks of a torchrun launch "
                "(torchrun --nproc_per_node=N ..., N >= 1)"
            )

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        yield

    def load_prompts(
        self, config: TrainConfig, tools: ToolRegistry, log: Log
    ) -> tuple[PromptPool, PromptPool]:
        return load_prompts(config, tools, log)

    def share_weights(self, models: Models) -> None:
        return None

    def rollout_source(self, setup: RolloutSetup) -> GroupSource:
        return setup.local_source(seed=setup.config.seed)

    def optimization(
        self, policy: torch.nn.Module, config: OptimConfig, total_steps: int
    ) -> Optimization:
        return Optimization(policy, config, total_steps)

    def beta_controller(self, config: BetaConfig) -> BetaController:
        return BetaController(config)

    def gather(self, value: Any, what: str) -> list[Any]:
        return [value]

    def ranks_able_to_train(self, can_train: Callable[[], bool]) -> list[bool]:
        """Always [True]: one process needs no agreement, and the training step itself
        skips a batch it cannot pack (so the check is not run twice)."""
        return [True]

    def batch_reward_baseline(self, outcome: StepOutcome, before: float, decay: float) -> None:
        return None  # the step's own baseline already covers the whole batch

    def gather_metrics(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        return dict(metrics)

    def agree_on_stop(self, stop: StopRequest) -> bool:
        return stop.requested

    def final_policy(self, models: Models) -> torch.nn.Module | None:
        return models.policy

    def rollout_worker(self, config: TrainConfig) -> Any:
        raise RuntimeError("a single process trains; it has no rollout worker to run")


__all__ = ["Log", "Placement", "RolloutSetup", "SingleProcess"]
