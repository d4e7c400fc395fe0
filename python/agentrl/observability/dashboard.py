"""Dashboard metric names, computed from the reward's detail columns.

The reward scorer returns one column per detail (``exact_match``, ``tool_success_rate``,
...). Training logs their batch means under ``reward_detail/<key>`` and a curated set
under ``train/...``; evaluation logs the ``eval/...`` keys and the same curated set
under ``eval_dashboard/...``, so a chart of "tool success" reads the same in both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

# (dashboard suffix, detail key) pairs of the dashboard.
_DASHBOARD = (
    ("accuracy_exact_match", "exact_match"),
    ("accuracy_answer_cov", "answer_cov"),
    ("format_answer_tag_rate", "answer_tag"),
    ("format_exact_answer_tag_rate", "exact_answer_tag"),
    ("tool_success_rate", "tool_success_rate"),
    ("tool_correct_choice_rate", "correct_tool_choice"),
    ("tool_math_call_coverage", "math_call_coverage"),
    ("tool_expr_order_cov", "tool_expr_order_cov"),
    ("tool_expr_set_cov", "tool_expr_set_cov"),
    ("tool_expr_exact", "tool_expr_exact"),
    ("tool_value_order_cov", "tool_value_order_cov"),
    ("tool_preferred_math_rate", "preferred_math_rate"),
    ("tool_canonical_rate", "canonical_tool_rate"),
)

# (eval metric suffix, detail key): what one evaluation reports, under compatible names.
EVAL_DETAIL_KEYS = (
    ("exact_match", "exact_match"),
    ("answer_cov", "answer_cov"),
    ("strict_exact_match", "strict_exact_match"),
    ("tool_success_rate", "tool_success_rate"),
    ("tool_correct_choice_rate", "correct_tool_choice"),
    ("math_call_coverage", "math_call_coverage"),
    ("tool_expr_order_cov", "tool_expr_order_cov"),
    ("tool_expr_set_cov", "tool_expr_set_cov"),
    ("tool_expr_exact", "tool_expr_exact"),
    ("tool_value_order_cov", "tool_value_order_cov"),
    ("tool_value_set_cov", "tool_value_set_cov"),
    ("tool_value_exact", "tool_value_exact"),
    ("preferred_math_rate", "preferred_math_rate"),
    ("tool_canonical_rate", "canonical_tool_rate"),
    ("non_math_tool_calls", "non_math_tool_calls"),
    ("final_refs_tool", "final_refs_tool"),
    ("answer_tag", "answer_tag"),
    ("exact_answer_tag", "exact_answer_tag"),
    ("extra_numbers", "extra_numbers"),
    ("missing_numbers", "missing_numbers"),
    ("order_ok", "order_ok"),
    ("avg_answer_len", "answer_len"),
    ("unfinished_rate", "unfinished"),
    ("reward_clipped_rate", "clipped"),
)


def mean_details(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Mean of every numeric detail over rows (non-finite values are left out)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not math.isfinite(value):
                continue
            sums[key] = sums.get(key, 0.0) + float(value)
            counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def dashboard_metrics(details: Mapping[str, float], prefix: str) -> dict[str, float]:
    """The curated dashboard set under ``prefix`` (missing details read as 0)."""
    return {f"{prefix}/{name}": float(details.get(key, 0.0)) for name, key in _DASHBOARD}


def eval_metrics_from_details(reward_mean: float, details: Mapping[str, float]) -> dict[str, float]:
    """The ``eval/...`` metrics plus the ``eval_dashboard/...`` set."""
    out = {"eval/reward": float(reward_mean)}
    out.update({f"eval/{name}": float(details.get(key, 0.0)) for name, key in EVAL_DETAIL_KEYS})
    out.update(dashboard_metrics(details, "eval_dashboard"))
    return out


__all__ = ["EVAL_DETAIL_KEYS", "dashboard_metrics", "eval_metrics_from_details", "mean_details"]
