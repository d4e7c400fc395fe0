"""Where training batches come from: rollout in the loop, or in background threads.

Both sources hand the trainer ``batch_size`` groups per step, load new weights into the
rollout engine when asked (bumping the policy version), and report queue statistics.

- :class:`InlineSource` (``async_workers = 0``) plays the episodes of step ``k`` when the
  trainer asks for them. Which prompts and which random numbers step ``k`` uses depend
  only on the run's random seed and ``k``, so a run resumed from a checkpoint at step ``k``
  produces exactly the batches the uninterrupted run would have.
- :class:`BackgroundSource` (``async_workers >= 1``) wraps
  :class:`agentrl.rollout.AsyncRollout`: workers generate while the trainer trains, with
  bounded staleness (``max_version_gap``). Faster on a GPU; not bit-reproducible across
  resumes, because thread timing decides which weights produced which group.

:func:`local_source` picks one of the two from the config. (Rank 0 of the trainer/rollout
split gathers its groups from other processes instead: `agentrl.placement`.)
"""

from __future__ import annotations

import functools
import random
import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from agentrl.rollout import AsyncRollout, EpisodeConfig, PolicyVersion, RolloutGroup, run_episodes
from agentrl.rollout.engine import TorchEngine
from agentrl.tools import ToolRegistry

Weights = torch.nn.Module | Mapping[str, torch.Tensor]


class GroupSource(Protocol):
    engine: TorchEngine
    version: PolicyVersion

    def start(self, prefill_groups: int, timeout_s: float) -> bool: ...

    def next_batch(self, step: int, attempt: int = 0) -> list[RolloutGroup]: ...

    def sync(self, model: Weights) -> int: ...

    def stats(self) -> dict[str, float]: ...

    def stop(self) -> None: ...


@functools.lru_cache(maxsize=4)
def epoch_order(n: int, seed: int, epoch: int, stream: int = 0) -> Sequence[int]:
    """The prompt order of one pass over ``n`` prompts (a seeded shuffle per epoch), read-only.

    Stream 0 feeds the steps; dynamic sampling's extra round ``k`` reads stream ``k``. The
    last few orders are kept: a step reads one slot per prompt of its batch, and shuffling
    a million prompts costs most of a second. Shuffled as 8-byte integers (the same
    ``Random.shuffle``, so the same order as a list), not Python ints: 80 MB at 10,000,000
    prompts instead of about 360 MB.
    """
    order = array("q", range(n))
    key = (
        f"agentrl-epoch:{seed}:{epoch}" if stream == 0 else f"agentrl-epoch:{seed}:{stream}:{epoch}"
    )
    random.Random(key).shuffle(order)
    return memoryview(order).toreadonly()


def step_prompt_indices(
    n: int, batch_size: int, step: int, seed: int, stream: int = 0
) -> list[int]:
    """The prompts of training step ``step`` (1-based): consecutive slots of the epoch orders."""
    out = []
    for slot in range((step - 1) * batch_size, step * batch_size):
        epoch, position = divmod(slot, n)
        out.append(epoch_order(n, seed, epoch, stream)[position])
    return out


def load_weights(engine: TorchEngine, version: PolicyVersion, model: Weights) -> int:
    with engine.lock:
        new = version.get() + 1
        if engine.update_weights(model, version=new):
            version.set(new)
        return version.get()


class StepSource:
    """What every source that plays step ``k``'s prompts when the trainer asks shares: the
    prompts and random numbers of a step depend only on (seed, step, attempt), weights are
    loaded between steps, and there is no queue."""

    def __init__(
        self,
        engine: Any,
        prompts: Sequence[Any],
        *,
        num_generations: int,
        batch_size: int,
        seed: int,
        version: PolicyVersion,
    ) -> None:
        if len(prompts) == 0:
            raise ValueError("no training prompts")
        self.engine, self.prompts = engine, prompts
        self.num_generations, self.batch_size, self.seed = num_generations, batch_size, seed
        self.version = version
        self.engine.version = version.get()
        self._last: dict[str, float] = {}

    def indices(self, step: int, stream: int = 0) -> list[int]:
        """The prompts of ``step`` in prompt stream ``stream``."""
        return step_prompt_indices(len(self.prompts), self.batch_size, step, self.seed, stream)

    def reseed(self, step: int, attempt: int) -> None:
        """The engine's sampling seed for ``step``'s attempt ``attempt`` (hold its lock)."""
        self.engine.reseed(self.seed * 1_000_003 + step + attempt * 7_919_000_003)

    def timed(self, began: float) -> None:
        self._last = {"last_rollout_time": time.perf_counter() - began, "last_train_wait": 0.0}

    def start(self, prefill_groups: int, timeout_s: float) -> bool:
        return True

    def sync(self, model: Weights) -> int:
        return load_weights(self.engine, self.version, model)

    def stats(self) -> dict[str, float]:
        return {"queued": 0.0, "queue_capacity": 0.0, "stale_drop": 0.0, **self._last}

    def stop(self) -> None:
        return None


class InlineSource(StepSource):
    """Rollout of each step's groups on demand, reproducible from (seed, step)."""

    def __init__(
        self,
        engine: TorchEngine,
        prompts: Sequence[Any],
        tools: ToolRegistry,
        episode: EpisodeConfig,
        **step: Any,
    ) -> None:
        """``step``: :class:`StepSource`'s keywords (num_generations, batch_size, seed,
        version)."""
        super().__init__(engine, prompts, **step)
        self.tools, self.episode = tools, episode

    def next_batch(self, step: int, attempt: int = 0) -> list[RolloutGroup]:
        """Step ``step``'s groups; ``attempt`` > 0 draws dynamic sampling's extra prompts."""
        indices = self.indices(step, stream=attempt)
        tag = f"{self.seed}:{step}" + (f":{attempt}" if attempt else "")
        began = time.perf_counter()
        with self.engine.lock:
            self.reseed(step, attempt)
            groups = run_episodes(
                self.engine,
                [self.prompts[i] for i in indices],
                self.tools,
                num_generations=self.num_generations,
                config=self.episode,
                data_indices=indices,
                rng=random.Random(f"agentrl-rollout:{tag}"),
            )
        self.timed(began)
        return groups


class BackgroundSource:
    """:class:`AsyncRollout` behind the :class:`GroupSource` interface."""

    def __init__(self, rollout: AsyncRollout, fetch_timeout_s: float) -> None:
        self.rollout = rollout
        self.engine = rollout.engine  # type: ignore[assignment]
        self.version = rollout.version
        self.fetch_timeout_s = fetch_timeout_s

    def start(self, prefill_groups: int, timeout_s: float) -> bool:
        self.rollout.start()
        return self.rollout.wait_until_ready(prefill_groups, timeout_s)

    def next_batch(self, step: int, attempt: int = 0) -> list[RolloutGroup]:
        return self.rollout.get_batch(timeout=self.fetch_timeout_s or None)

    def sync(self, model: Weights) -> int:
        return self.rollout.sync_weights(model)

    def stats(self) -> dict[str, float]:
        return self.rollout.snapshot_stats()

    def stop(self) -> None:
        self.rollout.stop()


__all__ = [
    "BackgroundSource",
    "GroupSource",
    "InlineSource",
    "StepSource",
    "Weights",
    "epoch_order",
    "load_weights",
    "step_prompt_indices",
]
