"""Every failure says what happened: one line naming the file or option, the documented
exit code (`agentrl.errors`), a traceback only with ``--debug`` or for a bug, and nothing
left behind by a run that could not start.

The commands run in this process through `agentrl.cli.main` (whose return value is the
process's exit code); a few run as real processes, where the exit status itself matters.
"""

from __future__ import annotations

import dataclasses
import errno
import gzip
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agentrl.cli import main, user_failure
from agentrl.errors import EXIT_BUG, EXIT_DATA, EXIT_SIGTERM, EXIT_USAGE
from agentrl.models.tiny import build_model, save_preset
from agentrl.observability import read_metrics

from tests.fakes.models import SMALL_SPEC, small_tokenizer
from tests.fakes.runs import ONE_STEP_RUN

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def assets(run_files: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shared model and prompts, a copy of the model with a truncated weights file, and
    a binary file."""
    root = tmp_path_factory.mktemp("failures")
    broken = root / "truncated"
    broken.mkdir()
    for item in (run_files / "model").iterdir():
        data = item.read_bytes()
        (broken / item.name).write_bytes(data[:1000] if item.suffix == ".safetensors" else data)
    (root / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    return {
        "model": run_files / "model",
        "prompts": run_files / "prompts.jsonl",
        "truncated": broken,
        "binary": root / "binary.jsonl",
    }


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    """Exit code and the one error line; fails unless exactly one line says the error."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    return code, errors[0]


def _train(assets: dict[str, Path], save_dir: Path, *extra: object) -> list[object]:
    return [
        "train",
        "--data",
        assets["prompts"],
        *ONE_STEP_RUN,
        "--save_dir",
        save_dir,
        "--save_weight",
        "run",
        *extra,
    ]


# ------------------------------------------------------------------ train


@pytest.mark.slow
def test_truncated_model_file_is_named_and_no_run_directory_appears(assets, tmp_path, capsys):
    argv = _train(assets, tmp_path / "runs", "--model", assets["truncated"])
    code, line = _run(capsys, *argv)
    assert code == EXIT_DATA
    weights = assets["truncated"] / "model.safetensors"
    assert f"model file {weights} is not a valid safetensors file" in line
    assert "invalid header length" in line
    assert not (tmp_path / "runs").exists()  # no config.toml, no run directory


def test_save_dir_that_is_a_file_fails_before_loading(assets, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # The model does not exist either: the run directory is checked first.
    argv = _train(assets, blocker / "deeper", "--model", tmp_path / "no-model")
    code, line = _run(capsys, *argv)
    assert code == EXIT_USAGE
    assert "--save_dir/--run_name" in line and f"{blocker} is a file, not a directory" in line


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_save_dir_without_write_permission_fails_before_loading(assets, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, line = _run(capsys, *_train(assets, locked / "runs", "--model", assets["model"]))
    finally:
        locked.chmod(0o700)
    assert code == EXIT_USAGE and f"directory {locked} is not writable" in line
    assert list(locked.iterdir()) == []


def test_missing_data_file_is_named_before_the_model_loads(assets, tmp_path, capsys):
    argv = _train(
        assets, tmp_path, "--model", tmp_path / "no-model", "--data", tmp_path / "missing.jsonl"
    )
    code, line = _run(capsys, *argv)
    assert code == EXIT_USAGE
    assert f"--data_path: {tmp_path / 'missing.jsonl'}: no such file" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_data_without_a_usable_prompt_leaves_no_run_directory(assets, tmp_path, capsys):
    argv = _train(assets, tmp_path / "runs", "--model", assets["model"], "--data", assets["binary"])
    code, line = _run(capsys, *argv)
    assert code == EXIT_DATA
    assert f"no usable prompt in {assets['binary']}" in line and "bad_encoding" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_broken_gzip_data_file_is_named(assets, tmp_path, capsys):
    broken = tmp_path / "prompts.jsonl.gz"
    broken.write_bytes(gzip.compress(assets["prompts"].read_bytes())[:200])
    argv = _train(assets, tmp_path / "runs", "--model", assets["model"], "--data", broken)
    code, line = _run(capsys, *argv)
    assert code == EXIT_DATA and f"{broken}: not a readable gzip file" in line
    assert not (tmp_path / "runs").exists()


def test_bad_options_and_config_files_exit_2_in_one_line(tmp_path, capsys):
    code, line = _run(capsys, "train", "--config", tmp_path / "nope.toml")
    assert code == EXIT_USAGE and "nope.toml: cannot read" in line
    code, line = _run(capsys, "train", "--batch_size", "0")
    assert code == EXIT_USAGE and "batch_size=0: expected at least 1" in line
    # argparse's own errors: one line, not the usage of every option.
    with pytest.raises(SystemExit) as stop:
        main(["train", "--no_such_option", "1"])
    err = capsys.readouterr().err
    assert stop.value.code == EXIT_USAGE
    assert err.strip().splitlines() == [
        "agentrl train: error: unrecognized arguments: --no_such_option 1 "
        "(see `agentrl train --help`)"
    ]


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_the_model_is_named(assets, tmp_path, capsys):
    argv = _train(assets, tmp_path, "--model", assets["model"], "--save_interval", "1")
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    other = tmp_path / "other"
    tokenizer = small_tokenizer()
    wider = dataclasses.replace(SMALL_SPEC, hidden_size=48)
    save_preset(build_model(wider, len(tokenizer)), tokenizer, other)
    code, line = _run(capsys, *argv[:-4], "--model", other, "--from_resume", "1")
    assert code == EXIT_DATA
    assert f"checkpoint {tmp_path / 'run' / 'checkpoints'}" in line and "cannot be resumed" in line


# ------------------------------------------------------------------ other commands


@pytest.mark.slow
def test_eval_names_a_missing_model_and_a_broken_one(assets, tmp_path, capsys):
    code, line = _run(capsys, "eval", "--model", tmp_path / "nothing", "--data", assets["prompts"])
    assert code == EXIT_USAGE and "is neither 'tiny', an existing HF model directory" in line
    code, line = _run(capsys, "eval", "--model", assets["truncated"], "--data", assets["prompts"])
    assert code == EXIT_DATA and "is not a valid safetensors file" in line
    # The output is checked before the evaluation, which here would take a while.
    blocked = assets["prompts"] / "metrics.json"
    code, line = _run(capsys, "eval", "--model", assets["model"], "--output", blocked)
    assert (
        code == EXIT_USAGE and f"--output: cannot write {blocked}: {assets['prompts']} is a" in line
    )


@pytest.mark.slow
def test_sft_reports_unusable_demonstrations_and_bad_paths(assets, tmp_path, capsys):
    out = tmp_path / "sft"
    common = ["sft", "--model", assets["model"], "--steps", "1", "--no_progress"]
    code, line = _run(capsys, *common, "--data", assets["binary"], "--output", out)
    assert code == EXIT_DATA
    assert f"no usable demonstration in {assets['binary']}" in line and "bad_encoding" in line
    assert not out.exists()
    code, line = _run(capsys, *common, "--data", tmp_path / "gone.jsonl", "--output", out)
    assert code == EXIT_USAGE and "--data: " in line and "gone.jsonl: no such file" in line
    code, line = _run(capsys, *common, "--output", assets["prompts"] / "x")
    assert code == EXIT_USAGE and "--output: cannot create" in line
    code, line = _run(capsys, "sft", "--tiny", "hidden_size=wide")
    assert code == EXIT_USAGE and "--tiny: hidden_size='wide': expected int" in line


def test_gen_data_refuses_a_directory_as_output(tmp_path, capsys):
    code, line = _run(capsys, "gen-data", "-n", "3", "-o", tmp_path)
    assert code == EXIT_USAGE and f"--output: {tmp_path} is a directory" in line
    code, line = _run(capsys, "gen-data", "-n", "-1")
    assert code == EXIT_USAGE and "--num and --start must be >= 0" in line


def test_view_names_a_bad_dump_line_and_a_missing_input(tmp_path, capsys):
    dump = tmp_path / "episodes.jsonl"
    dump.write_bytes(b'{"kind": "eval"}\n\xff\xfe not text\n')
    code, line = _run(capsys, "view", dump)
    assert code == EXIT_DATA and f"{dump}:2: not JSON" in line
    code, line = _run(capsys, "view", tmp_path / "nothing")
    assert code == EXIT_USAGE and "no such run directory or dump file" in line
    assert not list(tmp_path.glob("*.html"))


def test_score_option_errors_exit_2_in_one_line(assets, tmp_path, capsys):
    code, line = _run(capsys, "score", assets["prompts"], "--config", tmp_path / "r.toml")
    assert code == EXIT_USAGE and "r.toml" in line
    code, line = _run(capsys, "score", assets["prompts"], "--threads", "0")
    assert code == EXIT_USAGE and "--threads must be at least 1" in line
    code, line = _run(capsys, "score", tmp_path / "in.jsonl")
    assert code == EXIT_USAGE and "cannot read" in line and "in.jsonl" in line


# ------------------------------------------------------------------ the mechanism


@pytest.mark.slow
def test_debug_shows_the_traceback_of_a_user_error(assets, tmp_path, capsys, monkeypatch):
    argv = [str(a) for a in _train(assets, tmp_path / "runs", "--model", assets["truncated"])]
    for args, env in ((["--debug", *argv], None), ([*argv, "--debug"], None), (argv, "1")):
        if env is not None:
            monkeypatch.setenv("AGENTRL_DEBUG", env)
        assert main(args) == EXIT_DATA
        err = capsys.readouterr().err
        assert "Traceback" in err and "SafetensorError" in err
        assert err.strip().splitlines()[-1].startswith("agentrl train: error: model file")


def test_an_unexpected_exception_is_reported_as_a_bug(monkeypatch, capsys):
    import agentrl.commands.gen_data as gen_data

    def broken(args):
        raise KeyError("internal")

    monkeypatch.setattr(gen_data, "run", broken)
    assert main(["gen-data"]) == EXIT_BUG
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'internal'" in err
    assert "internal error (KeyError): this is a bug in agentrl" in err


def test_os_errors_on_paths_are_user_errors_and_other_ones_are_bugs():
    denied = PermissionError(errno.EACCES, "Permission denied", "/data/x.jsonl")
    assert user_failure(denied) == (EXIT_USAGE, "/data/x.jsonl: Permission denied")
    full = OSError(errno.ENOSPC, "No space left on device", "runs/a/metrics.jsonl")
    assert user_failure(full) == (EXIT_DATA, "runs/a/metrics.jsonl: No space left on device")
    assert user_failure(OSError(errno.ECONNRESET, "Connection reset")) is None
    assert user_failure(ValueError("a bug")) is None


# ------------------------------------------------------------------ real processes


def _cli_process(*argv: object, code: str = "", **popen: object) -> subprocess.Popen[str]:
    """`agentrl ARGV` as a process; with ``code``, that Python program runs with ARGV instead
    of the CLI module (the checkout's root on its path, for `tests.fakes`)."""
    paths = [str(REPO / "python"), str(REPO), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    env.pop("AGENTRL_DEBUG", None)
    program = ["-c", code] if code else ["-m", "agentrl.cli"]
    return subprocess.Popen(
        [sys.executable, *program, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **popen,  # type: ignore[arg-type]
    )


def _sigterm_when(process: subprocess.Popen[str], ready: Callable[[], bool]) -> tuple[str, str]:
    """Send SIGTERM once ``ready()`` holds (within 300 s); the process's stdout and stderr."""
    deadline = time.monotonic() + 300
    try:
        while not ready():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "not ready within the time limit"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        return process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_the_process_exit_status_is_the_documented_code(assets, tmp_path):
    process = _cli_process(*_train(assets, tmp_path / "runs", "--model", assets["truncated"]))
    _, err = process.communicate(timeout=300)
    assert process.returncode == EXIT_DATA, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("agentrl train: error: model file")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_sigterm_saves_then_exits_143(assets, tmp_path):
    run_dir = tmp_path / "run"
    argv = _train(assets, tmp_path, "--model", assets["model"])
    argv[argv.index("--total_steps") + 1] = "1000"
    process = _cli_process(*argv)
    out, err = _sigterm_when(
        process, lambda: any(r["kind"] == "train" for r in read_metrics(run_dir / "metrics.jsonl"))
    )
    assert process.returncode == EXIT_SIGTERM, err
    assert "stopped early (received SIGTERM)" in out
    saved = sorted((run_dir / "checkpoints").glob("step-*"))
    assert saved and (saved[-1] / "model.pt").is_file()


# `agentrl train` in a process whose built-in warm start is small: the SMALL_SPEC model on
# 48 demonstrations, short batches, eager layers, a metrics line every step (the preset's own
# warm start spends minutes on its tokenizer, 12,000 demonstrations and compiling its layers
# before its first line). Everything else, the stop flag and the resume included, is the real
# command's.
SMALL_WARM_START = """
import dataclasses, sys
import agentrl.sft.pipeline as pipeline, agentrl.sft.train as train
from agentrl.cli import main
from tests.fakes.models import SMALL_SPEC

@dataclasses.dataclass(frozen=True)
class SmallRun(pipeline.SFTRunOptions):
    tiny: object = SMALL_SPEC
    num_demos: int = 48
    eval_tasks: int = 2

@dataclasses.dataclass
class SmallTraining(train.SFTConfig):
    batch_tokens: int = 512
    log_interval: int = 1

    def __post_init__(self) -> None:
        self.compile = False  # compiling the layers would take longer than the whole test

pipeline.SFTRunOptions, train.SFTConfig = SmallRun, SmallTraining
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_sigterm_during_the_warm_start_stops_it_and_the_next_run_resumes_it(tmp_path):
    """The built-in warm start listens to the run's stop flag: SIGTERM ends it after the
    step (a checkpoint, no half-trained model published, exit 143) instead of training it
    to the end first, and the next `agentrl train` resumes it from that checkpoint."""
    warm = tmp_path / "runs" / "tiny-sft"

    def lines_logged() -> int:
        return len(read_metrics(warm / "metrics.jsonl")) if warm.is_dir() else 0

    def run_until(grown_past: int) -> tuple[subprocess.CompletedProcess[str], int]:
        process = _cli_process("train", cwd=tmp_path, code=SMALL_WARM_START)
        out, err = _sigterm_when(process, lambda: lines_logged() > grown_past)
        done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
        return done, lines_logged()

    first, logged = run_until(0)
    assert first.returncode == EXIT_SIGTERM, first.stderr
    assert "training the warm start first" in first.stdout
    assert "stopped early (received SIGTERM): 0/200 steps" in first.stdout
    assert "run directory:" not in first.stdout  # the RL run wrote nothing: none exists
    assert not (tmp_path / "runs" / "tiny-rl").exists()
    assert list((warm / "checkpoints").glob("step-*"))
    assert not (warm / "config.json").exists()

    second, _ = run_until(logged + 1)
    assert second.returncode == EXIT_SIGTERM, second.stderr
    assert "resuming the stopped warm start" in second.stdout
    assert "resumed from" in second.stdout
