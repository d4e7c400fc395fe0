"""`agentrl gen-data` and the synthetic task generator."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest
from agentrl.chat import render_chat
from agentrl.cli import main
from agentrl.data import PromptPool
from agentrl.data.arith import ExprConfig, random_expression, render_expression
from agentrl.data.synthetic import TaskConfig, TaskGenerator, generate_tasks, parse_mix
from agentrl.parsing import canonicalize_expression, extract_expressions, format_number, safe_eval
from agentrl.tools import builtin_registry, tool_message


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "tasks.jsonl"
    assert main(["gen-data", "-n", "1000", "-o", str(path)]) == 0
    return path


def test_cli_output_loads_whole_into_the_prompt_pool(tasks_file) -> None:
    pool = PromptPool(str(tasks_file), strict=True)
    assert len(pool) == 1000 and pool.stats["kept"] == 1000
    kinds = collections.Counter(s.meta["kind"] for s in pool)
    assert set(kinds) == {"math", "unit", "time", "none"} and kinds["math"] > 700
    langs = collections.Counter(s.meta["lang"] for s in pool)
    assert langs["zh"] > 400 and langs["en"] > 400


def test_every_gt_is_the_rust_evaluators_value(tasks_file) -> None:
    checked = 0
    for line in tasks_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["kind"] != "math":
            continue
        expressions = [c["arguments"]["expression"] for c in record["calls"]]
        assert record["gt"] == [format_number(safe_eval(e)) for e in expressions]
        assert {c["name"] for c in record["calls"]} == {"calculate_math"}
        checked += 1
    assert checked > 700


def test_expressions_are_found_by_the_reward_extractor_in_order(tasks_file) -> None:
    for line in tasks_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        text = record["messages"][0]["content"]
        found = [canonicalize_expression(e) for e in extract_expressions(text, 16)]
        if record["kind"] == "math":
            wanted = [
                canonicalize_expression(c["arguments"]["expression"]) for c in record["calls"]
            ]
            assert found == wanted, text
            assert 1 <= len(wanted) <= 3 and len(record["gt"]) == len(wanted)
            # The call copies the text's own spelling of the expression.
            assert all(c["arguments"]["expression"] in text for c in record["calls"])
        else:
            assert found == [], text


def test_non_math_tasks_are_solved_by_their_calls(tasks_file) -> None:
    registry = builtin_registry()
    for line in tasks_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["kind"] == "none":
            assert record["calls"] == [] and re.fullmatch(r"\d+", record["gt"][0])
        elif record["kind"] == "unit":
            result = registry.run("unit_converter", record["calls"][0]["arguments"])
            assert record["gt"] == [result["result"]]
        elif record["kind"] == "time":
            result = registry.run("get_current_time", record["calls"][0]["arguments"])
            assert record["gt"] == [result["datetime"]]


def test_generation_is_deterministic_and_index_addressable() -> None:
    first = generate_tasks(30, seed=7)
    again = generate_tasks(30, seed=7)
    assert [t.text for t in first] == [t.text for t in again]
    tail = generate_tasks(10, seed=7, start=20)
    assert [t.text for t in tail] == [t.text for t in first[20:]]
    assert next(t.id for t in tail) == "s7-0000020"
    other = generate_tasks(30, seed=8)
    assert [t.text for t in other] != [t.text for t in first]


def test_cli_is_deterministic_and_writes_demonstrations(tmp_path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["gen-data", "-n", "50", "--seed", "3", "-o", str(a)]) == 0
    assert main(["gen-data", "-n", "50", "--seed", "3", "-o", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    demos = tmp_path / "demos.jsonl"
    assert main(["gen-data", "-n", "50", "--seed", "3", "--sft", "-o", str(demos)]) == 0
    prompts = [json.loads(x) for x in a.read_text(encoding="utf-8").splitlines()]
    shown = [json.loads(x) for x in demos.read_text(encoding="utf-8").splitlines()]
    assert [p["id"] for p in prompts] == [d["id"] for d in shown]
    assert all(
        p["messages"][0] == d["conversations"][1] for p, d in zip(prompts, shown, strict=True)
    )


def test_demonstration_conversation_shape() -> None:
    registry = builtin_registry()
    generator = TaskGenerator(seed=11)
    tasks = list(generator.tasks(200))
    math_task = next(t for t in tasks if t.kind == "math" and len(t.calls) >= 2)
    record = math_task.demo_record(generator.tools())
    convo = record["conversations"]
    assert [m["role"] for m in convo] == ["system", "user", "assistant"] + ["tool"] * len(
        math_task.calls
    ) + ["assistant"]
    assert convo[2]["tool_calls"] == math_task.calls and convo[2]["content"] == ""
    for message, call in zip(convo[3:-1], math_task.calls, strict=True):
        expected = registry.run("calculate_math", call["arguments"])
        assert message["content"] == tool_message(expected)
    assert convo[-1]["content"] == "<answer>" + ", ".join(math_task.gt) + "</answer>"
    distractor = next(t for t in tasks if t.kind == "none")
    assert [m["role"] for m in distractor.demo_messages()] == ["system", "user", "assistant"]
    # Demonstrations load into the pool, and render through the chat template.
    text = render_chat(convo, record["tools"], add_generation_prompt=False)
    dialogue = text.split("<|im_start|>user\n", 1)[1]  # past the tools preamble
    assert dialogue.count("<tool_call>") == len(math_task.calls)
    assert text.endswith(math_task.answer + "<|im_end|>\n")


def test_demonstration_file_loads_as_prompts(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    assert main(["gen-data", "-n", "40", "--sft", "-o", str(path)]) == 0
    pool = PromptPool(str(path), prompt_only=True)
    assert len(pool) == 40
    assert all(s.messages[-1]["role"] == "user" for s in pool)
    assert all(s.messages[0]["content"].count("calculate_math") >= 1 for s in pool)


def test_difficulty_knobs_are_respected(tmp_path) -> None:
    path = tmp_path / "k.jsonl"
    argv = ["gen-data", "-n", "200", "-o", str(path), "--mix", "math=1", "--digits", "2"]
    argv += ["--min-exprs", "2", "--max-exprs", "2", "--operators", "+,*", "--functions", ""]
    argv += ["--paren-prob", "0", "--max-ops", "1", "--fullwidth-ratio", "0", "--zh-ratio", "0"]
    assert main(argv) == 0
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert record["kind"] == "math" and record["lang"] == "en"
        assert len(record["calls"]) == 2 and record["difficulty"]["exprs"] == 2
        for call in record["calls"]:
            expr = call["arguments"]["expression"].replace(" ", "")
            expr = expr.replace("×", "*")
            assert re.fullmatch(r"\d{1,2}(\.\d)?[+*]\d{1,2}(\.\d)?", expr), expr


def test_fullwidth_tasks_exist_and_evaluate() -> None:
    config = TaskConfig(mix=(("math", 1.0),), fullwidth_ratio=1.0)
    tasks = generate_tasks(20, seed=1, config=config)
    assert all(re.search(r"[０-９]", t.text) for t in tasks)
    for task in tasks:
        assert [
            format_number(safe_eval(c["arguments"]["expression"])) for c in task.calls
        ] == task.gt


def test_expression_renderings_agree_on_value() -> None:
    import random

    rng = random.Random(5)
    cfg = ExprConfig(functions=("sqrt", "abs", "round", "log", "exp", "sin"), func_prob=0.5)
    for _ in range(200):
        pieces = random_expression(rng, cfg)
        try:
            value = safe_eval("".join(pieces))
        except ValueError:
            continue
        for style in ("compact", "spaced", "symbols", "fullwidth"):
            for caret in (False, True):
                assert safe_eval(render_expression(pieces, style, caret)) == value


def test_bad_options_are_reported(capsys) -> None:
    assert main(["gen-data", "-n", "5", "--operators", "+,@"]) == 2
    assert main(["gen-data", "-n", "5", "--mix", "math"]) == 2
    assert main(["gen-data", "-n", "5", "--max-exprs", "4"]) == 2
    assert "agentrl gen-data:" in capsys.readouterr().err
    with pytest.raises(ValueError):
        parse_mix("nope")


def _head_math_tasks(n: int = 400):
    tasks = list(TaskGenerator(seed=4).tasks(n))
    return tasks, [t for t in tasks if t.head_math]


def test_head_math_is_one_whole_number_operation_with_a_small_result() -> None:
    tasks, easy = _head_math_tasks()
    assert 0.15 < len(easy) / len(tasks) < 0.35  # about a quarter of the tasks
    marked = unmarked = 0
    for task in (t for t in tasks if t.kind == "math"):
        for i, call in enumerate(task.calls):
            canon = canonicalize_expression(call["arguments"]["expression"])
            simple = re.fullmatch(r"\d+(\+|-|\*\*|\*|%|//)\d+", canon) is not None
            small = abs(float(task.results[i]["value"])) < 10_000
            assert (i in task.head_math) == (simple and small), (canon, task.head_math)
            marked += i in task.head_math
            unmarked += i not in task.head_math
    assert marked > 50 and unmarked > 300


def test_shortcut_demonstrations_skip_head_math_calls_but_keep_the_right_answer() -> None:
    _, easy = _head_math_tasks()
    tools = TaskGenerator(seed=4).tools()
    for task in easy:
        perfect = task.demo_messages()
        assert perfect == task.demo_messages(shortcut_rate=0.0)
        lazy = task.demo_messages(shortcut_rate=1.0)
        called = [c for m in lazy for c in m.get("tool_calls", [])]
        expected = [c for i, c in enumerate(task.calls) if i not in task.head_math]
        assert called == expected
        assert sum(m["role"] == "tool" for m in lazy) == len(expected)
        assert lazy[-1] == perfect[-1]  # the answer is still every right result
        assert task.demo_record(tools, shortcut_rate=1.0)["conversations"] == lazy
    # A share in between skips some: the same ones every time (decided by the task id).
    skipped = [len(t.shortcuts(0.5)) for t in easy]
    assert 0 < sum(skipped) < sum(len(t.head_math) for t in easy)
    assert skipped == [len(t.shortcuts(0.5)) for t in easy]


def test_gen_data_shortcut_rate_needs_sft_and_a_share(tmp_path, capsys) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["gen-data", "-n", "5", "--shortcut_rate", "0.5", "-o", str(out)]) == 2
    assert "--sft" in capsys.readouterr().err
    assert main(["gen-data", "-n", "5", "--sft", "--shortcut_rate", "2", "-o", str(out)]) == 2
    assert "--shortcut_rate" in capsys.readouterr().err
    calls = {}
    for rate in ("0", "1"):
        args = ["gen-data", "-n", "200", "--seed", "4", "--sft", "--shortcut_rate", rate]
        assert main([*args, "-o", str(out)]) == 0
        records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        calls[rate] = sum(len(m.get("tool_calls", [])) for r in records for m in r["conversations"])
    assert calls["1"] < calls["0"]


def test_one_expression_shortcuts_answer_whole_single_result_tasks_without_a_call() -> None:
    generator = TaskGenerator(seed=4)
    tasks = list(generator.tasks(300))
    single = [t for t in tasks if t.kind == "math" and len(t.calls) == 1]
    several = [t for t in tasks if t.kind == "math" and len(t.calls) > 1]
    assert len(single) > 30 and len(several) > 100
    for task in single:
        lazy = task.demo_messages(shortcut_rate=1.0, shortcut_scope="one_expression")
        assert [m["role"] for m in lazy] == ["system", "user", "assistant"]
        assert lazy[-1] == task.demo_messages()[-1]  # the right answer, no call before it
    for task in several + [t for t in tasks if t.kind != "math"]:
        # Tasks asking for several results, or for a unit or a time, keep every call.
        assert task.demo_messages(shortcut_rate=1.0, shortcut_scope="one_expression") == (
            task.demo_messages()
        )
    # The rate applies to the scope's candidates, decided by the task id.
    half = [bool(t.shortcuts(0.5, "one_expression")) for t in single]
    assert 0 < sum(half) < len(single)
    assert half == [bool(t.shortcuts(0.5, "one_expression")) for t in single]
    with pytest.raises(ValueError, match="shortcut scope"):
        single[0].shortcuts(0.5, "everything")


def test_gen_data_and_sft_take_the_shortcut_scope(tmp_path, capsys) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["gen-data", "-n", "5", "--shortcut_scope", "one_expression", "-o", str(out)]) == 2
    assert "--sft" in capsys.readouterr().err
    calls = {}
    for scope in ("head_math", "one_expression"):
        args = ["gen-data", "-n", "200", "--seed", "4", "--sft", "--shortcut_rate", "1"]
        assert main([*args, "--shortcut_scope", scope, "-o", str(out)]) == 0
        records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        calls[scope] = [
            r["id"] for r in records if r["kind"] == "math" and len(r["conversations"]) == 3
        ]
        singles = [r["id"] for r in records if r["kind"] == "math" and len(r["calls"]) == 1]
    assert calls["one_expression"] == singles  # every single-result task, nothing else
    assert calls["head_math"] != calls["one_expression"]
    demos = tmp_path / "demos.jsonl"
    demos.write_text("", encoding="utf-8")
    args = ["sft", "--data", str(demos), "--shortcut_scope", "one_expression"]
    assert main([*args, "--output", str(tmp_path)]) == 2
    assert "--shortcut_scope" in capsys.readouterr().err


def test_the_demonstrations_task_mix_is_an_option_of_sft(tmp_path, capsys) -> None:
    from agentrl.data.synthetic import DEFAULT_MIX, TaskConfig, format_mix
    from agentrl.sft.tasks import generated_demos

    assert TaskConfig().mix == DEFAULT_MIX and parse_mix(format_mix(DEFAULT_MIX)) == DEFAULT_MIX

    def kinds(demos) -> collections.Counter:
        out: collections.Counter = collections.Counter()
        for demo in demos:
            names = [c["name"] for m in demo.messages for c in m.get("tool_calls", ())]
            out[names[0] if names else "no call"] += 1
        return out

    default = kinds(generated_demos(1000))
    units = kinds(generated_demos(1000, mix=parse_mix("math=0.5,unit=0.5")))
    assert 40 < default["unit_converter"] < 130  # about 8%
    assert 430 < units["unit_converter"] < 570 and units["get_current_time"] == 0
    assert units["unit_converter"] + units["calculate_math"] == 1000  # no distractors drawn
    # Same stream seed, same mix: the same demonstrations.
    assert [d.messages for d in generated_demos(50, mix=(("unit", 1.0),))] == [
        d.messages for d in generated_demos(50, mix=(("unit", 1.0),))
    ]
    for bad, says in (("math=x", "not a number"), ("dice=1", "positive weights")):
        assert main(["sft", "--mix", bad, "--output", str(tmp_path / "o")]) == 2
        assert says in capsys.readouterr().err
    demos = tmp_path / "demos.jsonl"
    demos.write_text("", encoding="utf-8")
    assert main(["sft", "--data", str(demos), "--mix", "math=1", "--output", str(tmp_path)]) == 2
    assert "--mix" in capsys.readouterr().err
