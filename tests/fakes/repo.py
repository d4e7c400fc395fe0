"""The checkout's files the tests reach: its root, the bench scripts, and the reference
implementation outside the checkout that some comparisons need."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

# The checkout's root: `examples.<name>` imports from there.
REPO = Path(__file__).resolve().parents[2]


# The bench scripts (not a package; benches/reference_baseline.py loads the reference).
BENCHES = REPO / "benches"


def load_bench(name: str) -> ModuleType:
    """``benches/<name>.py`` as a module of its own (a fresh one on each call)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCHES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs_reference(
    found: Any, what: str = "the reference implementation", pattern: str = "000_*.txt"
) -> Any:
    """A pytest mark (for a test, or as a module's ``pytestmark``) that skips it when
    ``found``, what `reference_baseline` loaded, is None, and says where the file is sought."""
    import pytest

    return pytest.mark.skipif(
        found is None,
        reason=f"needs {what} outside the repo: ../shared/seeds/{pattern} "
        "(or a folder named by AGENTRL_REFERENCE_DIR)",
    )
