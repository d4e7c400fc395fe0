"""How rank 0 and the rollout ranks of the trainer/rollout split talk (see
`agentrl.placement.split` for the placement itself).

Rank 0 drives everything with commands it broadcasts; the rollout ranks loop on them
(:class:`RolloutWorker`), so every collective is announced before it happens and ranks
cannot fall out of step:

``("sync", version, manifest)``
    New policy weights follow (packed broadcasts, see `DistContext.broadcast_tensors`);
    each rollout rank loads them into its engine under the engine lock and takes the
    version rank 0 chose: the version is agreed by broadcast. The first sync (at start or
    after a resume) starts the rollout ranks' producers.
``("fetch", per_rank, wait_s)``
    Each rollout rank hands over up to ``per_rank`` groups from its queue, waiting at
    most ``wait_s`` for them; rank 0 gathers them (:class:`GatheredSource`).
``("stop",)``
    The rollout ranks stop their producers and return.

Rank 0 keeps gathered groups in a pending pool and builds each batch from the freshest,
dropping groups more than ``max_version_gap`` versions behind (the single-process rule).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from agentrl.errors import Interrupted
from agentrl.placement.runtime import DistContext, DistributedError
from agentrl.rollout.async_rollout import is_stale
from agentrl.rollout.remote.weights import has_nonfinite, policy_state_dict
from agentrl.trajectory import PolicyVersion, RolloutGroup

# Longest single wait of one fetch round: rank 0 gets control back at least this often.
FETCH_ROUND_S = 10.0
# Rollout-rank statistics forwarded to rank 0 with every fetch.
FORWARDED_STATS = (
    "queued",
    "queue_capacity",
    "produced",
    "stale_drop",
    "errors",
    "last_rollout_time",
    "avg_tokens_per_traj",
    "workers_alive",
)

Log = Callable[[str], None]


# ---------------------------------------------------------------- weights on the wire


@dataclass(frozen=True)
class WeightSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    alias_of: str | None  # same storage as an earlier entry (tied weights): sent once


def weight_manifest(state: Mapping[str, torch.Tensor]) -> list[WeightSpec]:
    """Names, shapes and dtypes of a state dict, tied tensors marked as aliases."""
    seen: dict[tuple[int, tuple[int, ...]], str] = {}
    out = []
    for name, t in state.items():
        key = (t.data_ptr(), tuple(t.shape))
        alias = seen.get(key) if t.numel() > 0 else None
        if alias is None:
            seen[key] = name
        out.append(WeightSpec(name, tuple(t.shape), str(t.dtype).removeprefix("torch."), alias))
    return out


def send_weights(
    ctx: DistContext, state: Mapping[str, torch.Tensor], manifest: list[WeightSpec]
) -> None:
    tensors = [state[s.name].detach() for s in manifest if s.alias_of is None]
    ctx.broadcast_tensors([t.contiguous() for t in tensors], src=0, what="send policy weights")


def receive_weights(
    ctx: DistContext, manifest: list[WeightSpec], cache: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Receive a broadcast state dict into (reused) buffers on this rank's device."""
    for s in manifest:
        buf = cache.get(s.name)
        dtype = getattr(torch, s.dtype)
        if s.alias_of is None and (
            buf is None or tuple(buf.shape) != s.shape or buf.dtype != dtype
        ):
            cache[s.name] = torch.empty(s.shape, dtype=dtype, device=ctx.comm_device)
    ctx.broadcast_tensors(
        [cache[s.name] for s in manifest if s.alias_of is None],
        src=0,
        what="receive policy weights",
    )
    return {s.name: cache[s.alias_of or s.name] for s in manifest}


# ---------------------------------------------------------------- rank 0


class GatheredSource:
    """Rank 0's `GroupSource`: batches gathered from the rollout ranks (see module doc).

    ``engine`` is rank 0's own engine, used for evaluation only; it is kept at the
    rollout ranks' weights and version.
    """

    def __init__(
        self,
        ctx: DistContext,
        engine: Any,
        *,
        batch_size: int,
        max_version_gap: int,
        fetch_timeout_s: float,
        version: PolicyVersion | None = None,
        log: Log = print,
    ) -> None:
        if ctx.world_size < 2:
            raise ValueError("trainer_rollout needs at least 2 ranks (1 trainer + rollout)")
        self.ctx = ctx
        self.engine = engine
        self.batch_size = int(batch_size)
        self.max_version_gap = max(0, int(max_version_gap))
        self.fetch_timeout_s = float(fetch_timeout_s)
        self.version = version or PolicyVersion(getattr(engine, "version", 0))
        self.log = log
        self.producers = ctx.world_size - 1
        self.pending: deque[RolloutGroup] = deque()
        self.counters = {
            "stale_drop": 0.0,
            "fetch_rounds": 0.0,
            "gathered": 0.0,
            "last_train_wait": 0.0,
            "syncs": 0.0,
            "lagging_rounds": 0.0,
        }
        self.remote: list[dict[str, float]] = []
        self.stopped = False

    # ---- weights ----

    def _push(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        manifest = weight_manifest(state)
        self.ctx.broadcast_object(("sync", int(version), manifest), what="announce a weight sync")
        send_weights(self.ctx, state, manifest)
        self.counters["syncs"] += 1

    def sync(self, model: torch.nn.Module | Mapping[str, torch.Tensor]) -> int:
        """Broadcast ``model``'s weights as the next version; the version (unchanged when
        the weights are not finite)."""
        state = policy_state_dict(model)
        if has_nonfinite(state):
            return self.version.get()
        new = self.version.get() + 1
        self._push(state, new)
        with self.engine.lock:
            self.engine.update_weights(state, version=new)
            self.version.set(new)
        return new

    # ---- groups ----

    def _fetch_round(self, need: int, wait_s: float) -> int:
        per_rank = max(1, math.ceil(need / self.producers))
        self.ctx.broadcast_object(("fetch", per_rank, float(wait_s)), what="announce a fetch")
        gathered = self.ctx.gather_objects(None, dst=0, what="gather rollout groups") or []
        got = 0
        self.remote = []
        for item in gathered[1:]:
            groups, stats = item if item is not None else ([], {})
            self.pending.extend(groups)
            got += len(groups)
            self.remote.append(stats)
        self.counters["fetch_rounds"] += 1
        self.counters["gathered"] += got
        return got

    def _drop_stale(self) -> None:
        current = self.version.get()
        kept = [g for g in self.pending if not is_stale(g, current, self.max_version_gap)]
        self.counters["stale_drop"] += len(self.pending) - len(kept)
        self.pending = deque(kept)

    def _fill(self, target: int, timeout_s: float, *, training: bool = False) -> bool:
        """Gather until ``target`` fresh groups are pending or ``timeout_s`` (0: no limit).
        ``training``: the trainer waits on it; a round that still leaves it short is counted
        (``lagging_rounds``) and said at the first and every tenth such round."""
        deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        rounds = 0
        while True:
            self._drop_stale()
            if len(self.pending) >= target:
                return True
            if training and rounds > 0:
                self._lagging(target)
            rounds += 1
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait = FETCH_ROUND_S if left is None else min(FETCH_ROUND_S, max(left, 0.05))
            self._fetch_round(target - len(self.pending), wait)
            if self.remote and all(s.get("workers_alive", 1.0) <= 0 for s in self.remote):
                self.log("every rollout rank has lost its rollout workers; see their errors")
                return False

    def _lagging(self, target: int) -> None:
        self.counters["lagging_rounds"] += 1
        lagging = int(self.counters["lagging_rounds"])
        if lagging == 1 or lagging % 10 == 0:
            self.log(
                f"warning: rollout queue lagging behind the trainer ({len(self.pending)} of "
                f"{target} fresh groups; {lagging} rounds so far); waiting"
            )

    def start(self, prefill_groups: int, timeout_s: float) -> bool:
        """Send the starting weights and version (the rollout ranks start producing), then
        wait for ``prefill_groups`` groups."""
        with self.engine.lock:
            state = policy_state_dict(self.engine.model)
        self._push(state, self.version.get())
        return self._fill(max(int(prefill_groups), 0), float(timeout_s))

    def next_batch(self, step: int, attempt: int = 0) -> list[RolloutGroup]:
        """``batch_size`` fresh groups, newest first; fewer only when the fetch timed out."""
        began = time.monotonic()
        self._fill(self.batch_size, self.fetch_timeout_s, training=True)
        batch = [self.pending.pop() for _ in range(min(self.batch_size, len(self.pending)))]
        self.counters["last_train_wait"] = time.monotonic() - began
        return batch

    def stats(self) -> dict[str, float]:
        out = dict(self.counters)
        out["pending"] = float(len(self.pending))
        out["rollout_ranks"] = float(self.producers)
        for key in FORWARDED_STATS:
            values = [float(s[key]) for s in self.remote if key in s]
            if values:
                total = key in ("queued", "queue_capacity", "produced", "stale_drop", "errors")
                out[f"rollout_{key}" if key == "stale_drop" else key] = (
                    sum(values) if total else sum(values) / len(values)
                )
        if "queue_capacity" in out:  # groups on hand anywhere, as a share of the room
            available = out.get("queued", 0.0) + out["pending"]
            out["global_queue_utilization"] = available / max(out["queue_capacity"], 1.0)
        return out

    def stop(self) -> None:
        """Tell the rollout ranks to stop (quietly when they are already gone)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.ctx.broadcast_object(("stop",), what="stop the rollout ranks")
        except DistributedError as exc:
            self.log(f"could not tell the rollout ranks to stop: {exc}")


# ---------------------------------------------------------------- ranks 1..N-1


class RolloutWorker:
    """A rollout rank: produce groups with an `AsyncRollout`, serve rank 0's commands.

    ``rollout`` must not be started yet: the first weight sync starts it, so no group is
    produced before this rank holds the trainer's weights and version.
    """

    def __init__(self, ctx: DistContext, rollout: Any, log: Log = print) -> None:
        self.ctx = ctx
        self.rollout = rollout
        self.engine = rollout.engine
        self.log = log
        self.buffers: dict[str, torch.Tensor] = {}
        self.started = False
        self.commands = 0
        self.syncs = 0
        self.groups_sent = 0
        self._signals = 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            raise Interrupted
        name = signal.Signals(signum).name
        self.log(f"rank {self.ctx.rank}: {name} received; rolling out until rank 0 stops the run")

    def _install_signals(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _apply(self, version: int, state: dict[str, torch.Tensor]) -> None:
        lock = getattr(self.engine, "lock", None)
        with lock if lock is not None else threading.Lock():
            if not self.engine.update_weights(state, version=version):
                raise DistributedError(
                    f"rank {self.ctx.rank}: the broadcast weights of version {version} are "
                    "not finite"
                )
            self.rollout.version.set(version)
        self.syncs += 1

    def _serve(self, command: tuple[Any, ...]) -> bool:
        kind = command[0]
        if kind == "sync":
            _, version, manifest = command
            state = receive_weights(self.ctx, manifest, self.buffers)
            self._apply(int(version), state)
            if not self.started:
                self.rollout.start()
                self.started = True
            return True
        if kind == "fetch":
            _, per_rank, wait_s = command
            groups = (
                self.rollout.get_batch(int(per_rank), timeout=float(wait_s))
                if (self.started)
                else []
            )
            stats = self.rollout.snapshot_stats()
            payload = (groups, {k: float(stats[k]) for k in FORWARDED_STATS if k in stats})
            self.ctx.gather_objects(payload, dst=0, what="send rollout groups")
            self.groups_sent += len(groups)
            return True
        if kind == "stop":
            return False
        raise DistributedError(f"rank {self.ctx.rank}: unknown command {kind!r} from rank 0")

    def run(self) -> dict[str, float]:
        """Serve until rank 0 says stop; a summary of what this rank did."""
        previous = self._install_signals()
        try:
            while True:
                command = self.ctx.broadcast_object(
                    None, src=0, what="wait for rank 0's next command"
                )
                self.commands += 1
                if not self._serve(command):
                    break
        finally:
            self.rollout.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        summary = {
            "commands": float(self.commands),
            "syncs": float(self.syncs),
            "groups_sent": float(self.groups_sent),
            "policy_version": float(self.rollout.version.get()),
        }
        self.log(f"rollout rank done: {summary}")
        return summary


__all__ = [
    "GatheredSource",
    "RolloutWorker",
    "WeightSpec",
    "receive_weights",
    "send_weights",
    "weight_manifest",
]
