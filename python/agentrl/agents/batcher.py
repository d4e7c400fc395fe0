"""One engine for every episode of an ``--agent`` run: concurrent requests, batched.

Each episode's recorder (`agentrl.agents.recorder`) submits its calls here and blocks; a
background thread gathers them into ``engine.generate`` calls, one per set of sampling
settings, and hands each request its completions (or the engine's error).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentrl.rollout.engine import Generation
from agentrl.rollout.sampling import SamplingParams


@dataclass
class _Job:
    prompt: list[int]
    params: SamplingParams
    budget: int
    n: int
    key: Hashable | None
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: BaseException | None = None


class Batcher:
    """Gathers the requests of concurrent episodes into batched ``engine.generate`` calls.

    A batch goes to the engine as soon as every live episode has a request waiting
    (``live()``), or ``window_s`` after the last request arrived (at most ``max_wait_s``
    after the first): an agent busy with its own tools does not hold the others up.
    Requests with different sampling settings go in separate calls.
    """

    def __init__(
        self,
        engine: Any,
        live: Callable[[], int],
        *,
        window_s: float = 0.05,
        max_wait_s: float = 0.25,
    ) -> None:
        self.engine = engine
        self.live = live
        self.window_s, self.max_wait_s = window_s, max_wait_s
        self.reuse = bool(getattr(engine, "kv_reuse", False))
        self._pending: list[_Job] = []
        self._cond = threading.Condition()
        self._stopped = False
        self.generate_calls = 0
        self.rows = 0
        self._thread = threading.Thread(
            target=self._loop, name="agentrl-agent-batcher", daemon=True
        )
        self._thread.start()

    def submit(
        self, prompt: list[int], params: SamplingParams, budget: int, n: int, key: Hashable | None
    ) -> list[Generation]:
        """Generate ``n`` completions of ``prompt`` (blocks until the batch is done)."""
        return self._wait([_Job(prompt, params, budget, n, key if self.reuse else None)])[0]

    def submit_many(
        self, prompts: Sequence[list[int]], params: SamplingParams, budget: int, n: int
    ) -> list[list[Generation]]:
        """``n`` completions of each of ``prompts``, queued at once (so sampled together)."""
        return self._wait([_Job(list(p), params, budget, n, None) for p in prompts])

    def _wait(self, jobs: list[_Job]) -> list[list[Generation]]:
        with self._cond:
            if self._stopped:
                raise RuntimeError("the endpoint's engine is stopped")
            self._pending.extend(jobs)
            self._cond.notify_all()
        results = []
        for job in jobs:
            job.done.wait()
            if job.error is not None:
                raise job.error
            assert job.result is not None
            results.append(job.result)
        return results

    def wake(self) -> None:
        """Re-check the flush condition (an episode ended, so fewer are live)."""
        with self._cond:
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            jobs, self._pending = self._pending, []
            self._cond.notify_all()
        for job in jobs:
            job.error = RuntimeError("the endpoint's engine is stopped")
            job.done.set()
        self._thread.join(timeout=5)

    def _take(self) -> list[_Job] | None:
        with self._cond:
            while not self._pending and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return None
            first = last = time.monotonic()
            count = len(self._pending)
            while not self._stopped:
                now = time.monotonic()
                if len(self._pending) >= max(self.live(), 1):
                    break
                if now - last >= self.window_s or now - first >= self.max_wait_s:
                    break
                self._cond.wait(
                    timeout=min(self.window_s - (now - last), self.max_wait_s - (now - first))
                )
                if len(self._pending) != count:
                    count, last = len(self._pending), time.monotonic()
            jobs, self._pending = self._pending, []
            return jobs

    def _loop(self) -> None:
        while True:
            jobs = self._take()
            if jobs is None:
                return
            by_params: dict[SamplingParams, list[_Job]] = {}
            for job in jobs:
                by_params.setdefault(replace(job.params, max_new_tokens=0), []).append(job)
            for params, group in by_params.items():
                self._run(params, group)

    def _run(self, params: SamplingParams, jobs: Sequence[_Job]) -> None:
        rows = [job.prompt for job in jobs for _ in range(job.n)]
        budgets = [job.budget for job in jobs for _ in range(job.n)]
        extra: dict[str, Any] = {}
        if self.reuse and any(job.key is not None for job in jobs):
            extra["cache_keys"] = [job.key for job in jobs for _ in range(job.n)]
        try:
            outputs = self.engine.generate(rows, params, max_new_tokens=budgets, **extra)
            self.generate_calls += 1
            self.rows += len(rows)
        except BaseException as exc:  # every waiting request gets the engine's error
            for job in jobs:
                job.error = exc
                job.done.set()
            return
        at = 0
        for job in jobs:
            job.result = list(outputs[at : at + job.n])
            at += job.n
            job.done.set()


__all__ = ["Batcher"]
