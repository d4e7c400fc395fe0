"""`--agent`: the user's agent trained through the endpoint inside the trainer.

A scripted engine stands in for the policy, so these tests pin the endpoint, the recorder
and the episode assembly without a model: which ids an episode trains on, how a rewritten
history splits it, what happens to agents that fail, and who may call the endpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
from agentrl.agents.recorder import Limits
from agentrl.agents.runner import AgentRunner
from agentrl.agents.server import EndpointServer
from agentrl.errors import UserCodeError
from agentrl.rollout.engine import Generation
from agentrl.rollout.sampling import SamplingParams
from agentrl.training.agent_source import AgentSource, agent_reward

from tests.fakes.engines import CALC_SPEC
from tests.fakes.models import tiny_tokenizer
from tests.fakes.repo import REPO
from tests.fakes.runs import use_examples

openai = pytest.importorskip("openai")

CALL = '<tool_call>{"name": "calculate_math", "arguments": {"expression": "2+3"}}</tool_call>'


class ScriptedEngine:
    """A fake policy: calls the calculator until the context holds a tool result."""

    def __init__(self) -> None:
        self.tokenizer = tiny_tokenizer()
        self.lock = threading.RLock()
        self.version = 0
        self.batches: list[int] = []

    def reseed(self, seed: int) -> None:
        return None

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        *,
        max_new_tokens: int | Sequence[int] | None = None,
        **_: object,
    ) -> list[Generation]:
        tok = self.tokenizer
        self.batches.append(len(prompts))
        out = []
        for prompt in prompts:
            context = tok.decode(list(prompt))
            text = "<answer>5</answer>" if "<tool_response>" in context else CALL
            ids = tok(text, add_special_tokens=False)["input_ids"]
            logps = [-0.5] * len(ids)
            out.append(
                Generation(
                    ids,
                    logps,
                    logps,
                    tok.decode(ids),
                    "eos",
                    tok.eos_token_id,
                    -0.1,
                    self.version,
                    len(prompt),
                )
            )
        return out


LIMITS = Limits(SamplingParams(temperature=0.7), max_new_tokens=64, max_context_len=4096)
SAMPLE = {
    "messages": [{"role": "user", "content": "What is 2+3?"}],
    "tools": [CALC_SPEC],
    "gt": ["5"],
}


def tool_agent(endpoint, sample):
    """A plain `openai` agent: calls until the model stops calling tools."""
    messages = list(sample["messages"])
    for _ in range(3):
        reply = (
            endpoint.client.chat.completions.create(
                model=endpoint.model, messages=messages, tools=sample["tools"], temperature=0.7
            )
            .choices[0]
            .message
        )
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return {"reward": float("5" in (reply.content or "")), "turns": len(messages)}
        for call in reply.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
    return 0.0


def run(agent, samples=(SAMPLE,), g=2, timeout=30.0, engine=None):
    engine = engine or ScriptedEngine()
    with EndpointServer("tiny") as server:
        runner = AgentRunner(agent, server, engine, LIMITS, timeout=timeout)
        return runner.run(list(samples), list(range(len(samples))), g), engine


def test_calls_that_continue_each_other_train_as_one_sequence_of_the_ids_sampled() -> None:
    batch, engine = run(tool_agent, g=3)
    assert [len(g.trajectories) for g in batch.groups] == [3]
    assert batch.metrics["agent/history_rewrites"] == 0.0
    assert sum(engine.batches) == 6 and max(engine.batches) >= 2  # calls went out together
    tok = engine.tokenizer
    call_ids = tok(CALL, add_special_tokens=False)["input_ids"]
    for traj in batch.groups[0].trajectories:
        first, second = traj.agent["calls"]
        assert second["continues"] == [0, 0] and second["added_tokens"] > 0
        generated = [i for i, m in zip(traj.response_ids, traj.response_mask, strict=True) if m]
        assert generated[: len(call_ids)] == call_ids  # the first completion, as sampled
        assert traj.response_ids[: len(call_ids)] == call_ids
        assert len(traj.prompt_ids) == first["prompt_tokens"]
        assert len(traj.prompt_ids) + len(traj.response_ids) == (
            second["prompt_tokens"] + second["completion_tokens"]
        )
        assert "<tool_response>" in tok.decode(traj.response_ids)
        assert traj.agent["reward"] == 1.0 and traj.agent["values"]["turns"] == 4.0
    assert agent_reward(trajectories=batch.groups[0].trajectories) == [1.0, 1.0, 1.0]
    assert batch.metrics["agent/turns"] == 4.0


def rewriting_agent(endpoint, sample):
    """Calls twice; the second call drops the first turn for a summary (a new history)."""
    client = endpoint.client
    first = client.chat.completions.create(
        model=endpoint.model, messages=sample["messages"], tools=sample["tools"]
    )
    assert first.choices[0].message.tool_calls
    summary = [
        {"role": "system", "content": "Summary: the user asked for 2+3; it is 5."},
        {"role": "user", "content": "Answer now."},
    ]
    client.chat.completions.create(model=endpoint.model, messages=summary, tools=sample["tools"])
    return 0.5


def test_a_rewritten_history_trains_as_two_sequences_sharing_the_reward_and_is_counted() -> None:
    batch, _ = run(rewriting_agent, g=2)
    trajs = batch.groups[0].trajectories
    assert len(trajs) == 4 and batch.groups[0].size == 4  # 2 episodes x 2 sequences
    assert batch.metrics["agent/history_rewrites"] == 2.0
    assert batch.metrics["agent/sequences_per_episode"] == 2.0
    assert [t.agent["sequence"] for t in trajs] == [0, 1, 0, 1]
    assert [t.agent["history_rewrite"] for t in trajs] == [False, True, False, True]
    assert {t.agent["reward"] for t in trajs} == {0.5}
    assert all(len(t.agent["calls"]) == 1 for t in trajs)


def test_hanging_raising_and_rewardless_agents_are_dropped_counted_and_dumped() -> None:
    count = iter(range(100))
    lock = threading.Lock()

    def flaky(endpoint, sample):
        with lock:
            n = next(count)
        if n == 0:
            raise KeyError("no such column")
        if n == 1:
            time.sleep(30)  # past the timeout
        tool_agent(endpoint, sample)
        return None if n == 2 else 1.0

    began = time.perf_counter()
    batch, _ = run(flaky, g=5, timeout=1.5)
    assert time.perf_counter() - began < 10
    m = batch.metrics
    assert (m["agent/raised"], m["agent/timeouts"], m["agent/no_reward"]) == (1.0, 1.0, 1.0)
    assert m["agent/dropped"] == 3.0 and len(batch.groups[0].trajectories) == 2
    errors = {ep.kind: ep.error for ep in batch.episodes if ep.error}
    assert "raised KeyError" in errors["raised"] and "test_agents.py" in errors["raised"]
    assert "returned no reward" in errors["no_reward"]
    assert "--agent_timeout 1.5s" in errors["timeouts"]


def test_a_group_left_with_one_episode_is_replaced_like_dynamic_sampling_does() -> None:
    seen: list[str] = []

    def picky(endpoint, sample):
        text = sample["messages"][0]["content"]
        seen.append(text)
        if text == "bad":
            raise RuntimeError("cannot")
        return tool_agent(endpoint, sample)

    prompts = [dict(SAMPLE, messages=[{"role": "user", "content": t}]) for t in ("bad", "ok")]
    source = AgentSource(
        picky,
        ScriptedEngine(),
        prompts,
        _episode(),
        num_generations=2,
        batch_size=2,
        seed=0,
        timeout=20,
        refill_rounds=0,
        model="tiny",
    )
    try:
        groups = source.next_batch(1)
        metrics = source.step_metrics()
        dropped = source.dropped_records(1, 0)
    finally:
        source.stop()
    assert len(groups) <= 2 and all(len(g.trajectories) >= 2 for g in groups)
    assert metrics["agent/refill_rounds"] >= 1.0 and seen.count("bad") >= 2
    assert dropped and dropped[0]["reward"] is None and "cannot" in dropped[0]["error"]
    assert dropped[0]["finish_reason"] == "dropped"


def _episode():
    from agentrl.rollout import EpisodeConfig

    return EpisodeConfig(max_new_tokens=64)


def test_a_step_whose_every_episode_fails_stops_with_the_agents_error() -> None:
    def broken(endpoint, sample):
        raise ImportError("no module named 'mytools'")

    source = AgentSource(
        broken,
        ScriptedEngine(),
        [SAMPLE],
        _episode(),
        num_generations=2,
        batch_size=1,
        seed=0,
        timeout=20,
        refill_rounds=0,
        model="tiny",
    )
    try:
        with pytest.raises(UserCodeError, match=r"every agent episode of step 1.*mytools"):
            source.next_batch(1)
    finally:
        source.stop()


def test_an_agents_sdk_agent_with_its_defaults_reaches_its_own_episode(monkeypatch) -> None:
    # Written as the SDK's README shows: its default client and model API (Responses), a
    # function_tool, Runner.run; it never reads the endpoint. Each episode's two calls (the
    # tool call, then the answer after the tool's result) reach that episode and continue
    # each other, so each trains as one sequence.
    pytest.importorskip("agents")
    from agentrl.utils.imports import load_object

    use_examples(monkeypatch)
    batch, _ = run(load_object("examples.agents_sdk_agent:agent"), g=3)
    trajectories = batch.groups[0].trajectories
    assert [t.agent["reward"] for t in trajectories] == [1.0, 1.0, 1.0]
    assert [len(t.agent["calls"]) for t in trajectories] == [2, 2, 2]
    assert batch.metrics["agent/history_rewrites"] == 0.0


def test_the_sdks_default_client_outside_an_episode_says_where_it_may_be_used() -> None:
    pytest.importorskip("agents")
    from agentrl.agents.sdk_routing import route_sdk_default_client
    from agents import Agent, Runner

    assert route_sdk_default_client()
    with pytest.raises(Exception) as raised:
        Runner.run_sync(Agent(name="a", instructions="Be brief."), "hi")
    chain, error = [], raised.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("outside an agentrl episode" in text for text in chain), chain


def test_an_async_agent_and_a_streaming_client_are_served() -> None:
    async def agent(endpoint, sample):
        stream = await endpoint.async_client.chat.completions.create(
            model=endpoint.model, messages=sample["messages"], tools=sample["tools"], stream=True
        )
        calls = []
        async for chunk in stream:
            calls += chunk.choices[0].delta.tool_calls or [] if chunk.choices else []
        return float(calls[0].function.name == "calculate_math")

    batch, _ = run(agent, g=2)
    assert [t.agent["reward"] for t in batch.groups[0].trajectories] == [1.0, 1.0]


CLIENT = """
import json, sys, urllib.request, urllib.error
url, key = sys.argv[1], sys.argv[2]
body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
for auth in ([], ["Bearer wrong"], [f"Bearer {key}"]):
    req = urllib.request.Request(url + "/chat/completions", body, method="POST")
    for value in auth:
        req.add_header("Authorization", value)
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            print(resp.status, json.loads(resp.read())["object"])
    except urllib.error.HTTPError as exc:
        print(exc.code, json.loads(exc.read())["error"]["code"])
"""


def test_another_process_without_the_key_is_refused() -> None:
    engine = ScriptedEngine()
    with EndpointServer("tiny") as server:
        runner = AgentRunner(tool_agent, server, engine, LIMITS, timeout=30)
        episode = runner._episode(0, 0, SAMPLE, _Direct(engine))
        assert server.host == "127.0.0.1"
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, episode.base_url, "not-the-key"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stdout.split("\n")[:2] == ["401 invalid_api_key", "401 invalid_api_key"], out
        assert server.refused == 3
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, episode.base_url, server.api_key],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stdout.split("\n")[2] == "200 chat.completion", out
        models = urllib.request.Request(
            server.url + "/v1/models", headers={"Authorization": f"Bearer {server.api_key}"}
        )
        with urllib.request.urlopen(models, timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "tiny"


class _Direct:
    """A batcher stand-in that sends each request to the engine at once."""

    reuse = False

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine

    def submit(self, prompt, params, budget, n, key):
        return self.engine.generate([prompt] * n, params, max_new_tokens=budget)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["openai_agent", "langgraph_agent", "agents_sdk_agent"])
def test_the_examples_multi_turn_calls_join_into_one_sequence(name, monkeypatch) -> None:
    if name == "langgraph_agent":
        pytest.importorskip("langgraph")
    if name == "agents_sdk_agent":
        pytest.importorskip("agents")
        pytest.importorskip("langchain_openai")
    monkeypatch.chdir(REPO)
    from agentrl.utils.imports import load_object

    sample = dict(SAMPLE, gt=["5"])
    batch, _ = run(load_object(f"examples.{name}:agent"), samples=[sample], g=2)
    assert batch.metrics["agent/dropped"] == 0.0, [ep.error for ep in batch.episodes]
    assert batch.metrics["agent/history_rewrites"] == 0.0
    for traj in batch.groups[0].trajectories:
        assert [c["continues"] for c in traj.agent["calls"]] == [None, [0, 0]]
        assert traj.agent["reward"] == 1.0


@pytest.fixture(scope="module")
def model_dir(run_files: Path) -> Path:
    return run_files / "model"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["openai_agent", "langgraph_agent"])
def test_the_example_agents_train_from_the_command_line(
    name, model_dir, tmp_path, monkeypatch, capsys
) -> None:
    import gzip

    from agentrl.cli import main as cli_main
    from agentrl.data.synthetic import TaskGenerator, write_tasks
    from agentrl.observability import read_metrics

    if name == "langgraph_agent":
        pytest.importorskip("langgraph")
    generator = TaskGenerator(seed=5)
    data = tmp_path / "tasks.jsonl"
    write_tasks(str(data), list(generator.tasks(12)), generator.tools())
    use_examples(monkeypatch)
    flags = (
        f"--agent examples.{name}:agent --model {model_dir} --data {data} --eval_ratio 0.2 "
        f"--total_steps 2 --save_dir {tmp_path} --save_weight run --batch_size 1 "
        "--num_generations 2 --max_gen_len 8 --eval_samples 1 --eval_max_gen_len 8 "
        "--eval_interval 0 --progress 0 --report 0 --save_interval 0 --dump_rollouts 1"
    )
    code = cli_main(["train", *flags.split()])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err
    assert "finished: 2/2 steps" in out and "reward: agent x 1" in out
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2 and train[0]["agent/episodes"] == 2.0
    assert "agent/history_rewrites" in train[0] and "reward_fn/agent/mean" in train[0]
    with gzip.open(tmp_path / "run" / "rollouts" / "step-000001.jsonl.gz", "rt") as handle:
        records = [json.loads(line) for line in handle]
    calls = records[0]["agent"]["calls"]
    assert calls and calls[0]["prompt_tokens"] > 0 and calls[0]["completion_tokens"] > 0
    assert records[0]["tokens"]["prompt"] == calls[0]["prompt_tokens"]


def test_an_agent_that_cannot_load_or_be_called_is_a_usage_error() -> None:
    from agentrl.agents.endpoint import load_agent
    from agentrl.errors import UsageError

    with pytest.raises(UsageError, match=r"--agent 'nope\.mod:fn': cannot import module"):
        load_agent("nope.mod:fn")
    with pytest.raises(UsageError, match=r"called as fn\(endpoint, sample\)"):
        load_agent(lambda sample: 0.0)
    assert load_agent(tool_agent) is tool_agent


def test_n_choices_are_branches_and_the_one_continued_keeps_its_sequence() -> None:
    def agent(endpoint, sample):
        client = endpoint.client
        messages = [{"role": "developer", "content": "Be brief."}, *sample["messages"]]
        first = client.chat.completions.create(
            model=endpoint.model, messages=messages, tools=sample["tools"], n=2
        )
        second = first.choices[1].message  # the agent goes on from the second choice
        messages += [second.model_dump(), {"role": "tool", "tool_call_id": "x", "content": "5"}]
        client.chat.completions.create(model=endpoint.model, messages=messages)
        client.chat.completions.create(
            model=endpoint.model, messages=messages, tools=sample["tools"]
        )
        return 1.0

    batch, _ = run(agent, g=1)
    trajs = batch.groups[0].trajectories
    m = batch.metrics
    assert (m["agent/branches"], m["agent/history_rewrites"]) == (1.0, 1.0)
    # one choice alone, the other continued by the third call (the scripted choices are
    # the same text: the first that matches is taken); the second call (no tools: another
    # system prompt) starts over
    chains = sorted([c["call"] for c in t.agent["calls"]] for t in trajs)
    assert chains == [[0], [0, 2], [1]]
