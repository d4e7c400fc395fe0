"""What the test modules share: small models and tokenizers, run files, comparable forms.

Building a tokenizer trains a BPE on generated text; the cached builders below do it once
per session, so the suite stays fast and every module sees the same vocabulary. The
fixtures in `conftest.py` hand these out; modules import the plain functions from here
where a fixture does not fit (module constants, hypothesis strategies, helpers called
with arguments).
"""

from __future__ import annotations

import copy
import functools
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from agentrl.models.tiny import TinySpec, build_model, build_tokenizer, demo_corpus, save_preset

# The small tiny-preset size the model, SFT and training-run tests share.
SMALL_SPEC = TinySpec(
    vocab_size=3072,
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    intermediate_size=64,
    corpus_tasks=150,
)
# The few-step training run the trainer, LoRA, distributed and remote-engine tests start
# from: no evaluation, report, progress bar or periodic checkpoint.
SHORT_RUN: dict[str, Any] = dict(
    filter_mode="all",
    # One optimizer update per step (the preset makes four), so that tests can compare a
    # step's gradient with one computed another way; tests/rl/test_ppo_updates.py covers more.
    num_mini_batches=1,
    batch_size=2,
    num_generations=2,
    max_turns=1,
    max_context_len=384,
    max_total_len=448,
    async_workers=0,
    eval_before_train=0,
    eval_interval=0,
    eval_ratio=0.0,
    progress=0,
    report=0,
    save_interval=0,
    learning_rate=1e-3,
    accumulation_steps=1,
    use_wandb=False,
)

# A one-step `agentrl train` run from the command line: the options a command needs to get
# past loading and through one small step (the caller adds --model, --data, --save_dir).
ONE_STEP_RUN = [
    "--filter_mode",
    "all",
    "--total_steps",
    "1",
    "--batch_size",
    "1",
    "--num_generations",
    "2",
    "--max_turns",
    "1",
    "--max_gen_len",
    "8",
    "--eval_before_train",
    "0",
    "--progress",
    "0",
    "--report",
    "0",
    "--async_workers",
    "0",
]


def one_step_train_args(files: Path, save_dir: Path, *extra: str) -> list[str]:
    """`agentrl train` of `write_run_files` output for `ONE_STEP_RUN`, writing to
    ``save_dir/run``, then ``extra``."""
    return [
        "train",
        "--model",
        str(files / "model"),
        "--data",
        str(files / "prompts.jsonl"),
        "--save_dir",
        str(save_dir),
        "--save_weight",
        "run",
        *ONE_STEP_RUN,
        *extra,
    ]


def fresh_small_tokenizer() -> Any:
    """A newly built tokenizer for SMALL_SPEC (for tests of determinism)."""
    return build_tokenizer(SMALL_SPEC, demo_corpus(SMALL_SPEC.corpus_tasks, SMALL_SPEC.corpus_seed))


@functools.lru_cache(maxsize=1)
def small_tokenizer() -> Any:
    """The session's shared tokenizer for SMALL_SPEC (do not mutate it)."""
    return fresh_small_tokenizer()


def write_run_files(root: Path, *, prompt_seed: int = 3, prompts: int = 24) -> Path:
    """``root/model`` (a SMALL_SPEC preset) and ``root/prompts.jsonl``; returns ``root``."""
    from agentrl.data.synthetic import TaskGenerator, write_tasks

    tokenizer = small_tokenizer()
    save_preset(build_model(SMALL_SPEC, len(tokenizer)), tokenizer, root / "model")
    generator = TaskGenerator(seed=prompt_seed)
    tasks = list(generator.tasks(prompts))
    write_tasks(str(root / "prompts.jsonl"), tasks, generator.tools())
    return root


def short_run_config(files: Path, save_dir: Path, name: str, **overrides: Any) -> Any:
    """A `tiny`-preset TrainConfig over `write_run_files` output: SHORT_RUN, then
    ``overrides``; the run writes to ``save_dir/name``."""
    from agentrl.config import resolve

    values = dict(
        model=str(files / "model"),
        data_path=str(files / "prompts.jsonl"),
        save_dir=str(save_dir),
        save_weight=name,
    )
    return resolve(preset="tiny", overrides={**values, **SHORT_RUN, **overrides})


# The checkout's root: `examples.<name>` imports from there.
REPO = Path(__file__).resolve().parents[1]
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


def use_examples(monkeypatch: Any) -> None:
    """Make `examples.<name>` importable as `agentrl train` finds it: from the working
    directory (the checkout's root), not from a path entry the suite happened to add."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(REPO))])


def write_example_data(name: str, path: Path, monkeypatch: Any, n: int = 12) -> Path:
    """``n`` tasks of ``examples/<name>.py`` (its ``write_data``) at ``path``; see
    `use_examples`."""
    from agentrl.utils.imports import load_object

    use_examples(monkeypatch)
    load_object(f"examples.{name}:write_data")(str(path), n=n)
    return path


def example_train_args(
    model: Path, data: Path, out: Path, *, steps: int = 2, max_turns: int = 2
) -> list[str]:
    """`agentrl train` arguments for a short run of an example on the tiny model: ``steps``
    steps of 2 prompts x 2 generations, 8-token turns, a 20% held-out split evaluated on 2
    samples, nothing periodic; the run writes to ``out/run``. Callers add the example's
    own options after these (a later repeat of an option wins)."""
    return [
        "train",
        "--model",
        str(model),
        "--data",
        str(data),
        "--total_steps",
        str(steps),
        "--save_dir",
        str(out),
        "--save_weight",
        "run",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
        "--max_turns",
        str(max_turns),
        "--max_gen_len",
        "8",
        "--eval_ratio",
        "0.2",
        "--eval_samples",
        "2",
        "--eval_max_gen_len",
        "8",
        "--eval_interval",
        "0",
        "--progress",
        "0",
        "--report",
        "0",
        "--save_interval",
        "0",
    ]


def eval_args(model: Path, data: Path, *, samples: int, max_gen_len: int) -> list[str]:
    """`agentrl eval` of ``model`` on ``samples`` prompts of ``data`` (every line kept), one
    turn of at most ``max_gen_len`` tokens each; callers add their own options after these."""
    return [
        "eval",
        "--model",
        str(model),
        "--data",
        str(data),
        "--filter_mode",
        "all",
        "--eval_samples",
        str(samples),
        "--max_turns",
        "1",
        "--eval_max_gen_len",
        str(max_gen_len),
    ]


def cpu_models(model: torch.nn.Module, tokenizer: Any) -> Any:
    """`Models` for a float32 training step on the CPU: a trainable copy of ``model`` as the
    policy and a frozen copy as the reference (``model`` itself is left as it is)."""
    from agentrl.training.setup import Models, autocast_factory

    policy = copy.deepcopy(model).train()
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    cpu = torch.device("cpu")
    return Models(
        policy,
        policy,
        reference,
        reference,
        tokenizer,
        cpu,
        autocast_factory(cpu, "float32"),
        "test",
    )


def rolled_out_batch(
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    prompts: int,
    num_generations: int,
    max_new_tokens: int,
) -> list[Any]:
    """One batch (2 prompts x ``num_generations``, one turn, temperature 1, seed 0) that a
    copy of ``model`` samples from ``prompts`` generated held-out tasks with the built-in
    tools, at policy version 0."""
    from agentrl.rollout import EpisodeConfig, PolicyVersion, SamplingParams
    from agentrl.rollout.engine import TorchEngine
    from agentrl.tools import builtin_registry
    from agentrl.training.setup import generated_heldout_samples
    from agentrl.training.sources import InlineSource

    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
    episode = EpisodeConfig(max_turns=1, max_new_tokens=max_new_tokens, sampling=sampling)
    source = InlineSource(
        TorchEngine(copy.deepcopy(model), tokenizer, seed=0),
        generated_heldout_samples(prompts),
        builtin_registry(),
        episode,
        num_generations=num_generations,
        batch_size=2,
        seed=0,
        version=PolicyVersion(),
    )
    return source.next_batch(1)


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> Any:
    """A 512-token byte-level BPE with the chat layout's special and markup tokens."""
    spec = TinySpec(vocab_size=512, corpus_tasks=60)
    return build_tokenizer(spec, demo_corpus(60, 1))


def tiny_model(seed: int = 0, layers: int = 2, hidden: int = 64, init: float = 0.2) -> Any:
    """A random Qwen3 over `tiny_tokenizer`, with weights large enough to vary."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = tiny_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        initializer_range=init,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return model.eval()


def tiny_llama(seed: int = 0, layers: int = 2) -> Any:
    """A random Llama (grouped-query attention) over `tiny_tokenizer`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


class UniformLogits(torch.nn.Module):
    """Equal logits over 4 tokens: the cross-entropy of any label is ln 4."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.bias.expand(*input_ids.shape, 4))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file (blank lines skipped)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def typed(value: Any, *, nonfinite_as_text: bool = False) -> Any:
    """A comparable form of JSON-like data (and tuples) that keeps types (``1``, ``1.0``
    and ``True`` differ) and dict key order, with NaN equal to itself.

    ``nonfinite_as_text``: NaN and the infinities compare equal to the strings "nan",
    "inf" and "-inf", as golden files write them.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        if nonfinite_as_text and not math.isfinite(value):
            return ("str", "nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("none", None)
    if isinstance(value, list | tuple):
        items = [typed(v, nonfinite_as_text=nonfinite_as_text) for v in value]
        return (type(value).__name__, items)
    if isinstance(value, dict):
        return (
            "dict",
            [(k, typed(v, nonfinite_as_text=nonfinite_as_text)) for k, v in value.items()],
        )
    raise TypeError(f"unexpected {type(value).__name__} in JSON-like data")


def same_float(a: float, b: float) -> bool:
    """Bit-level agreement: NaN equals NaN, and 0.0 differs from -0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def fastest_seconds(run: Callable[[], Any], repeats: int = 3) -> float:
    """The best wall time of ``repeats`` calls (ignores scheduling noise on a busy machine)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


class InterruptedReader(io.RawIOBase):
    """A byte stream during whose second read the user presses Ctrl-C (SIGINT)."""

    def __init__(self, data: bytes) -> None:
        self.data = io.BytesIO(data)
        self.calls = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.calls += 1
        if self.calls == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return self.data.read(size)


def launch_torchrun(
    script: Path, args: list[str], out: Path, timeout: float
) -> tuple[int, str, float]:
    """Run ``script args...`` on two CPU ranks under torchrun; (exit code, output, seconds).

    The whole process group is killed when it outlives ``timeout``, and the test fails with
    the tail of the output, so a hung collective never hangs the suite.
    """
    import pytest

    out.mkdir(parents=True, exist_ok=True)
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", str(script), *args]
    # The script lives in a layer folder; its ranks import `helpers` from tests/.
    path = os.pathsep.join(
        p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    began = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun {' '.join(args)} did not end within {timeout}s:\n{output[-4000:]}")
    return proc.returncode, output, time.monotonic() - began
