"""The end-of-run report: one PNG with the curves that say whether RL worked.

Panels: reward (and each reward function's total), accuracy (exact match, answer coverage,
and the terms reward functions report, such as ``function_call/valid``), tool use
(success, right tool, values in order, the share of answers without a call), KL (to the
reference, and the policy's drift from its rollouts), entropy, the clip fraction,
generated tokens per episode (mean, min, max), the share of episodes cut at the token
limit, and staleness (policy versions behind, per token and group). The built-in reward's
columns (``reward_detail/``) are drawn only for runs that train on it: a run on other
reward functions (function calling, your own) shows their terms instead.
Training curves are drawn as thin lines with a moving average; evaluations as markers,
so the held-out numbers stand out. matplotlib renders off-screen (Agg); a run without
matplotlib skips the report and says so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.utils.atomic import atomic_file

# (title, [(label, record kind, metric key), ...]) per panel.
PANELS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Reward", (("train", "train", "reward/mean"), ("eval", "eval", "eval/reward"))),
    (
        "Accuracy",
        (
            ("train exact", "train", "reward_detail/exact_match"),
            ("train coverage", "train", "reward_detail/answer_cov"),
            ("eval exact", "eval", "eval/exact_match"),
            ("eval coverage", "eval", "eval/answer_cov"),
        ),
    ),
    (
        "Tool use",
        (
            ("success", "train", "reward_detail/tool_success_rate"),
            ("right tool", "train", "reward_detail/correct_tool_choice"),
            ("values in order", "train", "reward_detail/tool_value_order_cov"),
            ("eval success", "eval", "eval/tool_success_rate"),
            ("eval values", "eval", "eval/tool_value_order_cov"),
            ("no call (answers)", "train", "answer/no_call_rate"),
        ),
    ),
    (
        "KL",
        (
            ("to reference", "train", "policy/kl_ref"),
            ("|logp - behaviour|", "train", "policy/old_current_abs_delta"),
        ),
    ),
    ("Entropy", (("policy", "train", "policy/entropy"),)),
    ("Clip fraction", (("ratio clipped", "train", "policy/ratio_clip_frac"),)),
    (
        "Generated tokens per episode",
        (
            ("mean", "train", "gen/tokens_mean"),
            ("min", "train", "gen/tokens_min"),
            ("max", "train", "gen/tokens_max"),
        ),
    ),
    ("Hit the token limit", (("episodes cut", "train", "gen/hit_limit_frac"),)),
    (
        "Staleness (policy versions behind)",
        (
            ("tokens, mean", "train", "async/token_staleness_mean"),
            ("tokens, p95", "train", "async/token_staleness_p95"),
            ("groups, max", "train", "async/staleness_group_max"),
        ),
    ),
)


BUILTIN_DETAIL = "reward_detail/"  # the built-in reward's columns, scored for every run


def _reward_keys(records: Sequence[dict[str, Any]]) -> dict[str, None]:
    keys: dict[str, None] = {}
    for record in records:
        if record.get("kind") == "train":
            keys.update(dict.fromkeys(k for k in record if k.startswith("reward_fn/")))
    return keys


def reward_function_lines(
    records: Sequence[dict[str, Any]], terms: bool = False
) -> tuple[tuple[str, str, str], ...]:
    """A line per reward function of a run with several (``reward_fn/<name>/mean``), or
    with ``terms`` a line per term a function reports (``reward_fn/<name>/<term>/mean``)."""
    lines = []
    for key in _reward_keys(records):
        if not key.endswith("/mean"):
            continue
        label = key[len("reward_fn/") : -len("/mean")]
        if ("/" in label) == terms:
            lines.append((label, "train", key))
    return tuple(lines)


def trains_on_builtin_reward(records: Sequence[dict[str, Any]]) -> bool:
    """Whether the run's reward holds the built-in one: the default (no per-function
    columns), or ``tool_use`` among the reward functions."""
    keys = _reward_keys(records)
    return not keys or any(k.startswith("reward_fn/tool_use/") for k in keys)


def report_panels(
    records: Sequence[dict[str, Any]],
) -> list[tuple[str, tuple[tuple[str, str, str], ...]]]:
    """The panels of this run's report, each with the lines it may draw."""
    builtin = trains_on_builtin_reward(records)
    panels = []
    for title, lines in PANELS:
        if not builtin:
            lines = tuple(line for line in lines if not line[2].startswith(BUILTIN_DETAIL))
        if title == "Reward":
            lines = lines + reward_function_lines(records)
        elif title == "Accuracy":
            lines = lines + reward_function_lines(records, terms=True)
        panels.append((title, lines))
    return panels


def series(records: Sequence[dict[str, Any]], kind: str, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric over records of ``kind``, skipping gaps and non-finite."""
    steps, values = [], []
    for record in records:
        if record.get("kind") != kind:
            continue
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            steps.append(int(record["step"]))
            values.append(float(value))
    return steps, values


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values (the first points average what exists)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def robust_top(values: Sequence[float]) -> float | None:
    """An upper axis limit that keeps rare spikes from flattening a curve, or None.

    When the largest value is far above the 95th percentile (one step with a KL of 12
    among steps around 0.05), the axis stops at twice that percentile.
    """
    if len(values) < 20:
        return None
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    if p95 <= 0 or ordered[-1] <= 5 * p95:
        return None
    return 2 * p95


def write_report(
    records: Sequence[dict[str, Any]],
    path: str | os.PathLike[str],
    title: str = "agentrl training run",
) -> Path | None:
    """Draw the panels from metrics records into ``path``; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    n_train = sum(1 for r in records if r.get("kind") == "train")
    window = max(1, n_train // 20)
    fig, axes = plt.subplots(3, 3, figsize=(15, 12), constrained_layout=True)
    for ax, (panel_title, lines) in zip(axes.flat, report_panels(records), strict=True):
        drawn = False
        shown: list[float] = []
        for label, kind, key in lines:
            steps, values = series(records, kind, key)
            if not steps:
                continue
            drawn = True
            shown.extend(values)
            if kind == "eval":
                ax.plot(steps, values, marker="o", linestyle="--", label=label)
            else:
                line = ax.plot(steps, values, alpha=0.3, linewidth=0.8)[0]
                ax.plot(steps, moving_average(values, window), color=line.get_color(), label=label)
        top = robust_top(shown)
        if top is not None:
            low = min(shown)
            ax.set_ylim(bottom=low - 0.05 * (top - low), top=top)
            panel_title += " (outliers cut)"
        ax.set_title(panel_title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title)
    try:
        with atomic_file(out) as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return out


__all__ = [
    "PANELS",
    "moving_average",
    "report_panels",
    "robust_top",
    "series",
    "trains_on_builtin_reward",
    "write_report",
]
