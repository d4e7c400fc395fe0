"""Load the seed trainer's pure functions at run time, as the baseline for benchmarks.

The seed (``../shared/seeds/000_*.txt``) is a single training script that imports torch and
project modules we do not have. We parse it with ``ast`` and execute only top-level
definitions and constant assignments, skipping any that fail, so the pure text functions
(expression extraction, tool-call parsing, reward scoring) become callable. Nothing from the
seed is copied into this repository.
"""

from __future__ import annotations
import __future__

import ast
import glob
import math
import os
from pathlib import Path
from typing import Any

_IMPORTS = (
    "import argparse, ast, json, math, random, re, time\n"
    "from collections import deque\n"
    "from dataclasses import dataclass\n"
    "from typing import Any, Dict, Iterable, List, Optional, Tuple\n"
)


def seed_path(pattern: str = "000_*.txt") -> Path | None:
    """Where the seed lives beside the checkout, or None when it is absent."""
    here = Path(__file__).resolve().parent.parent
    candidates = [here.parent / "shared" / "seeds", here / ".." / "shared" / "seeds"]
    env = os.environ.get("AGENTRL_SEEDS_DIR")
    if env:
        candidates.insert(0, Path(env))
    for folder in candidates:
        hits = sorted(glob.glob(str(folder / pattern)))
        if hits:
            return Path(hits[0])
    return None


def load_seed(pattern: str = "000_*.txt") -> dict[str, Any] | None:
    """Namespace with the seed's definitions, or None when the seed file is absent."""
    path = seed_path(pattern)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {"__name__": "seed_baseline_ns"}
    exec(compile(_IMPORTS, "<seed-imports>", "exec"), namespace)
    flags = __future__.annotations.compiler_flag
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign):
            continue
        module = ast.Module(body=[node], type_ignores=[])
        try:
            exec(compile(module, str(path), "exec", flags=flags, dont_inherit=True), namespace)
        except Exception:  # definitions that need torch or the seed's own packages
            continue
    namespace.setdefault("math", math)
    return namespace


def absent_message(pattern: str = "000_*.txt") -> str:
    return f"seed file ../shared/seeds/{pattern} not found: baseline rows are skipped"
