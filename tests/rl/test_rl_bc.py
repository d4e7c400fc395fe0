"""Behaviour-cloning loss math: schedule, truncation, cross-entropy."""

from __future__ import annotations

import math

import pytest
from agentrl.rl.bc import (
    IGNORE_INDEX,
    BCConfig,
    BCExample,
    bc_coef_at_step,
    bc_cross_entropy,
    bc_tensors,
    tokenize_bc_examples,
)

from tests.fakes.models import UniformLogits

X = IGNORE_INDEX  # unlabelled position


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.16),
        (1200, 0.16),  # end of hold
        (2200, 0.16 * (1 - 1000 / 4000)),  # = 0.12
        (4400, 0.16 * (1 - 3200 / 4000)),  # = 0.032
        (5000, 0.03),  # 0.16 * 0.05 = 0.008 < floor 0.03
        (10_000, 0.03),
    ],
)
def test_bc_coefficient_holds_decays_and_floors(step: int, expected: float) -> None:
    assert bc_coef_at_step(step, BCConfig()) == pytest.approx(expected)


def test_bc_coefficient_stop_and_edge_settings() -> None:
    assert bc_coef_at_step(3000, BCConfig(bc_stop_steps=3000)) == pytest.approx(0.16 * 0.55)
    assert bc_coef_at_step(3001, BCConfig(bc_stop_steps=3000)) == 0.0
    assert bc_coef_at_step(1201, BCConfig(bc_decay_steps=0)) == 0.03
    assert bc_coef_at_step(0, BCConfig(bc_coef=0.0)) == 0.0


def _encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_tokenization_keeps_the_target_and_cuts_the_prefix_from_the_left() -> None:
    x, y, e, f = ord("x"), ord("y"), ord("e"), ord("f")
    rows = tokenize_bc_examples([BCExample("abcdef", "xy")], _encode, eos_id=0, max_len=5)
    # target [x, y, EOS] (3) leaves 2 prefix tokens: [e, f]
    assert rows == [([e, f, x, y, 0], [X, X, x, y, 0])]
    rows = tokenize_bc_examples([BCExample("abcdef", "xy")], _encode, eos_id=0, max_len=2)
    # target longer than max_len: its tail alone, all labelled
    assert rows == [([y, 0], [y, 0])]
    # a one-token row has nothing to predict
    assert tokenize_bc_examples([BCExample("", "")], _encode, eos_id=0, max_len=4) == []


def test_cross_entropy_averages_over_labelled_positions() -> None:
    ids, att, labels = bc_tensors([([1, 2, 3], [X, 2, 3]), ([1, 2], [X, 2])], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [1, 2, 0]]
    assert att.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert labels.tolist() == [[X, 2, 3], [X, 2, X]]
    loss = bc_cross_entropy(UniformLogits(), ids, att, labels)
    assert loss.item() == pytest.approx(math.log(4))
