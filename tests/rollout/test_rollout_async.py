"""AsyncRollout: stale groups dropped by version, errors counted, clean stop, statistics."""

from __future__ import annotations

import threading
import time
from collections import deque

import pytest
from agentrl.rollout.async_rollout import AsyncRollout, percentile, split_fresh_groups
from agentrl.rollout.episodes import EpisodeConfig
from agentrl.tools import builtin_registry
from agentrl.trajectory import PolicyVersion, RolloutGroup

from tests.fakes.engines import ScriptedEngine

SAMPLES = [
    {"messages": [{"role": "user", "content": f"{i}+1"}], "tools": None, "gt": [str(i + 1)]}
    for i in range(5)
]


def _answer(_turn: int, _context: str) -> str:
    return "<answer>1</answer>"


class VersionedEngine(ScriptedEngine):
    """A fake engine with the `TorchEngine` weight-sync surface."""

    def __init__(self, fail_first: int = 0, error: Exception | None = None) -> None:
        super().__init__(_answer)
        self.lock = threading.RLock()
        self.fail_first = fail_first
        self.error = error or RuntimeError("engine hiccup")
        self.updates: list[int] = []

    def generate(self, prompts, params=None, **kwargs):  # type: ignore[no-untyped-def]
        if self.fail_first > 0:
            self.fail_first -= 1
            raise self.error
        return super().generate(prompts, params, **kwargs)

    def update_weights(self, source: object, version: int | None = None) -> bool:
        if source == "bad":
            return False
        with self.lock:
            self.version = self.version + 1 if version is None else int(version)
            self.updates.append(self.version)
        return True


def _rollout(engine: VersionedEngine, **kwargs: object) -> AsyncRollout:
    options: dict = {
        "num_generations": 2,
        "batch_size": 2,
        "groups_per_rollout": 2,
        "config": EpisodeConfig(max_turns=1),
    }
    options.update(kwargs)
    return AsyncRollout(engine, SAMPLES, builtin_registry(), **options)


def _group(version: int) -> RolloutGroup:
    return RolloutGroup("p", 0, version, [], 0.0)


def test_percentile_interpolates_linearly() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9) == pytest.approx(4.6)
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([float("nan")], 0.5, default=-1.0) == -1.0


def test_split_fresh_groups_drops_stale_and_keeps_the_rest_pending() -> None:
    pending: deque[RolloutGroup] = deque([_group(5)])
    fetched = [_group(2), _group(4), _group(5), _group(5), _group(3)]
    batch, drops = split_fresh_groups(fetched, pending, 2, current_version=5, max_version_gap=1)
    assert batch is not None and [g.policy_version for g in batch] == [4, 5]
    assert drops == 2  # versions 2 and 3 are more than one behind
    assert [g.policy_version for g in pending] == [5, 5]
    none, _ = split_fresh_groups([_group(0)], deque(), 2, current_version=5, max_version_gap=0)
    assert none is None


def test_queued_groups_that_fall_behind_are_dropped_by_version() -> None:
    engine = VersionedEngine()
    version = PolicyVersion(0)
    rollout = _rollout(engine, version=version, max_version_gap=0, max_queue_groups=2)
    with rollout:
        assert rollout.wait_until_ready(2, timeout_s=10)
        time.sleep(0.1)
        new = rollout.sync_weights({"w": 1})
        assert new == 1 and engine.version == 1 and version.get() == 1
        batch = rollout.get_batch(2, timeout=10)
    assert len(batch) == 2
    assert all(g.policy_version == 1 for g in batch)
    stats = rollout.snapshot_stats()
    assert stats["stale_drop"] >= 2
    assert stats["stale_drop_rate"] > 0
    assert not rollout.threads


def test_a_gap_of_one_keeps_groups_one_version_behind() -> None:
    engine = VersionedEngine()
    rollout = _rollout(engine, max_version_gap=1, max_queue_groups=4)
    with rollout:
        assert rollout.wait_until_ready(4, timeout_s=10)
        rollout.sync_weights({"w": 1})
        batch = rollout.get_batch(4, timeout=10)
    assert [g.policy_version for g in batch] == [0, 0, 0, 0]


def test_worker_errors_are_counted_and_production_goes_on() -> None:
    engine = VersionedEngine(fail_first=2)
    rollout = _rollout(engine)
    with rollout:
        batch = rollout.get_batch(2, timeout=10)
        assert rollout.workers_alive == 1
    assert len(batch) == 2
    stats = rollout.snapshot_stats()
    assert stats["errors"] == 2
    assert "engine hiccup" in rollout.errors[0]


def test_a_recurring_error_stops_the_workers_and_reaches_the_waiting_trainer() -> None:
    from agentrl.errors import RecurringError

    # A setting that cannot work fails the same way on every batch: no endless retries.
    engine = VersionedEngine(fail_first=100, error=RecurringError("the decoder does not compile"))
    rollout = _rollout(engine)
    with rollout:
        with pytest.raises(RecurringError, match="does not compile"):
            rollout.wait_until_ready(2, timeout_s=30)
        with pytest.raises(RecurringError, match="does not compile"):
            rollout.get_batch(2, timeout=30)
        assert rollout.workers_alive == 0
    assert engine.fail_first == 99  # one try, not one per batch
    assert rollout.snapshot_stats()["errors"] == 1
    assert "does not compile" in rollout.errors[0]


def test_other_user_errors_are_retried_like_any_worker_error() -> None:
    from agentrl.errors import UserError

    # A rollout server that aborted one generation answers the next one.
    engine = VersionedEngine(fail_first=1, error=UserError("the server aborted a generation"))
    rollout = _rollout(engine)
    with rollout:
        batch = rollout.get_batch(2, timeout=10)
        assert rollout.workers_alive == 1
    assert len(batch) == 2 and rollout.snapshot_stats()["errors"] == 1


def test_refused_weights_keep_the_version() -> None:
    engine = VersionedEngine()
    rollout = _rollout(engine, num_workers=0)
    assert rollout.sync_weights("bad") == 0
    assert rollout.sync_weights({"w": 1}) == 1 and engine.updates == [1]


def test_stats_report_latency_quantiles_and_per_trajectory_means() -> None:
    engine = VersionedEngine()
    rollout = _rollout(engine)
    with rollout:
        for _ in range(3):
            assert len(rollout.get_batch(timeout=10)) == 2
    stats = rollout.snapshot_stats()
    for key in (
        "rollout_sec_p50",
        "rollout_sec_p90",
        "rollout_sec_p99",
        "train_wait_sec_p50",
        "train_wait_sec_p90",
        "train_wait_sec_p99",
        "queue_size_p90",
        "online_group_accept_rate",
    ):
        assert key in stats and stats[key] >= 0.0
    assert stats["train_batches"] == 3
    assert stats["avg_turns_per_traj"] == pytest.approx(1.0)
    assert stats["avg_tokens_per_traj"] > 0
    assert stats["rollout_sec_p99"] >= stats["rollout_sec_p50"] > 0


def test_stop_joins_workers_blocked_on_a_full_queue() -> None:
    rollout = _rollout(VersionedEngine(), max_queue_groups=1)
    rollout.start()
    assert rollout.wait_until_ready(1, timeout_s=10)
    time.sleep(0.2)
    start = time.monotonic()
    assert rollout.stop(timeout=5)
    assert time.monotonic() - start < 2
    assert rollout.get_batch(1, timeout=0.1) == []
    assert rollout.snapshot_stats()["queue_full"] >= 1


def test_get_batch_times_out_without_producers() -> None:
    rollout = _rollout(VersionedEngine(), num_workers=0)
    start = time.monotonic()
    assert rollout.get_batch(1, timeout=0.2) == []
    assert 0.15 < time.monotonic() - start < 2
    assert not rollout.wait_until_ready(1, timeout_s=0.1)
