"""`agentrl serve`: a policy behind the run's OpenAI-compatible endpoint, outside a run.

A scripted engine stands in for the policy (it calls the calculator until the context
holds a tool result), so the `openai` client's view is pinned without a model: tool calls
in and out, streaming, text completions, models, batching, and the errors a client gets;
the Responses API, served and inside a run (recorded token in, token out). The command
itself runs once on the tiny model, as a user starts and stops it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from agentrl.agents.recorder import Limits
from agentrl.agents.runner import AgentRunner
from agentrl.agents.server import EndpointServer
from agentrl.agents.serving import ServedPolicy
from agentrl.commands.serve import API_KEY_ENV, api_key
from agentrl.errors import EXIT_SIGTERM
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.engines import CALC_SPEC as CALC
from tests.fakes.engines import ScriptedEngine, tool_call
from tests.fakes.repo import REPO

openai = pytest.importorskip("openai")

QUESTION = [{"role": "user", "content": "What is 2+3?"}]
LIMITS = Limits(SamplingParams(temperature=0.7), 64, 4096, refuse_longer=True)


def calculator(turn: int, context: str) -> str:
    if "<tool_response>" in context:
        return "<answer>5</answer>"
    return tool_call("calculate_math", '{"expression": "2+3"}')


@pytest.fixture
def served() -> Iterator[tuple[ServedPolicy, ScriptedEngine]]:
    engine = ScriptedEngine(calculator)
    # No throughput line while a test runs: one test reads the counts itself.
    with ServedPolicy(engine, engine.tokenizer, LIMITS, "tiny", log_every=3600) as policy:
        yield policy, engine


def client(policy: ServedPolicy, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=policy.url, api_key=key or policy.api_key, max_retries=0)


def test_a_tool_call_goes_out_and_its_result_comes_back_in(served) -> None:
    policy, _ = served
    assert policy.server.host == "127.0.0.1"
    chat = client(policy).chat.completions
    reply = chat.create(model="tiny", messages=QUESTION, tools=[CALC], temperature=0)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "calculate_math"
    assert json.loads(call.function.arguments) == {"expression": "2+3"}
    history = [
        *QUESTION,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "5"},
    ]
    final = chat.create(model="tiny", messages=history, tools=[CALC]).choices[0]
    assert final.finish_reason == "stop" and "5" in (final.message.content or "")
    assert not final.message.tool_calls
    # Nothing is kept between requests: a server holds no episode.
    assert policy.recorder.calls == []
    # Without tools offered, the same text is content, not a call.
    plain = chat.create(model="tiny", messages=QUESTION).choices[0]
    assert plain.finish_reason == "stop" and "<tool_call>" in plain.message.content


def test_a_stream_carries_the_call_and_the_finish_reason(served) -> None:
    policy, _ = served
    stream = client(policy).chat.completions.create(
        model="tiny",
        messages=QUESTION,
        tools=[CALC],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    calls = [c for ch in chunks for choice in ch.choices for c in choice.delta.tool_calls or []]
    assert [c.function.name for c in calls] == ["calculate_math"]
    reasons = [choice.finish_reason for ch in chunks for choice in ch.choices]
    assert reasons[-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_models_text_completions_and_the_throughput_line(served) -> None:
    policy, engine = served
    api = client(policy)
    assert [m.id for m in api.models.list().data] == ["tiny"]
    done = api.completions.create(model="tiny", prompt=["2+3=", "7*6="], max_tokens=8)
    assert engine.calls == [2]  # the prompts of one request are sampled together
    assert [c.index for c in done.choices] == [0, 1]
    assert all(c.text.startswith("<tool_call>") for c in done.choices)
    assert done.usage.completion_tokens == 16  # the scripted call, cut at 8 tokens each
    assert {c.finish_reason for c in done.choices} == {"stop"}
    echoed = api.completions.create(model="tiny", prompt="2+3=", max_tokens=4, echo=True)
    assert echoed.choices[0].text.startswith("2+3=<tool_call>")
    as_ids = api.completions.create(model="tiny", prompt=[[1, 2, 3]], max_tokens=4)
    assert as_ids.usage.prompt_tokens == 3
    streamed = api.completions.create(model="tiny", prompt="2+3=", max_tokens=4, stream=True)
    assert "".join(c.choices[0].text for c in streamed).startswith("<tool_call>")
    line = policy.throughput.line(busy=0)
    assert line is not None and line.startswith("served: ") and "requests/s" in line
    assert "tokens/s" in line and "(4 requests in" in line
    assert policy.throughput.line(busy=0) is None  # read and reset


def test_concurrent_requests_share_engine_calls(served) -> None:
    policy, engine = served
    api = client(policy)
    start = threading.Barrier(8)
    replies: list[str] = []

    def one() -> None:
        start.wait()
        reply = api.chat.completions.create(model="tiny", messages=QUESTION, tools=[CALC])
        replies.append(reply.choices[0].finish_reason)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert replies == ["tool_calls"] * 8
    assert sum(engine.calls) == 8 and max(engine.calls) > 1, engine.calls


def test_the_throughput_line_is_logged_while_requests_come() -> None:
    engine = ScriptedEngine(calculator)
    lines: list[str] = []
    with ServedPolicy(
        engine, engine.tokenizer, LIMITS, "tiny", log_every=0.05, log=lines.append
    ) as policy:
        client(policy).chat.completions.create(model="tiny", messages=QUESTION)
        for _ in range(100):
            if lines:
                break
            time.sleep(0.05)
    assert len(lines) == 1 and lines[0].startswith("served: "), lines


def test_a_wrong_key_and_bad_requests_get_openai_errors(served) -> None:
    policy, _ = served
    with pytest.raises(openai.AuthenticationError) as refused:
        client(policy, "wrong").chat.completions.create(model="tiny", messages=QUESTION)
    assert refused.value.status_code == 401
    assert refused.value.body["code"] == "invalid_api_key"
    api = client(policy)
    bad = [
        {"messages": []},
        {"messages": QUESTION, "tools": [CALC], "tool_choice": {"function": {"name": "nope"}}},
        {"messages": QUESTION, "n": 99},
        {"messages": [{"role": "user", "content": "2+3 " * 5000}]},
    ]
    messages = []
    for body in bad:
        with pytest.raises(openai.BadRequestError) as error:
            api.chat.completions.create(model="tiny", **body)
        assert error.value.status_code == 400
        assert error.value.body["type"] == "invalid_request_error"
        messages.append(error.value.body["message"])
    assert "'messages' must be a non-empty list" in messages[0]
    assert "'nope'" in messages[1] and "'n'" in messages[2]
    assert "over the 4096 served" in messages[3]
    with pytest.raises(openai.BadRequestError, match="'logprobs' is not served"):
        api.completions.create(model="tiny", prompt="2+3=", logprobs=2)
    with pytest.raises(openai.NotFoundError, match="served: /v1/models, /v1/chat/completions"):
        api.embeddings.create(model="tiny", input="x")


def test_the_key_comes_from_the_option_the_environment_or_is_made(monkeypatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert api_key("given") == ("given", False)
    assert api_key(None) == ("from-env", False)
    monkeypatch.delenv(API_KEY_ENV)
    made, fresh = api_key(None)
    assert fresh and made.startswith("agentrl-") and made != api_key(None)[0]


def test_a_long_prompt_is_refused_when_served_and_cut_in_a_run() -> None:
    from agentrl.agents.recorder import RequestError, fit_context

    short = replace(LIMITS, max_context_len=4)
    with pytest.raises(RequestError, match="10 tokens, over the 4 served"):
        fit_context(list(range(10)), short)
    assert fit_context(list(range(10)), replace(short, refuse_longer=False)) == [6, 7, 8, 9]


RESPONSES_TOOL = {"type": "function", **CALC["function"]}


def test_the_responses_api_calls_a_tool_and_continues(served) -> None:
    policy, _ = served
    api = client(policy)
    first = api.responses.create(
        model="tiny", input="What is 2+3?", instructions="Be brief.", tools=[RESPONSES_TOOL]
    )
    assert first.status == "completed" and first.model == "tiny"
    (call,) = first.output
    assert call.type == "function_call" and call.name == "calculate_math"
    assert json.loads(call.arguments) == {"expression": "2+3"}
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "5"}
    # Continued by id, or by sending the whole conversation back: the same answer.
    by_id = api.responses.create(
        model="tiny", previous_response_id=first.id, input=[result], tools=[RESPONSES_TOOL]
    )
    items = [{"role": "user", "content": "What is 2+3?"}, call.model_dump(), result]
    by_list = api.responses.create(model="tiny", input=items, tools=[RESPONSES_TOOL])
    assert by_id.output_text == by_list.output_text == "<answer>5</answer>"
    assert by_id.usage.input_tokens > first.usage.input_tokens
    events = list(
        api.responses.create(model="tiny", input="2+3?", tools=[RESPONSES_TOOL], stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds
    assert events[-1].response.output[0].name == "calculate_math"
    with pytest.raises(openai.BadRequestError, match="no such response"):
        api.responses.create(model="tiny", previous_response_id="resp_gone", input="hi")
    with pytest.raises(openai.BadRequestError, match="'web_search' is not served"):
        api.responses.create(model="tiny", input="hi", tools=[{"type": "web_search"}])


def responses_agent(endpoint, sample):
    """An agent on the Responses API: sends its whole conversation back each turn."""
    tools = [{"type": "function", **t["function"]} for t in sample["tools"]]
    items = list(sample["messages"])
    for _ in range(3):
        reply = endpoint.client.responses.create(model=endpoint.model, input=items, tools=tools)
        items += [item.model_dump(exclude_none=True) for item in reply.output]
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            return float("5" in reply.output_text)
        items += [
            {"type": "function_call_output", "call_id": c.call_id, "output": "5"} for c in calls
        ]
    return 0.0


def responses_agent_by_id(endpoint, sample):
    """The same agent continuing each response by its id."""
    tools = [{"type": "function", **t["function"]} for t in sample["tools"]]
    reply = endpoint.client.responses.create(
        model=endpoint.model, input=sample["messages"], instructions="Be brief.", tools=tools
    )
    result = {"type": "function_call_output", "call_id": reply.output[0].call_id, "output": "5"}
    reply = endpoint.client.responses.create(
        model=endpoint.model, previous_response_id=reply.id, input=[result], tools=tools
    )
    return float("5" in reply.output_text)


@pytest.mark.parametrize("agent", [responses_agent, responses_agent_by_id])
def test_an_agent_on_the_responses_api_trains_as_one_sequence_of_its_ids(agent) -> None:
    engine = ScriptedEngine(calculator)
    sample = {"messages": QUESTION, "tools": [CALC], "gt": ["5"]}
    with EndpointServer("tiny") as server:
        runner = AgentRunner(agent, server, engine, LIMITS, timeout=30)
        batch = runner.run([sample], [0], 2)
    assert [len(g.trajectories) for g in batch.groups] == [2]
    assert batch.metrics["agent/history_rewrites"] == 0.0
    call = tool_call("calculate_math", '{"expression": "2+3"}')
    call_ids = engine.tokenizer(call, add_special_tokens=False)["input_ids"]
    for traj in batch.groups[0].trajectories:
        first, second = traj.agent["calls"]
        assert second["continues"] == [0, 0] and second["added_tokens"] > 0
        assert len(traj.prompt_ids) == first["prompt_tokens"]
        assert traj.response_ids[: len(call_ids)] == call_ids  # the first reply, as sampled
        assert "<tool_response>" in engine.tokenizer.decode(traj.response_ids)
        assert traj.agent["reward"] == 1.0


@pytest.mark.slow
def test_the_command_prints_its_key_serves_and_stops_on_sigterm() -> None:
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    argv = [sys.executable, "-m", "agentrl.cli", "serve", "tiny", "--port", "0"]
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("serving tiny as model 'tiny' on http://127.0.0.1:"), lines
        url = lines[0].split(" on ", 1)[1].strip()
        assert lines[1].startswith("API key: agentrl-"), lines
        key = lines[1].split()[2]
        api = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=30)
        reply = api.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4)
        assert reply.choices[0].finish_reason in ("stop", "length")
        assert reply.usage.completion_tokens <= 4
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == EXIT_SIGTERM
        assert "stopped by SIGTERM" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


LM_EVAL_TASK = """
task: agentrl_served_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def test_lm_eval_scores_a_task_through_the_chat_completions_backend(tmp_path, monkeypatch) -> None:
    # lm-eval's `local-chat-completions` model against the served policy, on a task of two
    # local records: the policy answers "5" to both, so exactly one matches.
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    data = tmp_path / "arith.jsonl"
    rows = [
        {"question": "What is 2+3?", "answer": "5"},
        {"question": "What is 1+1?", "answer": "2"},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (tmp_path / "task.yaml").write_text(LM_EVAL_TASK.format(data=data), encoding="utf-8")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    engine = ScriptedEngine(lambda turn, context: "5")
    with ServedPolicy(engine, engine.tokenizer, LIMITS, "tiny", log_every=3600) as policy:
        monkeypatch.setenv("OPENAI_API_KEY", policy.api_key)
        out = lm_eval.simple_evaluate(
            model="local-chat-completions",
            model_args=f"model=tiny,base_url={policy.url}/chat/completions,num_concurrent=2,"
            "max_retries=1,tokenized_requests=False",
            tasks=["agentrl_served_arith"],
            task_manager=TaskManager(include_path=str(tmp_path)),
            apply_chat_template=True,
        )
    result = out["results"]["agentrl_served_arith"]
    assert result["sample_len"] == 2 and result["exact_match,none"] == 0.5
    assert sum(engine.calls) == 2  # both records reached the policy
