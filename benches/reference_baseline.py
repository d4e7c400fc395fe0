"""Load the reference implementation's pure functions at run time, as a benchmark baseline.

The reference implementation (``../shared/seeds/000_*.txt`` beside the checkout, or the
folder in ``AGENTRL_REFERENCE_DIR``) is a single training script that imports torch and
packages this repository does not have. It is parsed with ``ast`` and only its top-level
definitions and constant assignments are executed, skipping any that fail, so its pure text
functions (expression extraction, tool-call parsing, reward scoring) become callable.
Nothing from it is copied into this repository.
"""

from __future__ import annotations
import __future__

import argparse
import ast
import glob
import math
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

_IMPORTS = (
    "import argparse, ast, json, math, random, re, time\n"
    "from collections import deque\n"
    "from dataclasses import dataclass\n"
    "from typing import Any, Dict, Iterable, List, Optional, Tuple\n"
)


def reference_path(pattern: str = "000_*.txt") -> Path | None:
    """Where the reference file lives beside the checkout, or None when it is absent."""
    here = Path(__file__).resolve().parent.parent
    candidates = [here.parent / "shared" / "seeds", here / ".." / "shared" / "seeds"]
    env = os.environ.get("AGENTRL_REFERENCE_DIR")
    if env:
        candidates.insert(0, Path(env))
    for folder in candidates:
        hits = sorted(glob.glob(str(folder / pattern)))
        if hits:
            return Path(hits[0])
    return None


def load_reference(pattern: str = "000_*.txt") -> dict[str, Any] | None:
    """Namespace with the reference's definitions, or None when its file is absent."""
    path = reference_path(pattern)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "reference_baseline_ns"}
    exec(compile(_IMPORTS, "<reference-imports>", "exec"), namespace)
    flags = __future__.annotations.compiler_flag
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign):
            continue
        module = ast.Module(body=[node], type_ignores=[])
        try:
            exec(compile(module, str(path), "exec", flags=flags, dont_inherit=True), namespace)
        except Exception:  # definitions that need torch or packages that are not here
            continue
    namespace.setdefault("math", math)
    return namespace


def absent_message(pattern: str = "000_*.txt") -> str:
    return (
        f"reference file ../shared/seeds/{pattern} not found (set AGENTRL_REFERENCE_DIR): "
        "baseline rows are skipped"
    )


def reference_arguments(reference: dict[str, Any]) -> argparse.Namespace:
    """The reference trainer's own defaults from its ``build_args`` (its torch default needs
    a stand-in), with finished schedules as ``score_batch`` and ``agentrl score`` use."""
    reference.setdefault(
        "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    )
    saved = sys.argv
    sys.argv = ["reference"]
    try:
        args = reference["build_args"]()
    finally:
        sys.argv = saved
    args.current_step = 10**6
    return args


def trajectory_scorer(reference: dict[str, Any]) -> Callable[[dict[str, Any]], tuple[float, Any]]:
    """The reference's per-trajectory scorer on its own defaults (`reference_arguments`), as
    ``row -> (reward, details)`` for a row of `score_batch`'s input (completion, gt,
    tool_events, unfinished, messages)."""
    score = reference["score_one_trajectory"]
    args = reference_arguments(reference)

    def scored(r: dict[str, Any]) -> tuple[float, Any]:
        reward, details = score(
            args,
            "",
            r["completion"],
            r["gt"],
            None,
            r["tool_events"],
            r["unfinished"],
            None,
            r["messages"],
        )[:2]
        return reward, details

    return scored
