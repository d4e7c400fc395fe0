"""Every option is read by the code path it configures (an option nothing reads would be
accepted and silently do nothing).

Two checks together cover every option of ``agentrl train``:

* a traced run: a short training run of the tiny preset with a config whose attribute
  reads are recorded, on the run's config and on every component config cut from it
  (``part(OptimConfig, config)``), leaving out the config machinery itself (flattening,
  TOML, validation, ``part``): an option read there was read by the code it configures;
* :data:`READ_BY`: the options of modes that run cannot enter (servers, several ranks,
  LoRA, a judge, the sandbox, resuming, ...), each with the function of that mode that
  reads it; that function's code must read the option (``x.name`` or
  ``getattr(x, "name")``), so renaming or dropping the read fails the test.

The options accepted only at their reference default (``COMPAT_ONLY``) are left out: they
refuse any other value.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import sys
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest
from agentrl import config as config_module
from agentrl.config import COMPAT_ONLY, COMPONENTS, TrainConfig
from agentrl.utils import options as options_module

from tests.fakes.runs import short_run_config

# Option -> the function (module:qualified name) that reads it in the mode it configures.
READ_BY: dict[str, str] = {
    "agent_timeout": "agentrl.assembly.sources:agent_source",
    "bc_call_style": "agentrl.training.demonstrations:compute_bc_aux_loss",
    "bc_max_examples": "agentrl.training.demonstrations:compute_bc_aux_loss",
    "bc_max_exprs": "agentrl.training.demonstrations:compute_bc_aux_loss",
    "bc_max_len": "agentrl.training.demonstrations:compute_bc_aux_loss",
    "bc_decay_steps": "agentrl.rl.bc:bc_coef_at_step",
    "bc_hold_steps": "agentrl.rl.bc:bc_coef_at_step",
    "bc_min_coef": "agentrl.rl.bc:bc_coef_at_step",
    "bc_stop_steps": "agentrl.rl.bc:bc_coef_at_step",
    "beta_max": "agentrl.rl.kl_control:update_beta",
    "beta_min": "agentrl.rl.kl_control:update_beta",
    "dist_backend": "agentrl.placement:placement_for",
    "dist_timeout_sec": "agentrl.placement:placement_for",
    "epochs": "agentrl.assembly.settings:planned_total_steps",
    "scale_total_steps_by_world_size": "agentrl.assembly.settings:planned_total_steps",
    "fetch_timeout_sec": "agentrl.assembly.sources:local_source",
    "flush_accumulation": "agentrl.trainer:Trainer._end_accumulation",
    "save_pth": "agentrl.trainer:Trainer._save_checkpoint",
    "from_weight": "agentrl.assembly.models:model_spec",
    "hidden_size": "agentrl.assembly.models:model_spec",
    "use_moe": "agentrl.assembly.models:model_spec",
    "generated_tasks": "agentrl.assembly.prompts:load_prompts",
    "generated_mix": "agentrl.assembly.prompts:load_prompts",
    "judge_api_model": "agentrl.rewards.judge:judge_settings",
    "judge_batch_size": "agentrl.rewards.judge:judge_settings",
    "judge_max_tokens": "agentrl.rewards.judge:judge_settings",
    "judge_mode": "agentrl.rewards.judge:judge_settings",
    "judge_model": "agentrl.rewards.judge:judge_settings",
    "judge_rubric": "agentrl.rewards.judge:judge_settings",
    "judge_url": "agentrl.rewards.judge:judge_settings",
    "logprob_temperature": "agentrl.training.step:_policy_pass",
    "lora_alpha": "agentrl.placement.adapters:adapter_for",
    "lora_dropout": "agentrl.placement.adapters:adapter_for",
    "lora_target_modules": "agentrl.placement.adapters:adapter_for",
    "ref_from_rl_checkpoint": "agentrl.trainer:Trainer._resume_if_asked",
    "max_head_offpolicyness": "agentrl.placement.split:split_version_gap",
    "max_version_gap": "agentrl.rollout.async_rollout:AsyncRollout.__init__",
    "max_queue_groups": "agentrl.placement.split:split_queue_groups",
    "mcp_max_restarts": "agentrl.assembly.task:start_mcp_servers",
    "python_allow_network": "agentrl.tools.python_sandbox:limits_from_options",
    "python_memory_mb": "agentrl.tools.python_sandbox:limits_from_options",
    "python_timeout": "agentrl.tools.python_sandbox:limits_from_options",
    "python_keep_state": "agentrl.envs.parts:task_parts",
    "rollout_url": "agentrl.rollout.remote:create_rollout_engine",
    "sglang_base_url": "agentrl.rollout.remote:create_rollout_engine",
    "sglang_model_path": "agentrl.rollout.remote:create_rollout_engine",
    "sglang_shared_path": "agentrl.rollout.remote:create_rollout_engine",
    "sglang_wait_sec": "agentrl.rollout.remote:create_rollout_engine",
    "vllm_gpu_memory_utilization": "agentrl.rollout.remote:create_rollout_engine",
    "weight_sync": "agentrl.rollout.remote:create_rollout_engine",
    "weight_sync_host": "agentrl.rollout.remote:create_rollout_engine",
    "weight_sync_timeout_sec": "agentrl.rollout.remote:create_rollout_engine",
    "save_dir": "agentrl.assembly.models:model_spec",
}

# Config machinery: reads there are not the configured code reading its option.
_MACHINERY_FILES = {os.path.abspath(options_module.__file__), "<string>"}
_MACHINERY_FUNCTIONS = {
    (os.path.abspath(config_module.__file__), name)
    for name in (
        "flat",
        "to_toml",
        "validate",
        "from_mapping",
        "replace",
        "part",
        "__post_init__",
        "_joined",
    )
}


def option_names() -> set[str]:
    return {f.name for component in COMPONENTS for f in fields(component)} - set(COMPAT_ONLY)


def _reads_in(function: object, name: str) -> bool:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == name:
            return True
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == name
        ):
            return True
    return False


def _resolve(path: str) -> object:
    module_name, qualname = path.split(":")
    target: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def test_each_mode_specific_option_is_read_by_the_function_named_for_it() -> None:
    unknown = sorted(set(READ_BY) - option_names())
    assert unknown == [], f"not options (renamed or removed?): {unknown}"
    unread = [
        f"{name} (not read in {path})"
        for name, path in READ_BY.items()
        if not _reads_in(_resolve(path), name)
    ]
    assert unread == []


@pytest.mark.slow
def test_every_option_is_read_by_the_run_or_by_its_modes_reader(run_files, tmp_path) -> None:
    """A traced two-step tiny run reads every option that is not in :data:`READ_BY`."""
    from agentrl.trainer import Trainer

    names = option_names()
    read: set[str] = set()

    def traced(self: object, name: str) -> object:
        if name in names:
            frame = sys._getframe(1)
            where = os.path.abspath(frame.f_code.co_filename)
            if where not in _MACHINERY_FILES and (where, frame.f_code.co_name) not in (
                _MACHINERY_FUNCTIONS
            ):
                read.add(name)
        return object.__getattribute__(self, name)

    classes = (*COMPONENTS, TrainConfig)
    saved = {cls: cls.__dict__.get("__getattribute__") for cls in classes}
    config = short_run_config(
        run_files,
        tmp_path,
        "traced",
        total_steps=2,
        eval_interval=1,
        save_interval=1,
        eval_samples=2,
        dump_rollouts=1,
        max_gen_len=8,
        eval_max_gen_len=8,
    )
    try:
        for cls in classes:
            cls.__getattribute__ = traced  # type: ignore[method-assign,assignment]
        Trainer(config).run()
    finally:
        for cls, original in saved.items():
            if original is None:
                delattr(cls, "__getattribute__")
            else:
                cls.__getattribute__ = original  # type: ignore[method-assign]
    missing = sorted(names - read - set(READ_BY))
    assert missing == [], f"options neither read by the run nor listed in READ_BY: {missing}"
    assert Path(config.run_dir, "metrics.jsonl").exists()
