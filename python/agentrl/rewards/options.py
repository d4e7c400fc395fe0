"""Which reward functions score a run (the ``reward`` section of the run's config, beside
every setting of the built-in reward, :class:`agentrl.rewards.config.RewardConfig`), and the
judge's settings, whose defaults are these declarations."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

from agentrl.errors import UsageError
from agentrl.utils.options import check_value, option

__all__ = ["DEFAULT_RUBRIC", "JUDGE_MODES", "JudgeSettings", "RewardFunctionsConfig"]

JUDGE_MODES = ("single", "rank")

# What the judge rewards when judge_rubric is ''.
DEFAULT_RUBRIC = (
    "A good response does what the task asks, is correct, and is clear and concise. "
    "Tool calls count only when they help. Penalise wrong facts, made-up results and "
    "answers that do not address the task."
)


@dataclass(frozen=True)
class RewardFunctionsConfig:
    """The reward functions and their weights."""

    SECTION: ClassVar[str] = "reward"

    use_reward_model: bool = option(False, "add a learned reward model's score")
    reward_model_path: str = option("", "reward model path")
    reward_funcs: str = option(
        "",
        "reward functions: comma-separated built-in names or pkg.module:function "
        "('': tool_use, or the environment's reward)",
        common=True,
    )
    reward_weights: str = option("", "weights of reward_funcs, e.g. 1.0,0.5 ('': 1 each)")
    # The `judge` reward (agentrl.rewards.judge): who judges, by what rubric, how.
    judge_model: str = option("", "judge run locally: a model spec as --model takes ('': none)")
    judge_url: str = option("", "judge behind an OpenAI-compatible URL, e.g. http://host:8000/v1")
    judge_api_model: str = option("", "model name sent to judge_url ('': the first it lists)")
    judge_rubric: str = option("", "what the judge rewards: text, or @file ('': a default)")
    judge_mode: str = option(
        "single", "score each episode alone, or rank each group's together", JUDGE_MODES
    )
    judge_max_tokens: int = option(256, "reasoning tokens of the judge's reply", check=">=0")
    judge_batch_size: int = option(8, "judge prompts per batch or concurrent request", check=">=1")


_JUDGE_OPTIONS = {f.name: f for f in fields(RewardFunctionsConfig)}


# A dataclass keeps a field's default as a class attribute: ``RewardFunctionsConfig.judge_mode``
# is the declared default of judge_mode.
@dataclass(frozen=True)
class JudgeSettings:
    """How the judge is reached and asked: the ``judge_*`` options (the defaults declared
    above), and the device and dtype a local judge runs in."""

    model: str = RewardFunctionsConfig.judge_model  # a model spec agentrl loads, run locally
    url: str = RewardFunctionsConfig.judge_url  # an OpenAI-compatible base URL
    api_model: str = RewardFunctionsConfig.judge_api_model  # '': the first the server lists
    rubric: str = DEFAULT_RUBRIC  # the rubric text, or @path of a file holding it
    mode: str = RewardFunctionsConfig.judge_mode
    max_tokens: int = RewardFunctionsConfig.judge_max_tokens
    batch_size: int = RewardFunctionsConfig.judge_batch_size
    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.model and self.url:
            raise UsageError("give the judge as judge_model or as judge_url, not both")
        for name, value in (
            ("judge_mode", self.mode),
            ("judge_max_tokens", self.max_tokens),
            ("judge_batch_size", self.batch_size),
        ):
            try:
                check_value(name, _JUDGE_OPTIONS[name], value)
            except ValueError as exc:
                raise UsageError(str(exc)) from None

    def rubric_text(self) -> str:
        if not self.rubric.startswith("@"):
            return self.rubric
        path = Path(self.rubric[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"judge_rubric {self.rubric!r}: {exc.strerror or exc}") from None
