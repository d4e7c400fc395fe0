"""A batch of agent episodes at once: G per prompt, each the user's function on its own.

Every episode gets its own endpoint (`agentrl.agents.server`) and recorder; a plain agent
runs in its own thread, ``async`` agents run together on one event loop. All of their
requests meet in one `agentrl.agents.batcher.Batcher`, so the engine samples for them in
batches. An episode is dropped, with its error kept, when its agent raises, runs past
``timeout`` (its endpoint is closed: later calls get 410; a plain agent's thread cannot be
stopped and is left to finish on its own, a daemon thread) or returns no reward. The
finished ones become `agentrl.trajectory.RolloutGroup` s: one per prompt, every sequence
of its episodes that finished.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.agents.assemble import trajectories
from agentrl.agents.batcher import Batcher
from agentrl.agents.endpoint import (
    AgentFn,
    AgentReward,
    Endpoint,
    RewardError,
    agent_name,
    agent_sample,
    is_async_agent,
    reward_of,
)
from agentrl.agents.recorder import EpisodeRecorder, Limits
from agentrl.agents.sdk_routing import episode_scope, route_sdk_default_client
from agentrl.agents.server import EndpointServer, EpisodeGone
from agentrl.errors import first_line, from_signal, user_code_error
from agentrl.trajectory import RolloutGroup, Trajectory

# Kinds of dropped episodes, as counted in ``agent/<kind>``.
RAISED, TIMEOUT, NO_REWARD = "raised", "timeouts", "no_reward"


@dataclass(frozen=True)
class _Raised:
    """What an async agent raised, carried out of its coroutine as a value."""

    exc: BaseException


@dataclass
class Episode:
    """One agent episode while it runs and after."""

    position: int  # which sample of the batch
    data_index: int
    sample: dict[str, Any]
    recorder: EpisodeRecorder
    base_url: str = ""
    reward: AgentReward | None = None
    error: str | None = None
    kind: str | None = None  # why it was dropped
    began: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    live: bool = False  # counted among the running episodes the batcher waits for
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class AgentBatch:
    groups: list[RolloutGroup]
    episodes: list[Episode]  # all of them, dropped ones included
    metrics: dict[str, float]


class AgentRunner:
    """Runs an agent over batches of samples against one engine, through one server."""

    def __init__(
        self,
        agent: AgentFn,
        server: EndpointServer,
        engine: Any,
        limits: Limits,
        *,
        timeout: float,
    ) -> None:
        self.agent = agent
        self.name = agent_name(agent)
        self.server = server
        self.engine = engine
        self.limits = limits
        self.timeout = timeout
        # An agent written with the OpenAI Agents SDK's defaults reaches its episode's endpoint.
        self.routes_sdk = route_sdk_default_client()
        self._live = 0
        self._live_lock = threading.Lock()
        self._keys = 0
        self._ending = threading.Lock()  # an episode ends once: finished or timed out

    # ------------------------------------------------------------------ one batch

    def run(
        self, samples: Sequence[Any], indices: Sequence[int], num_generations: int
    ) -> AgentBatch:
        began = time.perf_counter()
        batcher = Batcher(self.engine, self._live_count)
        episodes: list[Episode] = []
        try:
            for position, (sample, index) in enumerate(zip(samples, indices, strict=True)):
                for _ in range(num_generations):
                    episodes.append(self._episode(position, index, sample, batcher))
            if is_async_agent(self.agent):
                self._run_async(episodes, batcher)
            else:
                self._run_threads(episodes, batcher)
        finally:
            for ep in episodes:
                self.server.close_episode(ep.base_url)
            batcher.stop()
            drop = getattr(self.engine, "drop_cache", None)
            if batcher.reuse and drop is not None:
                drop([ep.recorder.cache_key for ep in episodes])
        groups, split_metrics = self._groups(episodes, samples, indices)
        metrics = self._metrics(episodes, batcher, time.perf_counter() - began)
        metrics.update(split_metrics)
        return AgentBatch(groups, episodes, metrics)

    def _live_count(self) -> int:
        with self._live_lock:
            return self._live

    def _episode(self, position: int, index: int, sample: Any, batcher: Batcher) -> Episode:
        self._keys += 1
        key = ("agentrl-agent", id(self), self._keys)

        def generate(prompt: list[int], params: Any, budget: int, n: int, cache: Any) -> Any:
            return batcher.submit(prompt, params, budget, n, cache)

        recorder = EpisodeRecorder(self.engine.tokenizer, self.limits, generate, key)
        ep = Episode(position, int(index), agent_sample(sample), recorder)

        def handle(body: Mapping[str, Any]) -> dict[str, Any]:
            if ep.done.is_set():
                raise EpisodeGone()
            _, reply = recorder.complete(body)
            return reply

        ep.base_url = self.server.open_episode(handle)
        return ep

    def _endpoint(self, ep: Episode) -> Endpoint:
        return Endpoint(ep.base_url, self.server.api_key, self.server.model, self.timeout)

    def _finish(self, ep: Episode, value: Any = None, exc: BaseException | None = None) -> None:
        with self._ending:
            if not ep.done.is_set():
                self._end(ep, value, exc)

    def _end(self, ep: Episode, value: Any, exc: BaseException | None) -> None:
        ep.seconds = time.perf_counter() - ep.began
        if exc is not None:
            ep.kind, ep.error = RAISED, str(user_code_error(exc, f"agent {self.name}", self.agent))
        else:
            try:
                ep.reward = reward_of(value)
            except RewardError as err:
                ep.kind, ep.error = NO_REWARD, f"agent {self.name} {err}"
        ep.done.set()

    def _time_out(self, ep: Episode) -> None:
        with self._ending:
            if ep.done.is_set():
                return
            ep.seconds = time.perf_counter() - ep.began
            ep.kind = TIMEOUT
            ep.error = f"agent {self.name} ran past --agent_timeout {self.timeout:g}s"
            ep.done.set()

    def _enter(self, ep: Episode, batcher: Batcher) -> None:
        """``ep`` is running: the batcher waits for its requests too."""
        with self._live_lock:
            ep.live = True
            self._live += 1
        batcher.wake()

    def _leave(self, ep: Episode, batcher: Batcher) -> None:
        """``ep`` returned or timed out (a hung agent is not waited for again)."""
        with self._live_lock:
            if ep.live:
                ep.live = False
                self._live -= 1
        batcher.wake()

    def _run_threads(self, episodes: list[Episode], batcher: Batcher) -> None:
        def play(ep: Episode) -> None:
            self._enter(ep, batcher)
            try:
                with episode_scope(self._endpoint(ep)) as endpoint:
                    value = self.agent(endpoint, ep.sample)
            except BaseException as exc:
                self._finish(ep, exc=exc)
            else:
                self._finish(ep, value)
            finally:
                self._leave(ep, batcher)

        threads = [
            threading.Thread(target=play, args=(ep,), daemon=True, name=f"agentrl-agent-{n}")
            for n, ep in enumerate(episodes)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for ep in episodes:
            left = self.timeout - (time.perf_counter() - started)
            if not ep.done.wait(timeout=max(left, 0.0)):
                self._time_out(ep)
                self._leave(ep, batcher)

    def _run_async(self, episodes: list[Episode], batcher: Batcher) -> None:
        async def contained(ep: Episode) -> Any:
            # asyncio lets SystemExit and KeyboardInterrupt stop the whole loop (every
            # episode lost, the exception out of the run): the agent's own end here.
            try:
                with episode_scope(self._endpoint(ep)) as endpoint:
                    return await self.agent(endpoint, ep.sample)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                if from_signal(exc):
                    raise
                return _Raised(exc)

        async def play(ep: Episode) -> None:
            self._enter(ep, batcher)
            try:
                value = await asyncio.wait_for(contained(ep), self.timeout)
            except asyncio.TimeoutError:
                self._time_out(ep)
            except BaseException as exc:
                self._finish(ep, exc=exc)
            else:
                if isinstance(value, _Raised):
                    self._finish(ep, exc=value.exc)
                else:
                    self._finish(ep, value)
            finally:
                self._leave(ep, batcher)

        async def play_all() -> None:
            await asyncio.gather(*(play(ep) for ep in episodes))

        errors: list[BaseException] = []

        def loop() -> None:  # its own thread: the caller may be inside an event loop
            try:
                asyncio.run(play_all())
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=loop, daemon=True, name="agentrl-agent-loop")
        thread.start()
        thread.join(self.timeout + 30.0)
        for ep in episodes:
            if not ep.done.is_set():
                self._time_out(ep)
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------ results

    def _groups(
        self, episodes: list[Episode], samples: Sequence[Any], indices: Sequence[int]
    ) -> tuple[list[RolloutGroup], dict[str, float]]:
        decode = self._decoder()
        by_sample: list[list[Trajectory]] = [[] for _ in samples]
        rewrites = branches = sequences = 0
        for ep in episodes:
            if ep.reward is None:
                continue
            if not ep.recorder.calls:
                ep.kind, ep.error = (
                    NO_REWARD,
                    (f"agent {self.name} made no chat completion call: nothing to train on"),
                )
                ep.reward = None
                continue
            record = {
                "agent": self.name,
                "reward": ep.reward.reward,
                "values": dict(ep.reward.values),
                "error": None,
            }
            trajs, split = trajectories(
                ep.recorder.calls,
                sample=ep.sample,
                data_index=ep.data_index,
                seconds=ep.seconds,
                agent=record,
                decode=decode,
            )
            rewrites += split.history_rewrites
            branches += split.branches
            sequences += len(trajs)
            by_sample[ep.position].extend(trajs)
        groups = []
        for position, trajs in enumerate(by_sample):
            if not trajs:
                continue
            version = min(t.policy_version for t in trajs)
            groups.append(
                RolloutGroup(
                    trajs[0].prompt,
                    int(indices[position]),
                    version,
                    trajs,
                    time.time(),
                    size=len(trajs),
                )
            )
        finished = sum(ep.reward is not None for ep in episodes)
        metrics = {
            "agent/history_rewrites": float(rewrites),
            "agent/branches": float(branches),
            "agent/sequences_per_episode": sequences / max(finished, 1),
        }
        return groups, metrics

    def _decoder(self) -> Any:
        tokenizer = self.engine.tokenizer

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids, skip_special_tokens=False)

        return decode

    def _metrics(
        self, episodes: list[Episode], batcher: Batcher, seconds: float
    ) -> dict[str, float]:
        n = max(len(episodes), 1)
        kinds = [ep.kind for ep in episodes]
        calls = [len(ep.recorder.calls) for ep in episodes]
        out = {
            "agent/episodes": float(len(episodes)),
            "agent/dropped": float(sum(k is not None for k in kinds)),
            f"agent/{RAISED}": float(kinds.count(RAISED)),
            f"agent/{TIMEOUT}": float(kinds.count(TIMEOUT)),
            f"agent/{NO_REWARD}": float(kinds.count(NO_REWARD)),
            "agent/calls_per_episode": sum(calls) / n,
            "agent/generate_calls": float(batcher.generate_calls),
            "agent/rows_per_generate": batcher.rows / max(batcher.generate_calls, 1),
            "agent/ignored_fields": float(
                sum(len(c.ignored) for ep in episodes for c in ep.recorder.calls)
            ),
            "agent/seconds": seconds,
        }
        values: dict[str, list[float]] = {}
        for ep in episodes:
            if ep.reward is not None:
                for key, value in ep.reward.values.items():
                    values.setdefault(key, []).append(value)
        out.update({f"agent/{k}": sum(v) / len(v) for k, v in values.items()})
        return out


def failure_record(
    ep: Episode, *, kind: str, step: int, episode: int, group: int
) -> dict[str, Any]:
    """The dump record of a dropped episode: its prompt, the calls it made, its error."""
    calls = ep.recorder.calls
    messages = [dict(m) for m in ep.sample.get("messages") or []]
    if calls:
        last = calls[-1]
        messages = [dict(m) for m in last.messages]
        messages += [{"role": "assistant", "content": c.text} for c in last.choices[:1]]
    return {
        "schema": 1,
        "kind": kind,
        "step": int(step),
        "episode": int(episode),
        "group": int(group),
        "prompt_index": ep.data_index,
        "messages": messages,
        "tool_calls": [],
        "tokens": {
            "prompt": len(calls[0].prompt_ids) if calls else 0,
            "generated": sum(len(c.completion_ids) for call in calls for c in call.choices),
            "observation": 0,
        },
        "reward": None,
        "reward_terms": {},
        "advantage": None,
        "policy_version": min((c.version for call in calls for c in call.choices), default=0),
        "trainer_version": None,
        "staleness": None,
        "finish_reason": "dropped",
        "turns": len(calls),
        "seconds": ep.seconds,
        "gt": list(ep.sample.get("gt") or []),
        "dropped": ep.kind,
        "error": ep.error,
        "agent": {
            "error": ep.error,
            "dropped": ep.kind,
            "calls": [
                {
                    "call": c.index,
                    "prompt_tokens": len(c.prompt_ids),
                    "completion_tokens": sum(len(x.completion_ids) for x in c.choices),
                    "seconds": round(c.seconds, 4),
                }
                for c in calls
            ],
        },
    }


def error_summary(episodes: Sequence[Episode]) -> str:
    """The first error of a batch, for a message when nothing of it can be trained."""
    for ep in episodes:
        if ep.error:
            return first_line(Exception(ep.error))
    return "no episode finished"


__all__ = ["AgentBatch", "AgentRunner", "Episode", "error_summary", "failure_record"]
