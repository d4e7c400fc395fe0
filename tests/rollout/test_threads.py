"""CPU thread requests are honoured up to the usable cores, and 0 leaves torch alone."""

from __future__ import annotations

import pytest
import torch
from agentrl.utils import threads


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_request_is_capped_at_usable_cores(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    assert threads.set_cpu_threads(8) == 2
    assert threads.set_cpu_threads(1) == 1


def test_zero_keeps_torch_choice():
    torch.set_num_threads(1)
    assert threads.set_cpu_threads(0) == 1


def test_usable_cores_is_positive():
    assert threads.usable_cores() >= 1
