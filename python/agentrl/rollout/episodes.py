"""The multi-turn agent loop over a whole batch of episodes (`run_episodes`).

An episode is: render, generate, parse, run tools, repeat. Rather than one at a time, a
batch of prompts x G samples advances turn by turn together: one `generate` call per turn
covers every episode still running (the engine prefills a group's shared first-turn
prompt once), then the tool calls of all episodes run at once (user tools on a thread
pool, so one slow tool does not stall the others), then every episode's observation is
appended. The per-trajectory bookkeeping:

* generated tokens: mask 1, behaviour log-prob, the policy version that sampled them
  (the end token is dropped unless ``keep_eos``);
* observation tokens (the closing markers of the assistant turn, the tool results and the
  next generation prompt, `agentrl.chat.observation_text`): mask 0, log-prob 0.0,
  version -1;
* token in, token out: an episode's running ids are its first prompt, then exactly the
  tokens it generated and the observation tokens, turn after turn. They are never
  replaced by a re-rendering of the conversation: a template may render history
  differently (Qwen3 drops the empty ``<think>`` block of a past turn; BPE may merge
  across a turn boundary), and training on ids the model never saw would be off-policy.
  Each tool turn whose re-rendering differs is counted in ``stats["template_divergence"]``;
* an episode ends when a turn has no tool call, or after ``max_turns`` turns with a call
  (``unfinished``; the last observation is rendered without a generation prompt);
* with ``call_mode="answer"`` (function calling: the calls are the answer), the first
  turn's calls are parsed and recorded on the trajectory (``answer_calls``), not run, and
  the episode ends there; a turn with no call records an empty list (the right answer to
  a request no function fits);
* the generation context is the last ``max_context_len`` tokens of the running ids;
* with an engine that keeps KV caches between calls (``kv_reuse``, `TorchEngine`), each
  episode's generate rows carry its cache key, so a turn prefills only what was added
  since the last one; the caches of finished episodes are dropped;
* with an episode environment (`agentrl.envs.EnvironmentTools`), every episode gets its
  own object: reset with the sample (its observation becomes a user turn), its tools
  bound to that object, its ``reward`` read into the trajectory, and ``close()`` called
  for every object however the batch ends.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentrl.chat import apply_chat_template, observation_text
from agentrl.rollout.batch_engine import FINISH_LENGTH
from agentrl.rollout.call_parsing import CallParser, parse_calls
from agentrl.rollout.engine import Generation
from agentrl.rollout.episode_env import (
    close_environments,
    environment_rewards,
    open_environments,
    score_turn,
)
from agentrl.rollout.episode_state import EpisodeState
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import ToolRegistry, supported_tool_names, tool_message
from agentrl.trajectory import RolloutGroup, ToolEvent, Trajectory


class RolloutEngine(Protocol):
    """What the loop needs from an engine (`TorchEngine`, a remote server client, a fake):
    a tokenizer and `BatchEngine.generate` (its signature; ``cache_keys`` aside).

    An engine whose ``kv_reuse`` attribute is true also takes ``cache_keys`` (one per
    row) in ``generate`` and has ``drop_cache(keys)``; the loop then uses them.
    """

    tokenizer: Any
    generate: Callable[..., list[Generation]]


@dataclass
class EpisodeConfig:
    """Limits of an episode, with the compatible defaults.

    ``max_response_tokens`` (0: none) caps generated + observation tokens per trajectory:
    each turn's budget shrinks to what is left, and an episode with nothing left ends
    unfinished. ``call_parser``: ``lenient`` (`agentrl.parsing.parse_message`, with the
    reward parser's function-style calls as a fallback) or ``reward`` (exactly the calls
    `agentrl.parsing.parse_tool_calls` finds, the ones the reward counts).
    ``call_mode``: ``execute`` (calls run, their results are observed) or ``answer`` (the
    first turn's calls are the episode's answer, recorded and not run; a sample is shown
    its own tools only, never the registry's).
    ``sampling`` gives the token choice and stop strings; its ``max_new_tokens`` is
    ignored here (each turn's budget is ``max_new_tokens`` above). For evaluation use
    ``sampling=SamplingParams(greedy=True)``.
    """

    max_turns: int = RolloutConfig.max_turns
    max_new_tokens: int = RolloutConfig.max_gen_len
    max_context_len: int = RolloutConfig.max_context_len
    max_response_tokens: int = 0
    thinking_ratio: float = RolloutConfig.thinking_ratio
    tool_result_chars: int = 1024
    keep_eos: bool = False
    tool_workers: int = RolloutConfig.tool_workers
    call_parser: Literal["lenient", "reward"] = "lenient"
    call_mode: Literal["execute", "answer"] = "execute"
    sampling: SamplingParams = field(default_factory=SamplingParams.compat_defaults)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.call_parser not in ("lenient", "reward"):
            raise ValueError(f"call_parser must be 'lenient' or 'reward', got {self.call_parser!r}")
        if self.call_mode not in ("execute", "answer"):
            raise ValueError(f"call_mode must be 'execute' or 'answer', got {self.call_mode!r}")


def _tokenize(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def _run_tools(episodes: list[EpisodeState], workers: int) -> list[list[ToolEvent]]:
    """Execute every episode's pending calls; user tools of all episodes run concurrently."""

    def one(ep: EpisodeState) -> list[ToolEvent]:
        began = time.perf_counter()
        events = list(ep.registry.execute_many(ep.pending_calls, ep.valid_names))
        ep.tool_seconds.extend([time.perf_counter() - began] * len(events))
        return events

    def inline_only(ep: EpisodeState) -> bool:
        for call in ep.pending_calls:
            item = ep.registry.get(str(call.get("name") or ""))
            if item is not None and not item.inline:
                return False
        return True

    if len(episodes) <= 1 or workers <= 1 or all(inline_only(ep) for ep in episodes):
        return [one(ep) for ep in episodes]
    with ThreadPoolExecutor(max_workers=min(workers, len(episodes))) as pool:
        return list(pool.map(one, episodes))


def _turn_budget(ep: EpisodeState, config: EpisodeConfig) -> int:
    if config.max_response_tokens <= 0:
        return config.max_new_tokens
    return min(config.max_new_tokens, config.max_response_tokens - len(ep.ids))


def run_episodes(
    engine: RolloutEngine,
    samples: Sequence[Any],
    tools: ToolRegistry,
    *,
    num_generations: int = 1,
    config: EpisodeConfig | None = None,
    data_indices: Sequence[int] | None = None,
    rng: random.Random | None = None,
    call_parser: CallParser | None = None,
) -> list[RolloutGroup]:
    """Play ``num_generations`` episodes of every sample; one `RolloutGroup` per sample.

    ``samples`` are prompt-pool samples or dicts with ``messages`` and optionally
    ``tools`` (default: the registry's listed tools) and ``gt``. ``rng`` draws which
    episodes open a thinking block (``config.thinking_ratio``). ``call_parser(text,
    tools)`` replaces the configured parser.
    """
    config = config or EpisodeConfig()
    rng = rng or random.Random()
    tokenizer = engine.tokenizer
    g = max(1, int(num_generations))
    indices = list(data_indices) if data_indices is not None else list(range(len(samples)))
    if len(indices) != len(samples):
        raise ValueError(f"{len(indices)} data indices for {len(samples)} samples")
    # The tool-call family the tokenizer was loaded with (`--tool_format`; auto: every one).
    tool_format = getattr(tokenizer, "agentrl_tool_format", "auto")
    parse = call_parser or (
        lambda text, specs: parse_calls(text, specs, config.call_parser, tool_format)
    )

    t_render = time.perf_counter()
    prompts: list[str] = []
    episodes: list[EpisodeState] = []
    for sample in samples:
        specs = sample.get("tools") if isinstance(sample, Mapping) else sample["tools"]
        if config.call_mode == "execute":  # answer mode shows the sample's own functions only
            specs = specs or tools.specs()
        valid = set(supported_tool_names(specs)) or tools.supported_names()
        prompts.append(apply_chat_template(tokenizer, sample["messages"], specs, True, False))
        for _ in range(g):
            think = rng.random() < config.thinking_ratio
            episodes.append(EpisodeState(sample, specs, valid, think, tools))
    try:
        open_environments(episodes, tools)
        return _play(engine, episodes, samples, prompts, indices, g, config, parse, t_render)
    finally:
        close_environments(episodes)


def _first_key(n: int, ep: EpisodeState, g: int) -> tuple[int, bool]:
    """Which first-turn rendering episode ``n`` shares: its sample's, or its own."""
    own = ep.environment is not None and ep.environment.observation is not None
    return (-1 - n if own else n // g, ep.open_thinking)


def _play(
    engine: RolloutEngine,
    episodes: list[EpisodeState],
    samples: Sequence[Any],
    prompts: list[str],
    indices: list[int],
    g: int,
    config: EpisodeConfig,
    parse: CallParser,
    t_render: float,
) -> list[RolloutGroup]:
    """The turns of a batch of episodes, then their groups."""
    tokenizer = engine.tokenizer
    # First-turn contexts: one rendering per distinct (sample, thinking) pair; an episode
    # whose environment added an observation renders its own.
    firsts: dict[tuple[int, bool], str] = {}
    for n, ep in enumerate(episodes):
        key = _first_key(n, ep, g)
        if key not in firsts:
            firsts[key] = apply_chat_template(
                tokenizer, ep.messages, ep.tools, True, ep.open_thinking
            )
    keys = list(firsts)
    first_ids = dict(zip(keys, _tokenize(tokenizer, [firsts[k] for k in keys]), strict=True))
    for n, ep in enumerate(episodes):
        ep.full_ids = list(first_ids[_first_key(n, ep, g)])
    render_s = time.perf_counter() - t_render
    for ep in episodes:
        ep.stats["render_s"] += render_s / max(len(episodes), 1)
    reuse = bool(getattr(engine, "kv_reuse", False))
    try:
        for turn in range(config.max_turns):
            if not _play_turn(engine, episodes, turn, config, parse, reuse):
                break
    finally:
        if reuse:
            engine.drop_cache([ep.cache_key for ep in episodes])  # type: ignore[attr-defined]

    for ep in episodes:
        if not ep.done:
            ep.finish(unfinished=ep.unfinished)
    texts = tokenizer.batch_decode([ep.full_ids for ep in episodes], skip_special_tokens=False)
    for ep, text in zip(episodes, texts, strict=True):
        ep.context_text = text
    return _groups(episodes, samples, prompts, indices, g)


def _play_turn(
    engine: RolloutEngine,
    episodes: list[EpisodeState],
    turn: int,
    config: EpisodeConfig,
    parse: CallParser,
    reuse: bool,
) -> bool:
    """One generate call for every running episode, then their tools; False: all done."""
    active = [ep for ep in episodes if not ep.done]
    contexts: list[list[int]] = []
    budgets: list[int] = []
    running: list[EpisodeState] = []
    for ep in active:
        budget = _turn_budget(ep, config)
        if budget <= 0:
            ep.finish(unfinished=True)
            continue
        ctx = ep.full_ids
        if config.max_context_len > 0 and len(ctx) > config.max_context_len:
            ctx = ctx[-config.max_context_len :]
            ep.stats["truncated_contexts"] += 1
        if ep.prompt_ids is None:
            ep.prompt_ids = list(ctx)
        contexts.append(list(ctx))
        budgets.append(budget)
        running.append(ep)
    if not running:
        return False
    t0 = time.perf_counter()
    extra = {"cache_keys": [ep.cache_key for ep in running]} if reuse else {}
    outputs = engine.generate(contexts, config.sampling, max_new_tokens=budgets, **extra)
    gen_s = time.perf_counter() - t0

    with_calls: list[EpisodeState] = []
    for ep, out in zip(running, outputs, strict=True):
        ep.stats["generate_s"] += gen_s
        ep.stats["turns"] += 1
        ep.stats["length_stops"] += float(out.finish_reason == FINISH_LENGTH)
        if ep.first_version is None:
            ep.first_version = out.version
        generated = list(out.token_ids)
        logps = list(out.logps)
        ep.kept_end_token = config.keep_eos and out.end_token_id is not None
        if ep.kept_end_token:
            generated.append(int(out.end_token_id))  # type: ignore[arg-type]
            logps.append(out.end_logp if out.end_logp is not None else 0.0)
        ep.turn_starts.append(len(ep.ids))
        ep.add(generated, logps, out.version)
        ep.full_ids.extend(generated)
        ep.turn_outputs.append(out.text)
        ep.messages.append({"role": "assistant", "content": out.text})
        ep.pending_calls = parse(out.text, ep.tools)
        if config.call_mode == "answer":  # the calls are the answer: recorded, not run
            ep.answer_calls = [dict(call) for call in ep.pending_calls]
            ep.pending_calls = []
        if not ep.pending_calls:
            score_turn(ep, turn, [])
            ep.finish()
            continue
        ep.unfinished = turn == config.max_turns - 1
        with_calls.append(ep)
    if with_calls:
        _observe(engine.tokenizer, with_calls, turn, config)
    if reuse:  # a finished episode's cache is never continued
        engine.drop_cache([ep.cache_key for ep in active if ep.done])  # type: ignore[attr-defined]
    return True


def _observe(
    tokenizer: Any, episodes: list[EpisodeState], turn: int, config: EpisodeConfig
) -> None:
    """Run the episodes' calls and append the tool results to their running ids.

    Only the text the template adds after the assistant turn's content is tokenized and
    appended (it starts with the turn's closing markers: the end token the model stopped
    on is not among its generated ids unless ``keep_eos``). The re-rendered conversation
    is tokenized too, only to count where it differs from the running ids.
    """
    t0 = time.perf_counter()
    events = _run_tools(episodes, config.tool_workers)
    tool_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    added: list[str] = []
    rerendered: list[str] = []
    for ep, evs in zip(episodes, events, strict=True):
        ep.stats["tool_s"] += tool_s
        score_turn(ep, turn, evs)
        ep.tool_events.extend(evs)
        ep.tool_turns.extend([turn] * len(evs))
        results = [
            {"role": "tool", "content": tool_message(ev.result, config.tool_result_chars)}
            for ev in evs
        ]
        prompt_next = not ep.unfinished
        added.append(
            observation_text(
                tokenizer, ep.messages, results, ep.tools, prompt_next, ep.open_thinking
            )
        )
        ep.messages.extend(results)
        rerendered.append(
            apply_chat_template(tokenizer, ep.messages, ep.tools, prompt_next, ep.open_thinking)
        )
    added_ids = _tokenize(tokenizer, added)
    rerendered_ids = _tokenize(tokenizer, rerendered)
    for ep, ids, whole in zip(episodes, added_ids, rerendered_ids, strict=True):
        if ep.kept_end_token and ids[:1] == ep.full_ids[-1:]:
            ids = ids[1:]  # the closing end token is already there, as generated
        ep.add(ids, None, -1)
        ep.full_ids.extend(ids)
        if ep.full_ids != whole:
            ep.stats["template_divergence"] += 1
        if ep.unfinished:
            ep.finish(unfinished=True)
    render_s = time.perf_counter() - t0
    for ep in episodes:
        ep.stats["render_s"] += render_s / len(episodes)


def _columns(sample: Any) -> dict[str, Any]:
    """The data record's other columns: a prompt-pool sample's, or a dict sample's keys."""
    if not isinstance(sample, Mapping):
        return dict(sample["columns"] or {})
    if "columns" in sample:
        return dict(sample["columns"] or {})
    return {k: v for k, v in sample.items() if k not in ("messages", "tools")}


def _groups(
    episodes: list[EpisodeState],
    samples: Sequence[Any],
    prompts: list[str],
    indices: list[int],
    g: int,
) -> list[RolloutGroup]:
    groups = []
    for s, sample in enumerate(samples):
        trajs = []
        for ep in episodes[s * g : (s + 1) * g]:
            gt = sample.get("gt") if isinstance(sample, Mapping) else sample["gt"]
            columns = _columns(sample)
            traj = Trajectory(
                prompt=prompts[s],
                messages=list(sample["messages"]),
                tools=ep.tools,
                gt=list(gt or []),
                completion="\n".join(ep.turn_outputs),
                context=ep.context_text,
                prompt_ids=list(ep.prompt_ids or []),
                response_ids=ep.ids,
                response_mask=ep.mask,
                response_logps=ep.logps,
                response_versions=ep.versions,
                turn_outputs=ep.turn_outputs,
                tool_events=ep.tool_events,
                tool_turns=ep.tool_turns,
                tool_seconds=ep.tool_seconds,
                unfinished=ep.unfinished,
                policy_version=ep.first_version if ep.first_version is not None else 0,
                data_index=indices[s],
                rollout_time=ep.end - ep.start,
                stats=ep.stats,
                conversation=ep.messages,
                columns=columns,
                turn_starts=ep.turn_starts,
                answer_calls=ep.answer_calls,
            )
            traj.check_alignment()
            if ep.environment is not None:
                environment_rewards(traj, ep)
            trajs.append(traj)
        version = min(t.policy_version for t in trajs)
        groups.append(RolloutGroup(prompts[s], indices[s], version, trajs, time.time()))
    return groups


__all__ = ["CallParser", "EpisodeConfig", "RolloutEngine", "parse_calls", "run_episodes"]
