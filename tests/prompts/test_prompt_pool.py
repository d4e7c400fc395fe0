"""PromptPool: every record shape, every option and counter, splits and shards."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from agentrl.data import (
    ANSWER_INSTRUCTION,
    PromptPool,
    PromptPoolError,
    build_fixed_eval_indices,
    shard_prompt_pool,
    split_prompt_pool,
    task_text_from_messages,
    task_text_from_prompt,
)
from agentrl.tools import builtin_registry

DEFAULTS = builtin_registry().specs()
CALC = DEFAULTS[0]
UNIT = DEFAULTS[1]


def _write(tmp_path: Path, records: list, name: str = "pool.jsonl") -> str:
    path = tmp_path / name
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _one(tmp_path: Path, record, **options) -> PromptPool:
    return PromptPool(_write(tmp_path, [record]), **options)


def _user(sample) -> str:
    return next(m["content"] for m in sample.messages if m["role"] == "user")


# ------------------------------------------------------------------ record shapes


def test_messages_shape(tmp_path) -> None:
    pool = _one(tmp_path, {"messages": [{"role": "user", "content": "计算1+2"}], "gt": ["3"]})
    sample = pool[0]
    assert sample.messages == [{"role": "user", "content": "计算1+2"}]
    assert sample.gt == ["3"] and sample.tools is None
    assert sample["messages"] is sample.messages and sample.get("nope") is None
    assert (sample.line, sample.source.endswith("pool.jsonl")) == (1, True)


def test_conversations_with_role_content_and_minimind_system_tools(tmp_path) -> None:
    record = {
        "conversations": [
            {"role": "system", "content": "你是助手", "tools": json.dumps([CALC])},
            {"role": "user", "content": "计算7109*2920"},
            {"role": "assistant", "content": ""},
        ],
        "gt": ["20758280"],
    }
    sample = _one(tmp_path, record, inject_answer_instruction=False)[0]
    assert [m["role"] for m in sample.messages] == ["system", "user"]  # empty assistant dropped
    assert sample.tools == [CALC]
    assert sample.messages[0]["content"] == "你是助手"


def test_sharegpt_from_value_with_human_and_gpt(tmp_path) -> None:
    record = {
        "conversations": [
            {"from": "human", "value": "2+2?"},
            {"from": "gpt", "value": "<answer>4</answer>"},
        ],
        "answer": 4,
    }
    sample = _one(tmp_path, record)[0]
    assert sample.messages == [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<answer>4</answer>"},
    ]
    assert sample.gt == ["4"]


@pytest.mark.parametrize("key", ["prompt", "question", "query"])
def test_single_prompt_keys(tmp_path, key) -> None:
    sample = _one(tmp_path, {key: "Compute 3*4.", "label": "12"})[0]
    assert sample.messages == [{"role": "user", "content": "Compute 3*4."}]
    assert sample.gt == ["12"]


def test_prompt_as_message_list(tmp_path) -> None:
    record = {"prompt": [{"role": "user", "content": "hi"}], "gt": "x"}
    assert _one(tmp_path, record)[0].messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("record_gt", "expected"),
    [
        ({"gt": ["1", 2, " ", ""]}, ["1", "2"]),
        ({"answer": "5"}, ["5"]),
        ({"answers": [1.5, "x"]}, ["1.5", "x"]),
        ({"label": 0}, ["0"]),
        ({"gt": ["a"], "answer": "ignored"}, ["a"]),
    ],
)
def test_ground_truth_keys_and_cleaning(tmp_path, record_gt, expected) -> None:
    record = {"prompt": "q", **record_gt}
    assert _one(tmp_path, record)[0].gt == expected


@pytest.mark.parametrize(
    "tools_field",
    [
        {"tools": [CALC]},
        {"tools": CALC},
        {"tools": json.dumps([CALC])},
        {"functions": [CALC["function"]]},
        {"tools": "", "functions": json.dumps(CALC["function"])},
    ],
)
def test_record_level_tools_in_every_form(tmp_path, tools_field) -> None:
    record = {"prompt": "q", "gt": "1", **tools_field}
    sample = _one(tmp_path, record, inject_answer_instruction=False)[0]
    assert [t["function"]["name"] for t in sample.tools] == ["calculate_math"]


def test_message_level_tools_override_record_tools(tmp_path) -> None:
    record = {
        "messages": [
            {"role": "system", "content": "s", "functions": [UNIT["function"]]},
            {"role": "user", "content": "q"},
        ],
        "tools": [CALC],
        "gt": "1",
    }
    sample = _one(tmp_path, record)[0]
    assert [t["function"]["name"] for t in sample.tools] == ["unit_converter"]


def test_assistant_tool_calls_and_reasoning_are_kept(tmp_path) -> None:
    record = {
        "conversations": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "hm",
                "tool_calls": json.dumps(
                    [{"name": "calculate_math", "arguments": {"expression": "1+1"}}]
                ),
            },
            {"role": "tool", "content": json.dumps({"result": "2"})},
        ],
        "gt": "2",
    }
    messages = _one(tmp_path, record)[0].messages
    call = {"name": "calculate_math", "arguments": {"expression": "1+1"}}
    assert messages[1]["tool_calls"] == [{"type": "function", "function": call}]
    assert messages[1]["reasoning_content"] == "hm"
    assert messages[2] == {"role": "tool", "content": '{"result": "2"}'}


def test_record_metadata_and_reference_calls(tmp_path) -> None:
    calls = [{"name": "calculate_math", "arguments": {"expression": "1+1"}}]
    record = {"id": "t1", "kind": "math", "prompt": "1+1", "gt": "2", "calls": calls, "x": 1}
    sample = _one(tmp_path, record, keep_raw=True)[0]
    assert sample.calls == calls
    assert sample.meta == {"id": "t1", "kind": "math"}
    assert sample.raw == record
    assert _one(tmp_path, record)[0].raw is None


# ------------------------------------------------------------------ options


def test_require_gt_skips_and_counts(tmp_path) -> None:
    path = _write(
        tmp_path, [{"prompt": "a"}, {"prompt": "b", "gt": "1"}, {"prompt": "c", "gt": None}]
    )
    pool = PromptPool(path)
    assert len(pool) == 1 and pool.stats["skip_no_gt"] == 2 and pool.stats["dropped"] == 2
    assert [s.reason for s in pool.skipped] == ["skip_no_gt", "skip_no_gt"]
    assert len(PromptPool(path, require_gt=False)) == 3


def test_max_samples_stops_reading(tmp_path) -> None:
    path = _write(tmp_path, [{"prompt": str(i), "gt": "1"} for i in range(10)])
    pool = PromptPool(path, max_samples=4)
    assert len(pool) == 4 and pool.stats["loaded"] == 4 and pool.stats["kept"] == 4


def test_math_only_filter_uses_the_rust_extractor(tmp_path) -> None:
    records = [
        {"prompt": "请计算884+645*18", "gt": "12494"},
        {"prompt": "What time is it in Tokyo?", "gt": "15:30"},
        {"prompt": "Convert 5 km to miles", "gt": "3.1"},
    ]
    pool = PromptPool(_write(tmp_path, records), filter_mode="math_only")
    assert [_user(s) for s in pool] == ["请计算884+645*18"]
    assert pool.stats["skip_filter"] == 2
    with pytest.raises(ValueError, match="filter_mode"):
        PromptPool(_write(tmp_path, records), filter_mode="some")  # type: ignore[arg-type]


def test_default_tools_apply_to_prompts_without_their_own(tmp_path) -> None:
    path = _write(
        tmp_path, [{"prompt": "q", "gt": "1"}, {"prompt": "q", "gt": "1", "tools": [UNIT]}]
    )
    pool = PromptPool(path, default_tools=DEFAULTS)
    assert len(pool[0].tools) == 3 and [t["function"]["name"] for t in pool[1].tools] == [
        "unit_converter"
    ]
    assert pool.stats["defaulted_tools"] == 1 and pool.stats["forced_default_tools"] == 0


def test_force_all_tools_merges_defaults_after_own_tools(tmp_path) -> None:
    path = _write(tmp_path, [{"prompt": "q", "gt": "1", "tools": [UNIT]}])
    pool = PromptPool(path, default_tools=DEFAULTS, force_all_tools=True)
    names = [t["function"]["name"] for t in pool[0].tools]
    assert names == ["unit_converter", "calculate_math", "get_current_time"]
    assert pool.stats["forced_default_tools"] == 1


def test_allowed_tools_filters_defaults_and_skips_foreign_tools(tmp_path) -> None:
    foreign = {"type": "function", "function": {"name": "web_search", "parameters": {}}}
    path = _write(
        tmp_path,
        [{"prompt": "q", "gt": "1"}, {"prompt": "q", "gt": "1", "tools": [foreign]}],
    )
    allowed = builtin_registry().supported_names()
    pool = PromptPool(path, default_tools=DEFAULTS, allowed_tools=allowed)
    assert len(pool) == 2  # the foreign tool is dropped by the merge, defaults take over
    narrow = PromptPool(
        path, default_tools=DEFAULTS, allowed_tools={"calculate_math"}, allow_empty=True
    )
    assert [len(s.tools) for s in narrow] == [1, 1]
    # A prompt whose resolved tools contain a name outside the allow-list is skipped.
    pool2 = PromptPool(
        _write(tmp_path, [{"prompt": "q", "gt": "1", "tools": [CALC, UNIT]}], "b.jsonl"),
        allowed_tools={"calculate_math", "unit_converter"},
    )
    assert len(pool2) == 1


def test_unsupported_tools_counter(tmp_path) -> None:
    # A prompt is skipped when a resolved tool is outside allowed_tools; merge_tool_specs already
    # removes those, so this only triggers for the alias re-added by augmentation.
    path = _write(tmp_path, [{"prompt": "q", "gt": "1", "tools": [CALC]}])
    pool = PromptPool(
        path, allowed_tools={"calculate_math"}, augment_calculator_alias=True, allow_empty=True
    )
    assert len(pool) == 0 and pool.stats["skip_unsupported_tools"] == 1
    assert pool.skipped[0].reason == "skip_unsupported_tools"


def test_answer_instruction_injection(tmp_path) -> None:
    records = [
        {"prompt": "1+1", "gt": "2", "tools": [CALC]},
        {
            "messages": [
                {"role": "system", "content": "Be nice."},
                {"role": "user", "content": "1+1"},
            ],
            "gt": "2",
            "tools": [CALC],
        },
        {
            "messages": [
                {"role": "system", "content": "use calculate_math, then <answer>"},
                {"role": "user", "content": "x"},
            ],
            "gt": "2",
            "tools": [CALC],
        },
        {"prompt": "1+1", "gt": "2", "tools": [UNIT]},
    ]
    pool = PromptPool(_write(tmp_path, records))
    assert pool[0].messages[0] == {"role": "system", "content": ANSWER_INSTRUCTION}
    assert pool[1].messages[0]["content"] == "Be nice.\n" + ANSWER_INSTRUCTION
    assert pool[2].messages[0]["content"] == "use calculate_math, then <answer>"
    assert pool[3].messages[0]["role"] == "user"  # no calculate_math offered: untouched
    plain = PromptPool(_write(tmp_path, records), inject_answer_instruction=False)
    assert plain[0].messages == [{"role": "user", "content": "1+1"}]
    custom = PromptPool(_write(tmp_path, records[:1]), instruction="CUSTOM <answer>")
    assert custom[0].messages[0]["content"] == "CUSTOM <answer>"


def test_instruction_mentions_the_required_protocol() -> None:
    assert (
        "calculate_math" in ANSWER_INSTRUCTION and "<answer>r1, r2</answer>" in ANSWER_INSTRUCTION
    )


def test_calculator_alias_augmentation(tmp_path) -> None:
    records = [
        {"prompt": "q", "gt": "1", "tools": [CALC]},
        {"prompt": "q", "gt": "1", "tools": [UNIT]},
    ]
    pool = PromptPool(_write(tmp_path, records), augment_calculator_alias=True)
    assert [t["function"]["name"] for t in pool[0].tools] == ["calculate_math", "calculator"]
    assert pool.stats["augmented_calculator_alias"] == 1
    alias_spec = {"type": "function", "function": {"name": "calculator", "parameters": {}}}
    with_alias = {"prompt": "q", "gt": "1", "tools": [CALC, alias_spec]}
    assert [t["function"]["name"] for t in _one(tmp_path, with_alias)[0].tools] == [
        "calculate_math"
    ]  # the alias is dropped unless augmenting


def test_prompt_only_cuts_after_the_last_user_turn(tmp_path) -> None:
    record = {
        "conversations": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {}}]},
            {"role": "tool", "content": "r"},
            {"role": "assistant", "content": "<answer>1</answer>"},
        ],
        "gt": "1",
    }
    assert [m["role"] for m in _one(tmp_path, record, prompt_only=True)[0].messages] == ["user"]
    assert len(_one(tmp_path, record)[0].messages) == 4


def test_lenient_mode_tolerates_odd_roles_and_junk_messages(tmp_path) -> None:
    record = {
        "messages": [
            {"role": "narrator", "content": "x"},
            "junk",
            {"role": "user", "content": "q"},
        ],
        "tools": "{not json",
        "gt": "1",
    }
    sample = _one(tmp_path, record, lenient=True, inject_answer_instruction=False)[0]
    assert sample.messages == [{"role": "user", "content": "x"}, {"role": "user", "content": "q"}]
    assert sample.tools is None


def test_gzip_bom_blank_lines_and_several_files(tmp_path) -> None:
    gz = tmp_path / "a.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"prompt": "a", "gt": "1"}) + "\n\n")
    bom = tmp_path / "b.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"prompt": "b", "gt": "1"}).encode() + b"\r\n\n")
    pool = PromptPool([str(gz), str(bom)])
    assert [_user(s) for s in pool] == ["a", "b"]
    assert pool.stats["loaded"] == 2 and [s.line for s in pool] == [1, 1]


def test_empty_pool_raises_with_stats_unless_allowed(tmp_path) -> None:
    path = _write(tmp_path, ["{broken", {"prompt": "q"}])
    with pytest.raises(PromptPoolError, match=r"no usable prompt.*bad_json 1.*skip_no_gt 1"):
        PromptPool(path)
    assert len(PromptPool(path, allow_empty=True)) == 0


def test_minimind_agent_rl_record(tmp_path) -> None:
    record = {
        "conversations": [
            {
                "role": "system",
                "content": "你是一个工具助手。",
                "tools": json.dumps(DEFAULTS, ensure_ascii=False),
            },
            {"role": "user", "content": "计算7109*2920，再算(12+8)*3"},
            {"role": "assistant", "content": ""},
        ],
        "gt": [20758280, "60"],
    }
    sample = _one(tmp_path, record, filter_mode="math_only")[0]
    assert sample.gt == ["20758280", "60"]
    assert sample.messages[0]["content"].startswith(
        "你是一个工具助手。\n" + ANSWER_INSTRUCTION[:20]
    )
    assert sample.task_text == "计算7109*2920，再算(12+8)*3"


# ------------------------------------------------------------------ splits and shards


def _pool(tmp_path, n: int) -> PromptPool:
    return PromptPool(_write(tmp_path, [{"prompt": f"p{i}", "gt": str(i)} for i in range(n)]))


def test_split_is_a_seeded_shuffle_with_the_first_k_held_out(tmp_path) -> None:
    pool = _pool(tmp_path, 50)
    train, held = split_prompt_pool(pool, eval_ratio=0.2, eval_max_samples=7, seed=42)
    order = list(range(50))
    random.Random(42).shuffle(order)
    expected = sorted(order[:7])
    assert [int(s.gt[0]) for s in held] == expected
    assert len(train) == 43 and {int(s.gt[0]) for s in train}.isdisjoint(expected)
    assert train.stats["kept"] == 43
    _again, held_again = split_prompt_pool(_pool(tmp_path, 50), 0.2, 7, seed=42)
    assert [s.gt for s in held_again] == [s.gt for s in held]


def test_split_edge_cases(tmp_path) -> None:
    small = _pool(tmp_path, 9)
    train, held = split_prompt_pool(small, 0.5, 100)
    assert train is small and len(held) == 0
    pool = _pool(tmp_path, 10)
    train, held = split_prompt_pool(pool, 0.99, 100)
    assert (len(train), len(held)) == (1, 9)  # never everything
    train, held = split_prompt_pool(pool, 0.01, 100)
    assert len(held) == 1
    assert split_prompt_pool(pool, 0.0, 100)[1].samples == []


def test_fixed_eval_indices_are_seeded(tmp_path) -> None:
    pool = _pool(tmp_path, 20)
    order = list(range(20))
    random.Random(1234).shuffle(order)
    assert build_fixed_eval_indices(pool, 5) == order[:5]
    assert build_fixed_eval_indices(pool, 500) == order
    assert build_fixed_eval_indices(pool, 0) == []


def test_shards_partition_by_rank(tmp_path) -> None:
    pool = _pool(tmp_path, 10)
    shards = [shard_prompt_pool(pool, 3, r) for r in range(3)]
    assert [[int(s.gt[0]) for s in shard] for shard in shards] == [
        [0, 3, 6, 9],
        [1, 4, 7],
        [2, 5, 8],
    ]
    assert shard_prompt_pool(pool, 1, 0) is pool
    tiny = _pool(tmp_path, 2)
    assert [s.gt for s in shard_prompt_pool(tiny, 4, 3)] == [["1"]]  # empty rank gets one
    with pytest.raises(ValueError, match="rank"):
        shard_prompt_pool(pool, 2, 5)


def test_task_text_helpers() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "u2"},
    ]
    assert task_text_from_messages(messages) == "u1\nu2"
    assert (
        task_text_from_messages(
            [{"role": "system", "content": "s"}, {"role": "user", "content": " "}]
        )
        == "s\n "
    )
    assert task_text_from_messages([]) == ""
    rendered = (
        "<|tools|>[1+1]<|/tools|><|im_start|>system\nS<|im_end|>\n"
        "<|im_start|>user\n 计算2+3 <|im_end|>\n<|im_start|>assistant\nx<|im_end|>"
    )
    assert task_text_from_prompt(rendered) == "计算2+3"
    assert task_text_from_prompt("<|im_start|>system\nS<|im_end|>") == "S"
    assert task_text_from_prompt("  plain 1+1 ") == "plain 1+1"
    # An unclosed turn is not a turn; linear even when repeated many times.
    assert task_text_from_prompt("<|im_start|>user\nopen" * 20000).startswith("<|im_start|>")


def test_identical_tools_are_shared_and_still_counted_per_prompt(tmp_path) -> None:
    records = [{"prompt": f"q{i}", "gt": "1", "tools": [CALC]} for i in range(3)]
    pool = PromptPool(_write(tmp_path, records), augment_calculator_alias=True)
    assert pool[0].tools is pool[1].tools is pool[2].tools
    assert pool.stats["augmented_calculator_alias"] == 3
    # Same names, different key order: rendered differently, so not shared.
    reordered = {"function": {"parameters": {}, "name": "calculate_math"}, "type": "function"}
    mixed = [records[0], {"prompt": "q", "gt": "1", "tools": [reordered]}]
    pool2 = PromptPool(_write(tmp_path, mixed, "m.jsonl"))
    assert list(pool2[1].tools[0]["function"]) == ["parameters", "name"]
