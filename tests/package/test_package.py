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
