"""The Rust scorer reproduces the reference reward on the golden file, value for value."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from agentrl.rewards import DETAIL_KEYS, RewardConfig, score_batch

GOLDEN = Path(__file__).parents[1] / "data" / "reward_parity.jsonl"
TOLERANCE = 1e-9


def _number(value: float | str) -> float:
    return float(value)  # the golden file writes non-finite numbers as "nan"/"inf"


@pytest.fixture(scope="module")
def golden() -> list[dict]:
    with open(GOLDEN, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _assert_close(got: float, want: float, where: str) -> None:
    if math.isnan(want):
        assert math.isnan(got), where
    else:
        assert abs(got - want) <= TOLERANCE, f"{where}: got {got!r}, want {want!r}"


def test_every_golden_reward_and_detail_matches(golden: list[dict]) -> None:
    # Each line carries its own config overrides; one batch scores them all.
    result = score_batch(golden, threads=2)
    assert len(result) == len(golden) == 3000
    for i, line in enumerate(golden):
        _assert_close(float(result.rewards[i]), _number(line["reward"]), f"line {i + 1} reward")
        assert set(line["details"]) == set(DETAIL_KEYS)
        for key in DETAIL_KEYS:
            got = float(result.details[key][i])
            _assert_close(got, _number(line["details"][key]), f"line {i + 1} {key}")


def test_single_thread_and_parallel_scores_are_identical(golden: list[dict]) -> None:
    one = score_batch(golden[:500], threads=1)
    many = score_batch(golden[:500], threads=4)
    for key in DETAIL_KEYS:
        np.testing.assert_array_equal(one.details[key], many.details[key])


def test_line_config_equals_batch_config(golden: list[dict]) -> None:
    # Scoring a line with its config as the batch config gives the same as the override.
    for line in golden[:40]:
        stripped = {k: v for k, v in line.items() if k != "config"}
        result = score_batch([stripped], RewardConfig.from_dict(line["config"]))
        _assert_close(float(result.rewards[0]), _number(line["reward"]), "batch config")


def test_to_records_gives_the_golden_detail_dicts(golden: list[dict]) -> None:
    rows = score_batch(golden[:20]).to_records()
    for row, line in zip(rows, golden[:20], strict=True):
        assert list(row) == list(line["details"])
        for key, value in row.items():
            _assert_close(value, _number(line["details"][key]), key)
