"""The package root is the library's front door, and stays light until the trainer is used."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_root_exports_the_trainer_lazily() -> None:
    code = (
        "import sys, agentrl\n"
        "assert 'agentrl.trainer' not in sys.modules\n"
        "from agentrl.trainer import Trainer, run_training\n"
        "assert agentrl.Trainer is Trainer and agentrl.run_training is run_training\n"
        "from agentrl.config import TrainConfig\n"
        "assert agentrl.TrainConfig is TrainConfig\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_root_attribute_is_an_attribute_error() -> None:
    import agentrl

    with pytest.raises(AttributeError, match="no attribute 'Trainr'"):
        agentrl.Trainr  # noqa: B018


def _huge_pages_possible() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


# A 64 MiB tensor touched, then the process's anonymous huge pages read back.
_HUGE_PAGES = (
    "import agentrl, torch\n"
    "x = torch.ones(1 << 24)\n"
    "rollup = open('/proc/self/smaps_rollup').read()\n"
    "kb = [int(l.split()[1]) for l in rollup.splitlines() if l.startswith('AnonHugePages')]\n"
    "print(kb[0])\n"
)


@pytest.mark.skipif(not _huge_pages_possible(), reason="no transparent huge pages here")
@pytest.mark.parametrize(("setting", "huge"), [(None, True), ("0", False)])
def test_importing_agentrl_puts_large_tensors_on_huge_pages(
    setting: str | None, huge: bool
) -> None:
    """torch reads THP_MEM_ALLOC_ENABLE at its first allocation: importing agentrl first
    sets it (docs/tuning.md), and a user's own value wins."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if setting is not None:
        env["THP_MEM_ALLOC_ENABLE"] = setting
    out = subprocess.run(
        [sys.executable, "-c", _HUGE_PAGES], env=env, check=True, capture_output=True, text=True
    )
    huge_kb = int(out.stdout.split()[-1])
    assert (huge_kb >= 32 * 1024) is huge, huge_kb
