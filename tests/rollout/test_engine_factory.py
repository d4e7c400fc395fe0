"""One engine factory: every rollout engine agentrl builds (training, the trainer/rollout
split, evaluation, `agentrl eval`, SFT's held-out score) comes from `create_rollout_engine`,
and the engine it builds takes its settings from the run's rollout section."""

from __future__ import annotations

import ast
from pathlib import Path

from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.options import RolloutConfig
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


def test_the_factory_passes_the_torch_engine_its_section() -> None:
    engine = create_rollout_engine(
        "torch",
        RolloutConfig(rollout_kv_reuse=False, rollout_batch_rows=5, rollout_batch_tokens=900),
        tokenizer=tiny_tokenizer(),
        rollout_model=tiny_model(seed=1),
        seed=3,
        version=2,
    )
    assert isinstance(engine, TorchEngine)
    assert (engine.kv_reuse, engine.max_batch_rows, engine.version) == (False, 5, 2)
    assert engine.max_batch_tokens == 900
    assert not engine.compile_decode


def test_the_run_config_sets_the_torch_engines_rows_per_forward_pass() -> None:
    # `--rollout_batch_rows` reaches the engine of training and of `agentrl eval`: a large
    # evaluation then decodes in chunks instead of holding every row's cache at once.
    from agentrl.config import resolve

    config = resolve(overrides={"rollout_batch_rows": 7})
    engine = create_rollout_engine(
        "torch", config, tokenizer=tiny_tokenizer(), rollout_model=tiny_model(seed=1)
    )
    assert engine.max_batch_rows == 7 and engine.kv_reuse is True
    assert resolve().rollout_batch_rows == 0  # the tiny preset decodes every row at once
    # Every call in the package hands the engine a rollout section (its second argument).
    calls = [
        (str(path.relative_to(PACKAGE)), node)
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "create_rollout_engine"
    ]
    assert {name for name, _ in calls} >= {"assembly/engines.py", "training/evaluation.py"}
    assert [name for name, call in calls if len(call.args) < 2] == []
