"""Rollout in the background with bounded staleness (`AsyncRollout`).

Worker threads play batches of episodes (`run_episodes`) while the trainer trains, and put
the resulting groups, each tagged with the policy version that produced it, on a bounded
queue. A group more than ``max_version_gap`` versions behind the current policy is
dropped (when it is produced and again when it is taken) and counted: off-policy data
beyond that gap would need importance corrections the loss does not make. A full queue
pauses the workers instead of letting them produce data that would only go stale.

A worker error is logged, counted and kept (``errors``); the worker goes on with the
next batch, so one bad prompt, tool or server hiccup does not end a long run. A
`RecurringError` (a setting that cannot work here, such as a decoder that does not compile)
would fail the same way on every batch: it stops the workers, and the trainer's next wait
for groups raises it.
``stop()`` joins the threads. ``sync_weights`` loads new weights into the engine and bumps
the version in one step under the engine lock, so no token is tagged with a version it was
not sampled by.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import random
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from agentrl.errors import RecurringError
from agentrl.rollout.episodes import CallParser, EpisodeConfig, RolloutEngine, run_episodes
from agentrl.tools import ToolRegistry
from agentrl.trajectory import PolicyVersion, RolloutGroup

logger = logging.getLogger(__name__)

# How many recent values the latency/queue histograms keep, and error messages kept.
HISTORY = 512
ERRORS_KEPT = 32
# Polling interval of waits that must notice stop() (seconds).
POLL_S = 0.05


def percentile(values: Iterable[float], q: float, default: float = 0.0) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of the finite values; ``default`` if none."""
    finite = sorted(float(v) for v in values if math.isfinite(float(v)))
    if not finite:
        return default
    pos = min(max(float(q), 0.0), 1.0) * (len(finite) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return finite[lo]
    frac = pos - lo
    return finite[lo] * (1.0 - frac) + finite[hi] * frac


def is_stale(group: RolloutGroup, current_version: int, max_version_gap: int) -> bool:
    return int(current_version) - int(group.policy_version) > max(0, int(max_version_gap))


def split_fresh_groups(
    fetched: Sequence[RolloutGroup | None],
    pending: deque[RolloutGroup],
    batch_size: int,
    current_version: int,
    max_version_gap: int,
) -> tuple[list[RolloutGroup] | None, int]:
    """A training batch from freshly fetched groups, topped up from ``pending``.

    Stale groups are dropped and counted; fetched groups beyond ``batch_size`` go back to
    ``pending`` (to be used first next time, oldest first). Returns (batch or None when
    fewer than ``batch_size`` fresh groups exist, number of stale drops).
    """
    if not fetched:
        return None, 0
    drops = 0
    batch: list[RolloutGroup] = []
    extra: list[RolloutGroup] = []

    def fresh(group: RolloutGroup | None) -> bool:
        nonlocal drops
        if group is None:
            return False
        if is_stale(group, current_version, max_version_gap):
            drops += 1
            return False
        return True

    for group in fetched:
        if fresh(group):
            (batch if len(batch) < batch_size else extra).append(group)  # type: ignore[arg-type]
    while len(batch) < batch_size and pending:
        group = pending.pop()
        if fresh(group):
            batch.append(group)
    pending.extend(reversed(extra))
    return (batch if len(batch) >= batch_size else None), drops


class AsyncRollout:
    """Background producer of `RolloutGroup`s for the trainer (see module doc).

    Each worker call plays ``groups_per_rollout`` prompts x ``num_generations`` episodes
    in one batched `run_episodes`. Each prompt is, with even odds, the next one in order
    or a random one. ``max_queue_groups`` 0 means
    ``(max_version_gap + 1) * batch_size``. With ``hold_engine_lock`` a whole batch of
    episodes runs under the engine lock (one weight version per batch).
    """

    def __init__(
        self,
        engine: RolloutEngine,
        dataset: Sequence[Any],
        tools: ToolRegistry,
        *,
        version: PolicyVersion | None = None,
        config: EpisodeConfig | None = None,
        num_generations: int = 4,
        batch_size: int = 2,
        groups_per_rollout: int = 0,
        max_version_gap: int = 0,
        max_queue_groups: int = 0,
        num_workers: int = 1,
        seed: int = 0,
        hold_engine_lock: bool = True,
        call_parser: CallParser | None = None,
    ) -> None:
        if len(dataset) == 0:
            raise ValueError("the prompt dataset is empty")
        self.engine = engine
        self.dataset = dataset
        self.tools = tools
        self.version = version or PolicyVersion(getattr(engine, "version", 0))
        if hasattr(engine, "version"):
            engine.version = self.version.get()
        self.config = config or EpisodeConfig()
        self.num_generations = max(1, int(num_generations))
        self.batch_size = max(1, int(batch_size))
        self.groups_per_rollout = int(groups_per_rollout) or self.batch_size
        self.max_version_gap = max(0, int(max_version_gap))
        self.capacity = int(max_queue_groups) or (self.max_version_gap + 1) * self.batch_size
        self.num_workers = max(0, int(num_workers))
        self.seed = int(seed)
        self.hold_engine_lock = bool(hold_engine_lock)
        self.call_parser = call_parser
        self.buffer: queue.Queue[RolloutGroup] = queue.Queue(maxsize=self.capacity)
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: deque[str] = deque(maxlen=ERRORS_KEPT)
        # The first RecurringError of a worker: raised to whoever waits for groups.
        self.fatal: RecurringError | None = None
        self._index_lock = threading.Lock()
        self._next_index = 0
        self._stats_lock = threading.Lock()
        self._rollout_hist: deque[float] = deque(maxlen=HISTORY)
        self._wait_hist: deque[float] = deque(maxlen=HISTORY)
        self._lock_hist: deque[float] = deque(maxlen=HISTORY)
        self._queue_hist: deque[float] = deque(maxlen=HISTORY)
        self.stats: dict[str, float] = dict.fromkeys(
            (
                "produced",
                "accepted",
                "generated",
                "stale_drop",
                "errors",
                "queue_full",
                "rollout_calls",
                "rollout_time_sum",
                "rollout_lock_wait_sum",
                "train_wait_sum",
                "train_batches",
                "rollout_turns",
                "rollout_tool_calls",
                "rollout_tokens",
                "unfinished",
                "last_train_wait",
                "last_rollout_time",
                "last_rollout_lock_wait",
            ),
            0.0,
        )

    # ---- lifecycle ----

    def start(self) -> AsyncRollout:
        if self.threads:
            raise RuntimeError("AsyncRollout already started")
        self.stop_event.clear()
        for worker_id in range(self.num_workers):
            thread = threading.Thread(
                target=self._worker, args=(worker_id,), name=f"agentrl-rollout-{worker_id}"
            )
            thread.start()
            self.threads.append(thread)
        return self

    def stop(self, timeout: float = 30.0) -> bool:
        """Ask workers to stop and join them; True when every thread has ended."""
        self.stop_event.set()
        deadline = time.monotonic() + max(float(timeout), 0.0)
        for thread in self.threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            logger.warning("%d rollout worker(s) still running after stop()", len(alive))
        self.threads = alive
        return not alive

    def __enter__(self) -> AsyncRollout:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def workers_alive(self) -> int:
        return sum(1 for t in self.threads if t.is_alive())

    # ---- weights ----

    def sync_weights(self, source: Any) -> int:
        """Load ``source`` into the engine and bump the version atomically; the version.

        When the engine refuses the weights (non-finite values) the version stays.
        """
        with self._engine_lock():
            new = self.version.get() + 1
            ok = bool(self.engine.update_weights(source, version=new))  # type: ignore[attr-defined]
            if ok:
                self.version.set(new)
            return self.version.get()

    def _engine_lock(self) -> contextlib.AbstractContextManager[Any]:
        lock = getattr(self.engine, "lock", None)
        return lock if lock is not None else contextlib.nullcontext()

    # ---- producing ----

    def _inc(self, key: str, value: float = 1.0) -> None:
        with self._stats_lock:
            self.stats[key] = self.stats.get(key, 0.0) + float(value)

    def _next_sample(self, rng: random.Random) -> int:
        with self._index_lock:
            if rng.random() < 0.5:
                index = self._next_index % len(self.dataset)
                self._next_index += 1
                return index
        return rng.randrange(len(self.dataset))

    def _worker(self, worker_id: int) -> None:
        rng = random.Random(self.seed + 1009 * (worker_id + 1))
        while not self.stop_event.is_set():
            if self.buffer.qsize() >= self.capacity:
                self._inc("queue_full")
                self.stop_event.wait(POLL_S)
                continue
            try:
                self._produce(rng)
            except RecurringError as exc:
                self._inc("errors")
                self.errors.append(f"worker {worker_id}: {exc!r}\n{traceback.format_exc(limit=8)}")
                # Raised again from other threads: without its traceback, which holds the
                # failed batch's tensors and would grow at each raise.
                self.fatal = self.fatal or exc.with_traceback(None)
                self.stop_event.set()
                return
            except Exception as exc:
                self._inc("errors")
                message = f"worker {worker_id}: {exc!r}"
                self.errors.append(message + "\n" + traceback.format_exc(limit=8))
                logger.warning("rollout %s", message)
                self.stop_event.wait(0.2)

    def _produce(self, rng: random.Random) -> None:
        indices = [self._next_sample(rng) for _ in range(self.groups_per_rollout)]
        samples = [self.dataset[i] for i in indices]
        t_wait = time.perf_counter()
        lock = self._engine_lock() if self.hold_engine_lock else contextlib.nullcontext()
        with lock:
            lock_wait = time.perf_counter() - t_wait
            t0 = time.perf_counter()
            groups = run_episodes(
                self.engine,
                samples,
                self.tools,
                num_generations=self.num_generations,
                config=self.config,
                data_indices=indices,
                rng=rng,
                call_parser=self.call_parser,
            )
            rollout_s = time.perf_counter() - t0
        trajs = [t for g in groups for t in g.trajectories]
        with self._stats_lock:
            s = self.stats
            s["rollout_calls"] += 1
            s["produced"] += len(groups)
            s["generated"] += len(trajs)
            s["rollout_time_sum"] += rollout_s
            s["rollout_lock_wait_sum"] += lock_wait
            s["rollout_turns"] += sum(len(t.turn_outputs) for t in trajs)
            s["rollout_tool_calls"] += sum(len(t.tool_events) for t in trajs)
            s["rollout_tokens"] += sum(sum(t.response_mask) for t in trajs)
            s["unfinished"] += sum(1 for t in trajs if t.unfinished)
            s["last_rollout_time"] = rollout_s
            s["last_rollout_lock_wait"] = lock_wait
            self._rollout_hist.extend([rollout_s] * len(groups))
            self._lock_hist.append(lock_wait)
            self._queue_hist.append(float(self.buffer.qsize()))
        for group in groups:
            self._offer(group)

    def _offer(self, group: RolloutGroup) -> None:
        """Queue a group unless it is (or becomes, while the queue is full) stale."""
        blocked = False
        while not self.stop_event.is_set():
            if is_stale(group, self.version.get(), self.max_version_gap):
                self._inc("stale_drop")
                return
            try:
                self.buffer.put(group, timeout=POLL_S)
            except queue.Full:
                if not blocked:
                    self._inc("queue_full")
                    blocked = True
                continue
            self._inc("accepted")
            return

    # ---- consuming ----

    def _take(self, deadline: float | None) -> RolloutGroup | None:
        """The next fresh group, or None at the deadline / on stop / with no worker left."""
        while not self.stop_event.is_set():
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if wait <= 0:
                return None
            try:
                group = self.buffer.get(timeout=wait)
            except queue.Empty:
                if self.num_workers and self.threads and not self.workers_alive:
                    return None
                continue
            if is_stale(group, self.version.get(), self.max_version_gap):
                self._inc("stale_drop")
                continue
            return group
        return None

    def _record_wait(self, seconds: float) -> None:
        with self._stats_lock:
            self.stats["last_train_wait"] = seconds
            self.stats["train_wait_sum"] += seconds
            self.stats["train_batches"] += 1
            self._wait_hist.append(seconds)
            self._queue_hist.append(float(self.buffer.qsize()))

    def get_batch(self, n: int | None = None, timeout: float | None = None) -> list[RolloutGroup]:
        """Up to ``n`` (default ``batch_size``) fresh groups; fewer only on timeout/stop."""
        want = self.batch_size if n is None else max(0, int(n))
        start = time.monotonic()
        deadline = None if timeout is None else start + max(float(timeout), 0.0)
        groups: list[RolloutGroup] = []
        while len(groups) < want:
            group = self._take(deadline)
            if group is None:
                break
            groups.append(group)
        self._raise_fatal()
        self._record_wait(time.monotonic() - start)
        return groups

    def _raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    def get_one(self, timeout: float | None = None) -> RolloutGroup | None:
        """One fresh group, or None on timeout/stop."""
        start = time.monotonic()
        group = self._take(None if timeout is None else start + max(float(timeout), 0.0))
        self._raise_fatal()
        if group is not None:
            self._record_wait(time.monotonic() - start)
        return group

    def wait_until_ready(self, min_groups: int, timeout_s: float = 180.0) -> bool:
        """Block until ``min_groups`` (capped at the capacity) are queued; False on timeout."""
        target = min(max(int(min_groups), 0), self.capacity)
        if target == 0:
            return True
        deadline = time.monotonic() + max(float(timeout_s), 0.0)
        while not self.stop_event.is_set():
            if self.buffer.qsize() >= target:
                return True
            if time.monotonic() >= deadline:
                break
            if self.num_workers and self.threads and not self.workers_alive:
                break
            time.sleep(POLL_S)
        self._raise_fatal()
        return False

    # ---- statistics ----

    def snapshot_stats(self) -> dict[str, float]:
        """Counters plus rates, averages and p50/p90/p99 latencies (the ``async/...`` keys)."""
        with self._stats_lock:
            out = dict(self.stats)
            rollout = list(self._rollout_hist)
            waits = list(self._wait_hist)
            locks = list(self._lock_hist)
            sizes = list(self._queue_hist)
        produced = max(out["produced"], 1.0)
        generated = max(out["generated"], 1.0)
        batches = max(out["train_batches"], 1.0)
        out["queued"] = float(self.buffer.qsize())
        out["queue_capacity"] = float(self.capacity)
        out["queue_utilization"] = out["queued"] / max(out["queue_capacity"], 1.0)
        out["online_group_accept_rate"] = out["accepted"] / produced
        out["stale_drop_rate"] = out["stale_drop"] / produced
        out["avg_rollout_sec"] = out["rollout_time_sum"] / produced
        out["avg_train_wait_sec"] = out["train_wait_sum"] / batches
        out["avg_tokens_per_traj"] = out["rollout_tokens"] / generated
        out["avg_turns_per_traj"] = out["rollout_turns"] / generated
        out["avg_tool_calls_per_traj"] = out["rollout_tool_calls"] / generated
        out["unfinished_rate"] = out["unfinished"] / generated
        for q in (50, 90, 99):
            out[f"rollout_sec_p{q}"] = percentile(rollout, q / 100)
            out[f"train_wait_sec_p{q}"] = percentile(waits, q / 100)
        out["rollout_lock_wait_sec_p90"] = percentile(locks, 0.9)
        out["queue_size_p50"] = percentile(sizes, 0.5)
        out["queue_size_p90"] = percentile(sizes, 0.9)
        out["policy_version"] = float(self.version.get())
        out["workers_alive"] = float(self.workers_alive)
        return out


__all__ = ["AsyncRollout", "is_stale", "percentile", "split_fresh_groups"]
