"""`agentrl eval --benchmark bfcl`: a policy scored on BFCL v4's single-turn categories by
BFCL's own checker.

The records come from the installed ``bfcl-eval`` package as BFCL gives them to a model
(its function docs with BFCL's language hint); agentrl's engine, the model's own chat
template and its family's call parser play them greedily, one answer turn each
(``--call_mode answer``); the calls read from each answer go to bfcl-eval's checker, run by
the interpreter of its own environment (``.venv-bfcl``, made by ``scripts/bfcl_venv.sh``:
its pins clash with agentrl's) through ``bfcl_checker.py``. Beside BFCL's verdict, each
episode keeps agentrl's own ``function_call`` reward terms, and the two ``valid`` verdicts
are compared per category.

The summaries follow the leaderboard's aggregation
(``bfcl_eval/eval_checker/eval_runner_helper.py``, ``generate_leaderboard_csv``):

- ``non_live_ast``: ``calculate_unweighted_accuracy`` of the simple group, ``multiple``,
  ``parallel`` and ``parallel_multiple``, the simple group being the unweighted mean of
  the simple categories. The leaderboard's simple group also holds ``simple_java`` and
  ``simple_javascript``; only ``simple_python`` is scored here, so the simple group is
  ``simple_python`` alone;
- ``live_ast``: ``calculate_weighted_accuracy`` (each category weighted by its number of
  records) of ``live_simple``, ``live_multiple``, ``live_parallel`` and
  ``live_parallel_multiple``.

Each category's accuracy is its share of records the checker accepts
(``save_eval_results``: ``correct_count / len(model_result)``).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentrl.assembly.evaluation import load_eval_policy, log_prompt
from agentrl.assembly.task import episode_config
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.errors import UsageError, UserError
from agentrl.training.evaluation import Evaluator, eval_episode_config
from agentrl.training.models import Log
from agentrl.training.scoring import reward_set

NON_LIVE_SIMPLE = ("simple_python",)
NON_LIVE_AST = (*NON_LIVE_SIMPLE, "multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
CATEGORIES = (*NON_LIVE_AST, "irrelevance", *LIVE_AST, "live_irrelevance")
SUMMARIES = ("non_live_ast", "live_ast")
# The groups --bfcl_categories takes beside the category names.
GROUPS = {
    "all": CATEGORIES,
    "non_live": (*NON_LIVE_AST, "irrelevance"),
    "live": (*LIVE_AST, "live_irrelevance"),
}
SUMMARY_OF = {"non_live_ast": NON_LIVE_AST, "live_ast": LIVE_AST}
# The model name bfcl-eval's checker is given: one whose function names keep their dots
# (``convert_func_name``), as agentrl's templates show them.
CHECKER_MODEL = "gorilla-openfunctions-v2"
CHECKER = Path(__file__).with_name("bfcl_checker.py")
VALID = "function_call/valid"  # agentrl's own verdict, in each episode's reward terms
BFCL_VALID = "bfcl/valid"  # BFCL's, added beside it


@dataclass(frozen=True)
class CategoryScore:
    """One category's result: BFCL's accuracy over ``records``, agentrl's own
    ``function_call`` valid rate on the same answers, and how many verdicts differ."""

    accuracy: float
    records: int
    total: int  # the category's records in bfcl-eval (more than ``records`` for a subset)
    agentrl_valid: float
    disagreements: int
    checker_errors: int = 0  # records bfcl-eval's checker raised on (scored invalid)
    truncated: int = 0  # records whose prompt was longer than --max_context_len (cut)


@dataclass(frozen=True)
class BfclResult:
    """The scores of one policy: per category, the summaries, and the episodes."""

    spec: str
    version: str  # bfcl-eval's
    categories: dict[str, CategoryScore]
    summaries: dict[str, float]
    subset: bool
    seconds: float
    records: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.spec,
            "benchmark": "bfcl",
            "bfcl_eval_version": self.version,
            "subset": self.subset,
            "categories": {name: vars(score) for name, score in self.categories.items()},
            "summaries": self.summaries,
            "accuracy": {
                **{name: score.accuracy for name, score in self.categories.items()},
                **self.summaries,
            },
            "summary_note": "non_live_ast's simple group is simple_python alone (the "
            "leaderboard's also averages simple_java and simple_javascript)",
            "seconds": self.seconds,
        }


def unweighted_accuracy(scores: Sequence[tuple[float, int]]) -> float:
    """bfcl-eval's ``calculate_unweighted_accuracy``: the mean of the accuracies."""
    return sum(accuracy for accuracy, _ in scores) / len(scores)


def weighted_accuracy(scores: Sequence[tuple[float, int]]) -> float:
    """bfcl-eval's ``calculate_weighted_accuracy``: accuracies weighted by their counts."""
    return sum(accuracy * count for accuracy, count in scores) / sum(c for _, c in scores)


def select_categories(text: str) -> tuple[str, ...]:
    """The categories ``--bfcl_categories`` names: comma-separated category names and
    groups (``all``, ``non_live``, ``live``), in BFCL's order."""
    wanted: set[str] = set()
    for name in (part.strip() for part in text.split(",")):
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in CATEGORIES:
            wanted.add(name)
        else:
            raise UsageError(
                f"--bfcl_categories: unknown category {name!r} (the categories: "
                f"{', '.join(CATEGORIES)}; the groups: {', '.join(GROUPS)})"
            )
    return tuple(c for c in CATEGORIES if c in wanted)


def summaries(scores: Mapping[str, tuple[float, int]]) -> dict[str, float]:
    """The leaderboard's non-live and live AST summaries from ``{category: (accuracy,
    records)}`` (see the module's docstring); a summary whose categories were not all
    scored is left out."""
    result = {}
    if all(c in scores for c in NON_LIVE_AST):
        simple = unweighted_accuracy([scores[c] for c in NON_LIVE_SIMPLE])
        simple_records = sum(scores[c][1] for c in NON_LIVE_SIMPLE)
        rest = NON_LIVE_AST[len(NON_LIVE_SIMPLE) :]
        result["non_live_ast"] = unweighted_accuracy(
            [(simple, simple_records), *(scores[c] for c in rest)]
        )
    if all(c in scores for c in LIVE_AST):
        result["live_ast"] = weighted_accuracy([scores[c] for c in LIVE_AST])
    return result


def bfcl_python(venv: str | Path) -> Path:
    """The interpreter of the bfcl-eval environment, or a one-line error saying how to
    make it."""
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        raise UserError(
            f"no bfcl-eval environment at {venv} (no {python}): run scripts/bfcl_venv.sh "
            "to make it, or name one with --bfcl_venv"
        )
    return python


def run_checker(python: Path, *args: str, request: Any = None) -> Any:
    """Run ``bfcl_checker.py`` in the bfcl-eval environment; its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="agentrl-bfcl-") as tmp:
        result = Path(tmp) / "result.json"
        done = subprocess.run(
            [str(python), str(CHECKER), *args, "--result", str(result)],
            input=None if request is None else json.dumps(request),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not result.exists():
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise UserError(
                f"bfcl-eval's checker failed ({python} {CHECKER.name} {args[0]}, exit "
                f"{done.returncode}): {tail or 'no output'}"
            )
        return json.loads(result.read_text(encoding="utf-8"))


def decoded_calls(answer_calls: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The calls an answer turn was read as, in the form BFCL's decoders give its checker
    (``[{name: {argument: value}}]``); blocks the parser refused are not calls."""
    return [{c["name"]: c["arguments"]} for c in answer_calls or () if "parse_error" not in c]


def check_decoding(config: TrainConfig) -> None:
    """BFCL scores one greedy answer per record."""
    if config.eval_temperature > 0 or config.eval_generations != 1:
        raise UsageError(
            "--benchmark bfcl scores one greedy answer per record: leave --eval_temperature "
            "at 0 and --eval_generations at 1"
        )


def default_output_dir(spec: str) -> Path:
    """``runs/bfcl/<the model's name>``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(spec.rstrip("/")).name or spec).strip("._")
    return Path("runs") / "bfcl" / (name or "model")


def evaluate_bfcl(
    config: TrainConfig,
    *,
    venv: str | Path,
    limit: int | None = None,
    categories: Sequence[str] = CATEGORIES,
    log: Log = print,
    show_prompt: bool = False,
) -> BfclResult:
    """Score the configured policy on ``categories`` (the first ``limit`` records of each
    when given) with bfcl-eval's checker; see the module's docstring."""
    check_decoding(config)
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown or not categories:
        raise UsageError(f"BFCL categories: unknown {unknown} (known: {', '.join(CATEGORIES)})")
    if limit is not None and limit < 1:
        raise UsageError(f"--bfcl_limit must be at least 1, got {limit}")
    python = bfcl_python(venv)
    began = time.perf_counter()
    config = replace(config, call_mode="answer")
    with tempfile.TemporaryDirectory(prefix="agentrl-bfcl-data-") as tmp:
        data = Path(tmp)
        limit_args = () if limit is None else ("--limit", str(limit))
        prepared = run_checker(python, "prepare", str(data), *limit_args)
        policy = load_eval_policy(config, log)
        rewards = reward_set(["function_call"])
        episode = eval_episode_config(episode_config(config), 0.0, config.eval_max_gen_len)
        records: list[dict[str, Any]] = []
        entries: list[dict[str, Any]] = []
        for category in categories:
            written = prepared["categories"][category][0]
            pool = PromptPool(str(data / f"BFCL_v4_{category}.json"), require_gt=False)
            if len(pool) != written:
                raise UserError(
                    f"BFCL {category}: {written - len(pool)} of {written} records could not be "
                    f"read ({dict(pool.stats)})"
                )
            if show_prompt and category == categories[0]:
                log_prompt(policy.tokenizer, pool[0], policy.tools, log)
            evaluator = Evaluator(
                pool, policy.tools, episode, config.reward, samples=-1, seed=0, rewards=rewards
            )
            evaluator.indices = list(range(len(pool)))  # BFCL's order
            evaluator.run(policy.engine)
            offset = len(records)
            played = evaluator.last_trajectories
            for record, trajectory in zip(evaluator.records(step=0), played, strict=True):
                sample = pool[record["prompt_index"]]
                entries.append(
                    {
                        "category": category,
                        "id": sample["id"],
                        "calls": decoded_calls(record.get("answer_calls")),
                    }
                )
                record["bfcl"] = {
                    "category": category,
                    "id": sample["id"],
                    "prompt_cut": trajectory.stats.get("truncated_contexts", 0.0) > 0,
                }
                for key in ("episode", "group", "prompt_index"):  # one file, every category
                    record[key] += offset
                records.append(record)
            log(f"bfcl {category}: {len(pool)} records played")
    checked = run_checker(python, "check", request={"model": CHECKER_MODEL, "entries": entries})
    scores = category_scores(
        entries, records, checked["verdicts"], prepared["categories"], categories
    )
    own = summaries({c: (s.accuracy, s.records) for c, s in scores.items()})
    theirs = checked["summaries"]
    if own.keys() != theirs.keys() or any(abs(own[k] - theirs[k]) > 1e-12 for k in own):
        raise RuntimeError(f"BFCL summaries differ: agentrl {own}, bfcl-eval {theirs}")
    return BfclResult(
        spec=policy.spec,
        version=prepared["version"],
        categories=scores,
        summaries=own,
        subset=limit is not None and any(n < total for n, total in prepared["categories"].values()),
        seconds=time.perf_counter() - began,
        records=records,
    )


def category_scores(
    entries: Sequence[Mapping[str, Any]],
    records: list[dict[str, Any]],
    verdicts: Sequence[Mapping[str, Any]],
    counts: Mapping[str, Sequence[int]],
    categories: Sequence[str] = CATEGORIES,
) -> dict[str, CategoryScore]:
    """Per category: BFCL's accuracy, agentrl's valid rate and the disagreements; each
    record gets BFCL's verdict among its reward terms."""
    tally: dict[str, list[int]] = {c: [0, 0, 0, 0, 0, 0] for c in categories}
    for entry, record, verdict in zip(entries, records, verdicts, strict=True):
        bfcl_valid = bool(verdict["valid"])
        own_valid = float(record["reward_terms"][VALID]) > 0.5
        record["reward_terms"][BFCL_VALID] = float(bfcl_valid)
        if verdict.get("error"):
            record["bfcl"]["error"] = verdict["error"]
        counts_of = tally[entry["category"]]
        counts_of[0] += bfcl_valid
        counts_of[1] += 1
        counts_of[2] += own_valid
        counts_of[3] += own_valid != bfcl_valid
        counts_of[4] += str(verdict.get("error") or "").startswith("checker_raised")
        counts_of[5] += bool(record["bfcl"]["prompt_cut"])
    return {
        c: CategoryScore(
            accuracy=right / n,
            records=n,
            total=int(counts[c][1]),
            agentrl_valid=own / n,
            disagreements=differ,
            checker_errors=raised,
            truncated=cut,
        )
        for c, (right, n, own, differ, raised, cut) in tally.items()
    }


def format_table(result: BfclResult, max_context_len: int) -> list[str]:
    """The per-category table and the summaries, as printed."""
    subset = ": SUBSET (--bfcl_limit), not comparable with full-category figures"
    lines = [
        f"BFCL v4 (bfcl-eval {result.version}), model {result.spec}"
        + (subset if result.subset else ""),
        f"{'category':24s} {'records':>9s} {'BFCL':>7s} {'agentrl':>8s} {'differ':>6s}",
    ]
    for name, s in result.categories.items():
        count = f"{s.records}/{s.total}" if s.records < s.total else str(s.records)
        lines.append(
            f"{name:24s} {count:>9s} {100 * s.accuracy:6.2f}% {100 * s.agentrl_valid:7.2f}% "
            f"{s.disagreements:6d}"
        )
    for name, value in result.summaries.items():
        lines.append(f"{name:24s} {'':>9s} {100 * value:6.2f}%")
    differ = sum(s.disagreements for s in result.categories.values())
    raised = sum(s.checker_errors for s in result.categories.values())
    lines.append(
        f"agentrl's function_call valid disagrees with BFCL's checker on {differ} records"
        + (f"; the checker raised on {raised} (scored invalid)" if raised else "")
    )
    cut = sum(s.truncated for s in result.categories.values())
    if cut:
        lines.append(
            f"{cut} records' prompts were longer than --max_context_len {max_context_len} "
            "tokens and lost their start (tools included): raise --max_context_len"
        )
    return lines


__all__ = [
    "CATEGORIES",
    "BfclResult",
    "CategoryScore",
    "bfcl_python",
    "default_output_dir",
    "evaluate_bfcl",
    "format_table",
    "select_categories",
    "summaries",
]
