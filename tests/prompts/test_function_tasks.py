"""The function-calling task generator and `agentrl gen-data --task function_calling`."""

from __future__ import annotations

import collections
import json
import random
import re

import pytest
from agentrl.cli import main
from agentrl.data import PromptPool
from agentrl.data.function_calling import calls_ground_truth
from agentrl.data.function_tasks import CALL_KINDS, CallTaskGenerator
from agentrl.sft.data import build_examples
from agentrl.sft.tasks import load_demos, tool_env
from agentrl.tools import supported_tool_names

from tests.fakes.models import small_tokenizer


@pytest.fixture(scope="module")
def tasks() -> list:
    return list(CallTaskGenerator(seed=7).tasks(400))


def test_the_stream_is_seeded_and_each_task_depends_on_its_index_alone(tasks) -> None:
    again = CallTaskGenerator(seed=7)
    assert [t.record() for t in again.tasks(20, start=100)] == [t.record() for t in tasks[100:120]]
    other = [t.record() for t in CallTaskGenerator(seed=8).tasks(20)]
    assert other != [t.record() for t in tasks[:20]]


def test_every_kind_and_both_languages_are_drawn(tasks) -> None:
    kinds = collections.Counter(t.kind for t in tasks)
    assert set(kinds) == set(CALL_KINDS) and min(kinds.values()) > 20
    langs = collections.Counter(t.lang for t in tasks)
    assert langs["zh"] > 120 and langs["en"] > 120
    chinese = [t.text for t in tasks if t.lang == "zh"]
    assert all(re.search(r"[\u4e00-\u9fff]", text) for text in chinese)


def test_each_kind_has_the_shape_of_its_category(tasks) -> None:
    for task in tasks:
        offered = supported_tool_names(task.tools)
        called = [c["name"] for c in task.calls]
        assert set(called) <= set(offered)
        assert len(task.ground_truth) == len(task.calls)
        if task.kind == "simple":
            assert len(offered) == 1 and len(called) == 1
        elif task.kind == "multiple":
            assert len(offered) >= 2 and len(called) == 1
        elif task.kind == "parallel":
            assert len(offered) == 1 and len(called) >= 2
            assert len({json.dumps(c["arguments"], sort_keys=True) for c in task.calls}) >= 2
        elif task.kind == "parallel_multiple":
            assert len(set(called)) >= 2
        else:
            assert task.kind == "irrelevance" and called == [] and task.ground_truth == []


def test_irrelevance_offers_the_requests_neighbours_or_other_domains() -> None:
    """About half the irrelevant requests sit beside the other functions of their own domain
    (names that sound right and cannot serve them), the rest beside other domains'; the
    function a request needs is never offered."""
    rng = random.Random(0)
    near = far = 0
    for _ in range(400):
        (asked,), offered = CallTaskGenerator._functions(rng, "irrelevance")
        assert asked not in offered and offered
        domains = {f.domain for f in offered}
        if domains == {asked.domain}:
            near += 1
        else:
            assert asked.domain not in domains
            far += 1
    assert 120 < near < 240 and far > 160


def test_arguments_cover_every_type_and_optional_defaults(tasks) -> None:
    types: set[str] = set()
    omitted_default = nested = False
    for task in tasks:
        specs = {s["function"]["name"]: s["function"]["parameters"] for s in task.tools}
        for call, truth in zip(task.calls, task.ground_truth, strict=True):
            properties = specs[call["name"]]["properties"]
            for name, value in call["arguments"].items():
                types.add(properties[name]["type"])
                if "enum" in properties[name]:
                    types.add("enum")
                    assert value in properties[name]["enum"]
                nested = nested or isinstance(value, dict)
            (answer,) = truth.values()
            for name, spec in properties.items():
                if name not in call["arguments"] and "default" in spec:
                    omitted_default = True
                    assert answer[name] == ["", spec["default"]]
    assert types >= {"string", "integer", "number", "boolean", "array", "object", "enum"}
    assert omitted_default and nested


def test_every_functions_answer_is_valid_by_the_reward_and_a_bare_call_is_not() -> None:
    """Each catalogue function's demonstrated calls pass the `function_call` reward's checker
    against the task's own ground truth; a call left without its optional arguments passes
    only where the request did not state them."""
    from agentrl.data.function_catalog import FUNCTIONS
    from agentrl.rewards import score_function_calls

    tasks = [t for t in CallTaskGenerator(seed=3, zh_ratio=0.5).tasks(600) if t.calls]
    assert {c["name"] for t in tasks for c in t.calls} == {f.name for f in FUNCTIONS}

    def completion(calls) -> str:
        return "".join(
            f"<tool_call>{json.dumps({'name': c['name'], 'arguments': c['arguments']})}</tool_call>"
            for c in calls
        )

    rows = [
        {"tools": t.tools, "ground_truth": t.ground_truth, "completion": completion(t.calls)}
        for t in tasks
    ]
    assert set(score_function_calls(rows, tool_format="hermes").details["valid"]) == {1.0}
    required = {f.name: set(f.spec["function"]["parameters"]["required"]) for f in FUNCTIONS}
    bare, stated = [], []
    for task in tasks:
        calls = [
            {
                "name": c["name"],
                "arguments": {k: v for k, v in c["arguments"].items() if k in required[c["name"]]},
            }
            for c in task.calls
        ]
        bare.append({**rows[len(bare)], "completion": completion(calls)})
        stated.append(calls != task.calls)
    valid = score_function_calls(bare, tool_format="hermes").details["valid"]
    outcomes = set()
    for task, ok, dropped in zip(tasks, valid, stated, strict=True):
        # Leaving an argument out passes where its answer accepts "" (not asked for, or
        # asked for with its default value).
        omissible = all(
            "" in truth[c["name"]][k]
            for truth, c in zip(task.ground_truth, task.calls, strict=True)
            for k in c["arguments"]
            if k not in required[c["name"]]
        )
        assert bool(ok) == (not dropped or omissible), task.text
        outcomes.add((dropped, bool(ok)))
    assert outcomes == {(False, True), (True, True), (True, False)}


def test_the_answer_accepts_both_spellings_of_a_place(tasks) -> None:
    zh = next(
        t for t in tasks if t.lang == "zh" and t.calls and t.calls[0]["name"] == "get_weather"
    )
    city = zh.calls[0]["arguments"]["city"]
    accepted = zh.ground_truth[0]["get_weather"]["city"]
    assert accepted[0] == city and any(re.search(r"[\u4e00-\u9fff]", v) for v in accepted)
    assert accepted[1] in zh.text
    # Without the other spellings it is exactly the reader's conversion of the calls.
    plain = calls_ground_truth([(c["name"], c["arguments"]) for c in zh.calls], zh.tools)
    assert plain[0]["get_weather"]["city"] == [city]


def test_cli_writes_records_the_pool_reads_as_function_calling(tmp_path) -> None:
    out = tmp_path / "calls.jsonl"
    assert main(["gen-data", "--task", "function_calling", "-n", "60", "-o", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    pool = PromptPool(str(out), require_gt=False, strict=True)
    assert len(pool) == 60 and pool.data_formats == {"openai": 60}
    for record, sample in zip(records, pool, strict=True):
        assert sample.messages == record["messages"][:-1]  # the target turn is cut
        assert sample["ground_truth"] == record["ground_truth"]
        assert sample.meta["kind"] == record["kind"]
    again = tmp_path / "again.jsonl"
    assert main(["gen-data", "--task", "function_calling", "-n", "60", "-o", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_cli_refuses_options_of_the_tool_use_tasks(tmp_path, capsys) -> None:
    out = str(tmp_path / "x.jsonl")
    assert main(["gen-data", "--task", "function_calling", "--digits", "7", "-o", out]) != 0
    assert "--digits" in capsys.readouterr().err


def test_cli_mix_sets_the_kinds_weights(tmp_path, capsys) -> None:
    out = tmp_path / "calls.jsonl"
    argv = ["gen-data", "--task", "function_calling", "-n", "200", "-o", str(out)]
    assert main([*argv, "--mix", "irrelevance=3,parallel=1"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    kinds = collections.Counter(json.loads(line)["kind"] for line in lines)
    assert (
        set(kinds) == {"irrelevance", "parallel"} and kinds["irrelevance"] > 2 * kinds["parallel"]
    )
    for bad, said in (
        ("irrelevance=1,chat=1", "chat"),
        ("simple=-1,multiple=1", ">= 0"),
        ("simple=nan,multiple=1", "finite"),
        ("simple=inf", "finite"),
        ("simple=1,simple=2", "twice"),
    ):
        assert main([*argv, "--mix", bad]) == 2
        assert said in capsys.readouterr().err


def test_demonstrations_render_in_the_models_template_and_call_format(tmp_path) -> None:
    out = tmp_path / "demos.jsonl"
    args = ["gen-data", "--task", "function_calling", "--sft", "-n", "40", "--seed", "2"]
    assert main([*args, "-o", str(out)]) == 0
    conversations, stats = load_demos([out])
    assert stats.kept == 40
    tok = small_tokenizer()
    examples = build_examples(conversations, tok, tool_env(tok).render, max_len=4096)
    assert len(examples) == 40
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for record, example in zip(records, examples, strict=True):
        pairs = zip(example.input_ids, example.loss_mask, strict=True)
        target = tok.decode([t for t, m in pairs if m])
        calls = record["conversations"][-1]["tool_calls"]
        assert target.count("<tool_call>") == len(calls)
        for call in calls:
            assert f'"name": "{call["function"]["name"]}"' in target
        if not calls:
            assert record["kind"] == "irrelevance" and "<tool_call>" not in target
