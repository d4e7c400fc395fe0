"""A save that fails on the way (a full disk, a read-only or vanished directory) is one line
naming the path and the cause, exit 1; the last good checkpoint and metrics.jsonl stay whole.

The full disk is a real one: a small tmpfs mounted for the test (the `small_disk` fixture of
tests/conftest.py; skipped, with the reason, where mounting is not allowed).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from agentrl.cli import main
from agentrl.errors import EXIT_DATA, SaveError
from agentrl.observability.metrics_log import MetricsLog, read_metrics
from agentrl.sft import checkpoint as sft_ckpt
from agentrl.training.checkpoint import (
    ResumeState,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from agentrl.utils.atomic import atomic_dir, save_failure


def _fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` up, leaving about ``leave`` bytes."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize - leave
    with open(disk / "filler", "wb") as fh:
        try:
            fh.write(b"\0" * max(free, 0))
            fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def _remount_read_only(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(64, 64)


def test_a_checkpoint_on_a_full_disk_is_one_line_and_the_last_good_one_stays(small_disk):
    root = small_disk / "checkpoints"
    model = _model()
    first = save_checkpoint(root, model, ResumeState(step=1), {"k": 1})
    _fill(small_disk, leave=4096)
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(SaveError) as caught:
        save_checkpoint(root, model, ResumeState(step=2), {"k": 2})
    assert str(caught.value) == f"cannot save {root / 'step-0000002'}: No space left on device"
    assert caught.value.exit_code == EXIT_DATA
    assert list_checkpoints(root) == [first]
    assert [p.name for p in root.iterdir()] == ["step-0000001"]  # no temporary left over
    restored = _model()
    assert load_checkpoint(first, restored).resume.step == 1
    assert torch.equal(restored.weight, _model().weight)


def test_a_read_only_checkpoint_directory_is_a_save_error_not_a_usage_error(small_disk):
    root = small_disk / "checkpoints"
    save_checkpoint(root, _model(), ResumeState(step=1))
    _remount_read_only(small_disk)
    with pytest.raises(SaveError, match=r"step-0000002: Read-only file system"):
        save_checkpoint(root, _model(), ResumeState(step=2))
    assert [p.name for p in list_checkpoints(root)] == ["step-0000001"]


def test_an_sft_checkpoint_on_a_full_disk_is_one_line(small_disk):
    from agentrl.models.tiny import build_model

    from tests.fakes.models import SMALL_SPEC, small_tokenizer

    tokenizer = small_tokenizer()
    model = build_model(SMALL_SPEC, len(tokenizer))
    _fill(small_disk, leave=64 * 1024)  # far less than the model's weights
    root = small_disk / "checkpoints"
    with pytest.raises(SaveError, match=r"cannot save .*step-0000003: No space left on device"):
        sft_ckpt.save_checkpoint(root, 3, model, tokenizer, {"step": 3})
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    with pytest.raises(SaveError, match=r"cannot save .*: No space left on device"):
        sft_ckpt.publish_into(model, tokenizer, small_disk / "published")
    assert not any((small_disk / "published").iterdir())


def test_metrics_on_a_full_disk_keep_every_whole_line(small_disk):
    path = small_disk / "metrics.jsonl"
    log = MetricsLog(path)
    for step in range(3):
        log.write(step, "train", {"loss": 0.5})
    _fill(small_disk)
    with pytest.raises(SaveError, match=rf"cannot save {path}: No space left on device"):
        log.write(3, "train", {"note": "x" * 65536})
    lines = path.read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1, 2]
    assert [r["step"] for r in read_metrics(path)] == [0, 1, 2]


def test_a_vanished_temporary_directory_is_a_save_error_naming_the_checkpoint(tmp_path):
    final = tmp_path / "step-0000001"
    vanished = pytest.raises(SaveError, match=r"step-0000001: No such file or directory")
    with vanished, atomic_dir(final) as tmp:
        tmp.rmdir()  # removed under the writer, as by a second run on the directory
        (tmp / "model.pt").write_bytes(b"x")
    assert not final.exists()


def test_torch_s_writer_failure_is_named_as_an_io_failure_and_other_errors_stay_bugs(tmp_path):
    wrapped = RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 704")
    wrapped.__context__ = OSError(errno.ENOSPC, "No space left on device")
    failure = save_failure(tmp_path / "model.pt", wrapped)
    assert str(failure) == f"cannot save {tmp_path / 'model.pt'}: No space left on device"
    assert save_failure(tmp_path, RuntimeError("a bug")) is None
    assert save_failure(tmp_path, ValueError("a bug")) is None


@pytest.mark.slow
def test_train_on_a_full_disk_exits_1_naming_the_checkpoint(small_disk, run_files, capsys):
    _fill(small_disk, leave=192 * 1024)  # room for config and metrics, not for a checkpoint
    model, prompts = run_files / "model", run_files / "prompts.jsonl"
    argv = (
        f"train --model {model} --data {prompts} --save_dir {small_disk} --save_weight run "
        "--total_steps 2 --save_interval 1 --batch_size 1 --num_generations 2 --max_turns 1 "
        "--max_gen_len 8 --eval_before_train 0 --progress 0 --report 0 --async_workers 0 "
        "--filter_mode all"
    ).split()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_DATA, err
    assert "Traceback" not in err and "bug" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    assert f"cannot save {small_disk / 'run'}" in lines[0]
    assert "No space left on device" in lines[0]
    metrics = small_disk / "run" / "metrics.jsonl"
    text = metrics.read_text()
    assert all(json.loads(line) for line in text.splitlines()) and text.endswith("\n")
