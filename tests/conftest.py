"""Fixtures shared by the test modules (the functions behind them live in `helpers`).

Markers: ``slow`` marks tests that take more than about two seconds on a laptop CPU
(training runs, fresh processes, many-example property tests); ``make test-fast`` runs
``pytest -m "not slow"``, ``make test`` runs everything.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import small_tokenizer as shared_small_tokenizer
from helpers import write_run_files

# The test folders (one per layer) hold modules that other tests import by name (shared
# stand-ins such as test_rollout_episodes.ScriptedEngine): each folder is on the path.
for _folder in sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir()):
    if _folder.name not in ("data", "__pycache__") and str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# The suite's models are tiny: one intra-op thread is fastest, and on a shared machine a
# second spinning OpenMP thread makes every small matmul many times slower.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def small_tokenizer() -> Any:
    """The session's SMALL_SPEC tokenizer (shared: do not mutate it)."""
    return shared_small_tokenizer()


@pytest.fixture(scope="session")
def run_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``model/`` (a SMALL_SPEC preset) and ``prompts.jsonl`` (24 tasks)."""
    return write_run_files(tmp_path_factory.mktemp("small_run"))


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during the test, as at a terminal, even when the suite
    runs as a background job (which starts with SIGINT ignored); the old handler returns."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
