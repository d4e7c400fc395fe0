"""One engine factory: every rollout engine agentrl builds (training, the trainer/rollout
split, evaluation, `agentrl eval`, SFT's held-out score) comes from `create_rollout_engine`,
and the torch engine it builds takes the options it is given."""

from __future__ import annotations

import ast
from pathlib import Path

from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.remote import create_rollout_engine

from tests.fakes.models import tiny_model, tiny_tokenizer

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "agentrl"
FACTORY = PACKAGE / "rollout" / "remote" / "__init__.py"
ENGINE_CLASSES = {"TorchEngine", "SGLangEngine", "VLLMServerEngine", "VLLMEngine"}


def _constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ENGINE_CLASSES
    ]


def test_every_engine_is_built_by_the_one_factory() -> None:
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if path != FACTORY and (lines := _constructions(path))
    }
    assert found == {}
    assert _constructions(FACTORY)


def test_the_factory_passes_the_torch_engine_its_options() -> None:
    engine = create_rollout_engine(
        "torch",
        tokenizer=tiny_tokenizer(),
        rollout_model=tiny_model(seed=1),
        seed=3,
        version=2,
        kv_reuse=False,
        max_batch_rows=5,
    )
    assert isinstance(engine, TorchEngine)
    assert (engine.kv_reuse, engine.max_batch_rows, engine.version) == (False, 5, 2)
    assert not engine.compile_decode


def test_the_run_config_sets_the_torch_engines_rows_per_forward_pass() -> None:
    # `--rollout_batch_rows` reaches the engine of training and of `agentrl eval`: a large
    # evaluation then decodes in chunks instead of holding every row's cache at once.
    from agentrl.assembly.models import torch_engine_options
    from agentrl.config import resolve

    config = resolve(overrides={"rollout_batch_rows": 7})
    options = torch_engine_options(config, tiny_model(seed=1), None, None)
    assert options["max_batch_rows"] == 7 and options["kv_reuse"] is True
    assert resolve().rollout_batch_rows == 0  # the tiny preset decodes every row at once
    source = (PACKAGE / "assembly" / "evaluation.py").read_text(encoding="utf-8")
    assert "torch_engine_options(config, model, device, autocast)" in source
