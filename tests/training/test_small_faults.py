"""Smaller faults: a damaged checkpoint is named as damaged (remove it to resume from the one
before), not as one written with other model options; --progress 0 silences the warm start."""

from __future__ import annotations

import torch
from agentrl.training.resume import is_damaged


def _load_error(path) -> BaseException:
    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        return exc
    raise AssertionError("the file loaded")


def test_truncated_and_foreign_files_read_as_damaged(tmp_path):
    whole = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(1000)}, whole)
    data = whole.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.pt").write_text("not a checkpoint")
    (tmp_path / "empty.pt").write_bytes(b"")
    for name in ("cut.pt", "text.pt", "empty.pt"):
        assert is_damaged(_load_error(tmp_path / name)), name
    assert is_damaged(FileNotFoundError(2, "No such file", str(tmp_path / "state.pt")))


def test_a_checkpoint_of_another_model_is_not_called_damaged():
    model = torch.nn.Linear(2, 3)
    try:
        model.load_state_dict({"weight": torch.zeros(4, 4), "bias": torch.zeros(3)})
    except RuntimeError as exc:
        assert not is_damaged(exc)
    else:
        raise AssertionError("loaded")
    assert not is_damaged(KeyError("resume"))


def test_progress_0_silences_the_warm_start_s_bar(tmp_path, monkeypatch):
    from agentrl.assembly import models as setup
    from agentrl.config import resolve
    from agentrl.sft import pipeline

    seen = []

    def stop_at_once(options, log, should_stop=None):
        seen.append(options.train.progress)
        raise RuntimeError("stop here")

    monkeypatch.setattr(pipeline, "run_sft", stop_at_once)
    monkeypatch.chdir(tmp_path)
    for progress in (0, 1):
        config = resolve(preset="tiny", overrides={"progress": progress})
        try:
            setup.load_models(config, lambda _: None)
        except RuntimeError as exc:
            assert str(exc) == "stop here"
    assert seen == [False, True]
