"""The reward-function API: combine's edge cases, the built-ins, and user functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from agentrl.errors import EXIT_DATA, UserCodeError, UserError
from agentrl.rewards import (
    combine,
    math_tool_reward,
    r1_accuracy_reward,
    r1_int_reward,
    r1_soft_format_reward,
    r1_strict_format_reward,
    r1_xml_count_reward,
    score_batch,
)
from agentrl.rewards.values import RewardValueError

PROMPTS = ["q1", "q2", "q3"]
COMPLETIONS = ["a", "b", "c"]
ANSWERS = ["1", "2", "3"]


def constant(value: float | None):
    def reward(prompts, completions, answers, **extra):
        return [value] * len(completions)

    reward.__name__ = f"constant_{value}"
    return reward


def by_row(values: list[float | None]):
    def rows(prompts, completions, answers, **extra):
        return list(values)

    return rows


def test_weighted_totals_and_metrics() -> None:
    combined = combine([by_row([1.0, 2.0, 3.0]), constant(0.5)], [2.0, -1.0])
    result = combined(PROMPTS, COMPLETIONS, ANSWERS)
    np.testing.assert_allclose(result.totals, [1.5, 3.5, 5.5])
    assert result.metrics["rows_mean"] == 2.0
    assert result.metrics["rows_std"] == pytest.approx(np.std([1.0, 2.0, 3.0]))
    assert result.metrics["rows_coverage"] == 1.0
    assert result.metrics["constant_0.5_mean"] == 0.5


def test_default_weights_are_one() -> None:
    result = combine([constant(1.0), constant(2.0)])(PROMPTS, COMPLETIONS, ANSWERS)
    np.testing.assert_array_equal(result.totals, [3.0, 3.0, 3.0])


def test_none_counts_as_missing() -> None:
    result = combine([by_row([1.0, None, 3.0]), by_row([None, 4.0, None])])(
        PROMPTS, COMPLETIONS, ANSWERS
    )
    np.testing.assert_array_equal(result.totals, [1.0, 4.0, 3.0])
    assert result.metrics["rows_coverage"] == pytest.approx(2 / 3)
    assert result.metrics["rows#2_coverage"] == pytest.approx(1 / 3)
    assert result.metrics["rows_mean"] == 2.0  # mean over the values it gave
    assert math.isnan(result.columns["rows"][1])


def test_function_returning_none_for_the_batch_is_missing_everywhere() -> None:
    def not_applicable(prompts, completions, answers, **extra):
        return None

    result = combine([not_applicable, constant(1.0)])(PROMPTS, COMPLETIONS, ANSWERS)
    assert result.metrics["not_applicable_coverage"] == 0.0
    assert result.metrics["not_applicable_mean"] == 0.0


def test_a_row_where_every_function_is_none_is_the_functions_error() -> None:
    combined = combine([by_row([1.0, None, 2.0]), by_row([None, None, 1.0])])
    with pytest.raises(
        UserCodeError, match=r"1 of 3 completions \(the first: 1\).*'rows', 'rows#2'"
    ):
        combined(PROMPTS, COMPLETIONS, ANSWERS)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_values_are_the_function_s_error(bad: float) -> None:
    with pytest.raises(RewardValueError, match=r"'rows' returned .* for completion 2: a reward"):
        combine([by_row([1.0, 2.0, bad])])(PROMPTS, COMPLETIONS, ANSWERS)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["1.5", 1.0, 1.0], r"returned '1.5' \(str\) for completion 0"),
        ([1.0, {"r": 1}, 1.0], r"returned \{'r': 1\} \(dict\) for completion 1"),
        ([1.0, object(), 1.0], r"returned <object .*> \(object\) for completion 1"),
        ([1.0], r"returned 1 rewards for 3 completions"),
        (0.5, r"returned float, not a list"),
        ("1.0", r"returned str, not a list"),
    ],
)
def test_values_that_are_not_rewards_are_the_function_s_error(bad, said) -> None:
    def my_reward(prompts, completions, answers, **extra):
        return bad

    with pytest.raises(RewardValueError, match=rf"reward function 'my_reward' {said}") as caught:
        combine([my_reward])(PROMPTS, COMPLETIONS, ANSWERS)
    assert isinstance(caught.value, UserError) and caught.value.exit_code == EXIT_DATA


def test_numpy_and_tensor_scalars_and_bools_are_numbers() -> None:
    import torch

    values = [np.float32(0.5), torch.tensor(2.0), True]
    result = combine([by_row(values)])(PROMPTS, COMPLETIONS, ANSWERS)
    np.testing.assert_array_equal(result.totals, [0.5, 2.0, 1.0])


def test_overflowing_weighted_total_raises() -> None:
    with pytest.raises(UserCodeError, match="not finite"):
        combine([constant(1e308), constant(1e308)])(PROMPTS, COMPLETIONS, ANSWERS)


def test_weights_must_match_functions_and_be_finite() -> None:
    with pytest.raises(ValueError, match="2 reward weights for 1"):
        combine([constant(1.0)], [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        combine([constant(1.0)], [math.nan])
    with pytest.raises(ValueError, match="at least one reward function"):
        combine([])


def test_wrong_lengths_raise() -> None:
    with pytest.raises(ValueError, match="returned 2 rewards for 3"):
        combine([by_row([1.0, 2.0])])(PROMPTS, COMPLETIONS, ANSWERS)
    with pytest.raises(ValueError, match="one entry per completion"):
        combine([constant(1.0)])(PROMPTS[:2], COMPLETIONS, ANSWERS)
    with pytest.raises(ValueError, match="at least one completion"):
        combine([constant(1.0)])([], [], [])


def test_extra_keyword_arguments_reach_every_function() -> None:
    seen = {}

    def spy(prompts, completions, answers, **extra):
        seen.update(extra)
        return [0.0] * len(completions)

    combine([spy])(PROMPTS, COMPLETIONS, ANSWERS, types=["a", "b", "c"])
    assert seen == {"types": ["a", "b", "c"], "answer": ANSWERS}


def test_a_reference_style_and_a_trl_style_function_are_both_called() -> None:
    """The MLX GRPO convention (``answer``/``types``, no ``**kwargs``) beside the TRL one
    (``answers`` and data columns by name)."""
    seen: dict[str, object] = {}

    def reference_style(prompts, completions, answer, types=None):
        seen["reference"] = (list(answer), list(types))
        return [2.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    def trl_style(completions, answers, secret, **kwargs):
        seen["trl"] = (list(answers), list(secret), sorted(kwargs))
        return [0.5 if s == c else 0.0 for c, s in zip(completions, secret, strict=True)]

    result = combine([reference_style, trl_style])(
        PROMPTS, ["1", "x", "c"], [["1"], ["2"], []], secret=["1", "x", "z"]
    )
    np.testing.assert_allclose(result.totals, [2.5, 0.5, 0.0])
    assert seen["reference"] == (["1", "2", None], [None, None, None])
    assert seen["trl"] == ([["1"], ["2"], []], ["1", "x", "z"], ["answer", "prompts", "types"])


def test_a_function_naming_an_argument_nobody_gives_says_which() -> None:
    def needs_column(completions, difficulty):
        return [0.0] * len(completions)

    with pytest.raises(
        UserCodeError, match=r"needs_column.*test_reward_functions.py:\d+.*'difficulty'"
    ):
        combine([needs_column])(PROMPTS, COMPLETIONS, ANSWERS)


def test_an_exception_in_a_user_reward_names_its_line() -> None:
    def broken(completions, **kwargs):
        return [{"a": 1}["secret"] for _ in completions]

    with pytest.raises(UserCodeError) as caught:
        combine([broken])(PROMPTS, COMPLETIONS, ANSWERS)
    message = str(caught.value)
    assert "\n" not in message and "reward function 'broken' raised KeyError" in message
    line = broken.__code__.co_firstlineno + 1
    assert f"test_reward_functions.py:{line}: 'secret'" in message


def test_math_tool_reward_is_the_batched_scorer() -> None:
    prompts = ["Compute 7*8", [{"role": "user", "content": "Compute 7*8"}]]
    completions = [
        '<tool_call>{"name":"calculate_math","arguments":{"expression":"7*8"}}</tool_call>'
        "<answer>56</answer>",
        "<answer>55</answer>",
    ]
    answers = [["56"], "56"]
    rewards = math_tool_reward(prompts, completions, answers)
    records = [
        {"prompt": prompts[0], "gt": ["56"], "completion": completions[0]},
        {"messages": prompts[1], "gt": ["56"], "completion": completions[1]},
    ]
    assert rewards == score_batch(records).rewards.tolist()
    assert rewards[0] == 12.0 and rewards[1] <= 0.0
    # Given events are used as they are (no calls: -1.5); reward settings pass through.
    unit = {"reward_answer_cov_weight": 1.0, "reward_exact_match_weight": 1.0}
    given = math_tool_reward(
        prompts, completions, answers, tool_events=[[], None], reward_config=unit
    )
    # -0.1 + 1 + 1 - no tool 1.5 + tags 0.9 + 0.8 + 0.1 + 0.1
    assert given[0] == pytest.approx(2.3, abs=1e-12)
    executed = math_tool_reward(prompts, completions, answers, reward_config=unit)
    assert executed[0] > given[0] and executed[1] == given[1]


def test_builtins_and_user_functions_combine() -> None:
    def length_penalty(prompts, completions, answers, **extra):
        return [-0.001 * len(c) for c in completions]

    completions = ["<think>\nsum\n</think>\n<answer>\n3\n</answer>\n", "I think it is 4"]
    result = combine([r1_accuracy_reward, r1_int_reward, length_penalty])(
        ["1+2", "2+2"], completions, ["3", "4"]
    )
    np.testing.assert_allclose(
        result.totals, [2.0 + 0.5 - 0.001 * len(completions[0]), -0.001 * len(completions[1])]
    )


def test_r1_accuracy_and_integer() -> None:
    completions = ["<answer> 42 </answer>", "<answer>41</answer>", " 7\n", "<answer>-3"]
    assert r1_accuracy_reward([], completions, ["42", "42", "7", None]) == [2.0, 0.0, 2.0, None]
    assert r1_accuracy_reward([], ["<answer>5</answer>"], [["5", "6"]]) == [2.0]
    assert r1_accuracy_reward([], ["the answer is 7"], ["7"]) == [0.0]
    assert r1_int_reward([], completions, []) == [0.5, 0.5, 0.5, 0.5]
    assert r1_int_reward([], ["<answer>3.5</answer>", "<answer>٣</answer>"], []) == [0.0, 0.0]


def test_r1_format_rewards() -> None:
    strict_ok = "<think>\nreason\n</think>\n<answer>\n42\n</answer>\n"
    empty_think = "<think>\n\n</think>\n<answer>\n42\n</answer>"
    soft_only = "<think>r</think> <answer>42</answer> trailing"
    none = "42"
    completions = [strict_ok, empty_think, soft_only, none, strict_ok + "\n"]
    assert r1_strict_format_reward([], completions, []) == [0.5, 0.5, 0.0, 0.0, 0.0]
    assert r1_soft_format_reward([], completions, []) == [0.5, 0.5, 0.5, 0.0, 0.5]
    assert r1_soft_format_reward([], ["<answer>1</answer><think>x</think>"], []) == [0.0]
    assert r1_soft_format_reward(
        [], ["<think>a</think>x<think>b</think>\n<answer></answer>"], []
    ) == [0.5]


def test_r1_xml_count() -> None:
    strict_ok = "<think>\nreason\n</think>\n<answer>\n42\n</answer>\n"
    assert r1_xml_count_reward([], [strict_ok], []) == [0.5]
    assert r1_xml_count_reward([], [strict_ok + "extra"], []) == [pytest.approx(0.495)]
    assert r1_xml_count_reward([], ["nothing"], []) == [0.0]


def test_r1_rewards_are_linear_on_adversarial_text() -> None:
    import time

    text = "<think></think>\n" * 200_000
    start = time.perf_counter()
    r1_soft_format_reward([], [text], [])
    r1_strict_format_reward([], ["<think>\n" + text], [])
    r1_xml_count_reward([], [text], [])
    assert time.perf_counter() - start < 10.0


def test_a_partial_of_a_user_reward_is_user_code() -> None:
    import functools

    def scaled(completions, factor, **kwargs):
        return [factor * {}["missing"] for _ in completions]

    with pytest.raises(UserCodeError, match="reward function 'scaled' raised KeyError"):
        reward = functools.partial(scaled, factor=2.0)
        reward.__name__ = "scaled"
        combine([reward])(PROMPTS, COMPLETIONS, ANSWERS)
