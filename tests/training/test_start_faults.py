"""A run that cannot start leaves nothing behind, and what a run writes follows the umask.

* A full disk before the first step (the lock file, the generated prompts) is one line
  naming the file, exit 1, and no empty ``run/`` or ``run/data/`` directory stays.
* ``model.safetensors`` (whose writer creates it 0600) gets the mode of its siblings.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from agentrl.cli import main
from agentrl.errors import EXIT_DATA
from agentrl.models.tiny import build_model, save_preset
from agentrl.training.checkpoint import export_policy

from tests.fakes.models import SMALL_SPEC
from tests.fakes.runs import ONE_STEP_RUN


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` up to about ``leave`` free bytes."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize - leave
    try:
        with open(disk / "filler", "wb") as fh:
            fh.write(b"\0" * max(free, 0))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC


@pytest.mark.parametrize(("leave", "named"), [(0, "run/.agentrl.lock"), (16_384, "run/data/")])
def test_a_run_that_cannot_start_on_a_full_disk_leaves_no_directory(
    run_files: Path, small_disk: Path, capsys, leave: int, named: str
) -> None:
    _fill(small_disk, leave)
    argv = ["train", "--model", run_files / "model", "--save_dir", small_disk / "runs"]
    code = main([str(a) for a in [*argv, "--save_weight", "run", *ONE_STEP_RUN]])
    err = capsys.readouterr().err
    assert code == EXIT_DATA and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if "agentrl train: error:" in x]
    assert named in line and "No space left on device" in line
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_saved_weights_follow_the_umask_like_their_siblings(tmp_path, small_tokenizer) -> None:
    model, tokenizer = build_model(SMALL_SPEC, len(small_tokenizer)), small_tokenizer
    before = os.umask(0o027)
    try:
        for out in (
            save_preset(model, tokenizer, tmp_path / "preset"),
            export_policy(model, tokenizer, tmp_path / "policy"),
        ):
            modes = {p.name: _mode(p) for p in out.iterdir()}
            assert modes["model.safetensors"] == modes["config.json"] == 0o640, modes
    finally:
        os.umask(before)
