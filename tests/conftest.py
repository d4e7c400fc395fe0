"""Fixtures shared by the test modules (the functions behind them live in `tests.fakes`).

Markers: ``slow`` marks tests that take more than about two seconds on a laptop CPU
(training runs, fresh processes, many-example property tests); ``make test-fast`` runs
``pytest -m "not slow"``, ``make test`` runs everything.

Test modules do not import one another: what several of them use lives in `tests.fakes`,
which they import from the checkout's root (pyproject.toml's ``pythonpath``); pytest imports
each test module by its path (``--import-mode=importlib``), so two layers may hold modules
of the same name.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.fakes.models import small_tokenizer as shared_small_tokenizer
from tests.fakes.runs import write_run_files

# The suite's models are tiny: one intra-op thread is fastest, and on a shared machine a
# second spinning OpenMP thread makes every small matmul many times slower.
torch.set_num_threads(1)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs in ``tmp_path``, unmounted afterwards (the test is skipped, with the
    reason, where mounting is not allowed): a disk that really fills up."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.strip() or 'mount'}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


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
