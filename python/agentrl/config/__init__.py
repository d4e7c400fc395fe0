"""The RL trainer's typed configuration: one typed field per option.

Values come, lowest priority first, from a preset (``tiny``: the built-in CPU run, or
``compat``: the compatible defaults, see docs/compat.md), a TOML file (``--config run.toml``:
top-level keys or section tables), and command-line flags (``--learning_rate 1e-5``). The
reward options are :class:`agentrl.rewards.RewardConfig`'s own fields, so the scorer and the
trainer can never disagree on a name or a default.

A few options exist only so that command lines written for other trainers still parse
(see :data:`COMPAT_ONLY`): they accept their compatible default and reject any other value
with the reason and what to use instead.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agentrl.config.presets import DEFAULT_PRESET, PRESETS
from agentrl.errors import UsageError
from agentrl.observability.trackers import parse_report_to
from agentrl.rewards.config import RewardConfig
from agentrl.rl.advantages import ADVANTAGE_ESTIMATORS, ZERO_STD_MODES
from agentrl.rl.kl_control import CONTROL_METRICS
from agentrl.rl.losses import KL_ESTIMATORS, OBJECTIVE_BY_LEVEL, PROXIMAL_POLICIES, REDUCTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

SECTIONS = ("run", "model", "data", "rollout", "optim", "loss", "kl", "bc", "eval", "reward")


def _opt(section: str, default: Any, doc: str, choices: tuple[Any, ...] = ()) -> Any:
    return field(default=default, metadata={"section": section, "doc": doc, "choices": choices})


_FLAG = (0, 1)

_NO_REWARD_MODEL = (
    "scoring with a learned reward model is not part of this build; the rule-based "
    "tool-use reward scores every episode (tune it with the reward options)"
)

# Options kept so that command lines written for other trainers still parse. This build
# cannot honour another value, so each accepts only its compatible default; the text says
# why and what to use instead (see :func:`validate` and the option's --help).
COMPAT_ONLY: dict[str, str] = {
    "num_hidden_layers": "the depth is read from the checkpoint's weights; drop the flag",
    "max_seq_len": (
        "lengths are set by max_context_len (prompt tokens kept), max_gen_len (new tokens "
        "per turn) and max_total_len (packed training sequence); use those"
    ),
    "torch_rollout_use_cache": (
        "the torch rollout engine always generates with a KV cache (the same tokens, "
        "less compute); drop the flag"
    ),
    "global_prefetch_groups": (
        "each process fills its own rollout queue; size it with max_queue_groups"
    ),
    "use_reward_model": _NO_REWARD_MODEL,
    "reward_model_path": _NO_REWARD_MODEL,
}


@dataclass(frozen=True)
class TrainConfig:
    """Every trainer option, with the compatible default; presets change some defaults."""

    # ---- run: output, schedule, logging ----
    save_dir: str = _opt(
        "run", "../out", "directory for runs; a run writes to save_dir/save_weight"
    )
    save_weight: str = _opt(
        "run",
        "agentic_async_rl_tooluse_v5_fix",
        "run name (--run_name); with --model and no run name: <model name>-rl",
    )
    epochs: int = _opt("run", 1, "passes over the prompts when total_steps is 0")
    total_steps: int = _opt("run", 0, "training steps (0: epochs x prompts / batch_size)")
    scale_total_steps_by_world_size: int = _opt(
        "run", 1, "divide total_steps by the DDP world size (single process: no effect)", _FLAG
    )
    batch_size: int = _opt("run", 2, "prompt groups per training step")
    log_interval: int = _opt("run", 1, "steps between log lines")
    save_interval: int = _opt("run", 100, "steps between checkpoints (0: only at the end)")
    seed: int = _opt("run", 42, "random seed of the run")
    from_resume: int = _opt("run", 0, "resume from the run's latest checkpoint", _FLAG)
    device: str = _opt(
        "run", "auto", "cpu, cuda, cuda:N (CPU when no CUDA); auto picks CUDA when present"
    )
    dtype: str = _opt(
        "run",
        "bfloat16",
        "weights of the policy, reference and rollout copy (train and eval, CPU too); "
        "bfloat16/float16: float32 master weights and AdamW state in the optimizer, "
        "no loss scaling (train in bfloat16, not float16); with fsdp=1 the shards stay "
        "float32 and FSDP computes in dtype",
        ("bfloat16", "float16", "float32"),
    )
    use_compile: int = _opt("run", 0, "torch.compile the trained model", _FLAG)
    use_wandb: bool = _opt(
        "run", True, "add wandb to report_to when it is installed (a warning when it is not)"
    )
    wandb_project: str = _opt("run", "MiniMind-Agentic-Async-RL", "wandb / trackio project name")
    report_to: str = _opt(
        "run", "", "trackers, comma-separated: wandb, tensorboard, trackio ('': none)"
    )
    dump_rollouts: int = _opt(
        "run", 0, "steps between rollout dumps to run_dir/rollouts, for agentrl view (0: off)"
    )
    debug_interval: int = _opt("run", 0, "steps between printed sample trajectories (0: off)")
    keep_last: int = _opt("run", 3, "checkpoints kept (0: all)")
    progress: int = _opt("run", 1, "show a progress bar on a terminal", _FLAG)
    tensorboard_dir: str = _opt(
        "run",
        "",
        "TensorBoard log dir, logs in DIR/<run name> (set: adds tensorboard to report_to; "
        "'': run_dir/trackers)",
    )
    report: int = _opt("run", 1, "write report.png with the curves at the end", _FLAG)
    max_time: float = _opt("run", 0.0, "stop cleanly after this many seconds (0: none)")
    num_threads: int = _opt(
        "run", 0, "torch CPU threads, at most the usable cores (0: torch's choice)"
    )
    dist_backend: str = _opt(
        "run", "auto", "torchrun process group backend", ("auto", "nccl", "gloo")
    )
    dist_timeout_sec: float = _opt("run", 1800.0, "torchrun collective timeout")
    fsdp: int = _opt(
        "run",
        0,
        "shard policy and reference with FSDP2 under torchrun (multi_gpu_mode ddp); "
        "parameters in dtype, gradients reduced in float32",
        _FLAG,
    )
    gradient_checkpointing: int = _opt(
        "run", 0, "recompute activations in backward (less memory, more compute)", _FLAG
    )
    ref_offload: int = _opt(
        "run", 0, "keep the reference policy on the CPU; moved to the device per forward", _FLAG
    )

    # ---- model ----
    model: str = _opt("model", "", "policy spec: tiny, HF dir or .pth ('': from_weight)")
    tokenizer: str = _opt("model", "", "tokenizer dir for a MiniMind .pth checkpoint")
    chat_template: str = _opt(
        "model",
        "",
        "chat template: '' the tokenizer's own, builtin, or a Jinja / tokenizer_config.json file",
    )
    from_weight: str = _opt(
        "model", "full_sft", "loads save_dir/<from_weight>_<hidden_size>.pth when model is ''"
    )
    hidden_size: int = _opt("model", 768, "MiniMind width (names the .pth; else inferred)")
    num_hidden_layers: int = _opt("model", 8, "MiniMind depth")
    use_moe: int = _opt("model", 0, "MiniMind mixture-of-experts checkpoint naming", _FLAG)
    max_seq_len: int = _opt("model", 1024, "MiniMind sequence budget")
    lora_rank: int = _opt("model", 0, "LoRA adapter rank (0: train all weights)")
    lora_alpha: float = _opt("model", 32.0, "LoRA scaling alpha")
    lora_target_modules: str = _opt(
        "model", "all-linear", "LoRA targets: all-linear or comma-separated names"
    )
    lora_dropout: float = _opt("model", 0.0, "LoRA dropout")
    ref_from_rl_checkpoint: int = _opt(
        "model", 0, "on resume, load the reference policy from the RL checkpoint too", _FLAG
    )

    # ---- data and tools ----
    data_path: str = _opt(
        "data",
        "/workspace/minimind/dataset/agent_rl_math.jsonl",
        "prompts: JSONL, parquet, arrow, JSON array or a dataset directory ('': generated tasks)",
    )
    data_split: str = _opt("data", "train", "split read from a parquet/arrow/dataset --data")
    prompt_column: str = _opt(
        "data", "", "field with the prompt (text or messages) ('': prompt/question/messages)"
    )
    answer_column: str = _opt("data", "", "field with the ground truth ('': gt/answer/label)")
    tools_column: str = _opt("data", "", "field with the tool schemas ('': tools/functions)")
    max_samples: int = _opt("data", 0, "keep at most this many prompts (0: all)")
    filter_mode: str = _opt(
        "data", "math_only", "keep every prompt or only arithmetic tasks", ("all", "math_only")
    )
    require_gt: int = _opt("data", 1, "skip prompts without ground truth", _FLAG)
    time_mode: str = _opt("data", "fixed", "get_current_time answers", ("fixed", "live"))
    tool_subset: str = _opt(
        "data", "calculate_math,unit_converter,get_current_time", "comma-separated active tools"
    )
    inject_answer_instruction: int = _opt(
        "data", 1, "add the <answer> instruction to math prompts", _FLAG
    )
    augment_calculator_alias: int = _opt("data", 0, "also offer the calculator alias", _FLAG)
    force_all_tools: int = _opt("data", 0, "offer every active tool to every prompt", _FLAG)
    generated_tasks: int = _opt("data", 4000, "generated prompts when data_path is ''")
    tools: str = _opt(
        "data", "", "your tools: comma-separated pkg.module:object (tool, function, registry)"
    )
    environment: str = _opt(
        "data", "", "episode environment factory, pkg.module:Factory (one object per episode)"
    )
    mcp: str = _opt(
        "data", "", "stdio MCP server commands whose tools the policy gets ('; '-separated)"
    )

    # ---- rollout ----
    num_generations: int = _opt("rollout", 4, "trajectories per prompt (the group size G)")
    max_turns: int = _opt("rollout", 3, "assistant turns per episode")
    thinking_ratio: float = _opt("rollout", 0.0, "share of prompts rendered with thinking on")
    temperature: float = _opt("rollout", 0.7, "sampling temperature")
    top_p: float = _opt("rollout", 0.88, "nucleus sampling mass")
    top_k: int = _opt("rollout", 40, "top-k filter (0: off)")
    repetition_penalty: float = _opt("rollout", 1.03, "penalty on tokens already generated")
    logprob_temperature: str = _opt(
        "rollout",
        "raw",
        "behaviour and training log-probs: raw logits, or divided by the sampling temperature "
        "(the policy that sampled; top-p/top-k/penalty stay off-policy)",
        ("raw", "sampling"),
    )
    torch_rollout_use_cache: int = _opt("rollout", 1, "KV cache in generation", _FLAG)
    rollout_kv_reuse: int = _opt(
        "rollout",
        1,
        "torch engine: keep each episode's KV cache between turns and prefill only what a "
        "turn added (the same log-probs within float rounding, less compute)",
        _FLAG,
    )
    rollout_compile: int = _opt(
        "rollout",
        0,
        "torch engine: decode over a fixed-size KV cache with the model compiled "
        "(torch.compile; seconds to compile at the first rollout, then faster steps; "
        "tokens can differ from eager decoding by float rounding)",
        _FLAG,
    )
    max_context_len: int = _opt("rollout", 1024, "prompt tokens kept (from the end)")
    max_gen_len: int = _opt("rollout", 192, "new tokens per assistant turn")
    max_total_len: int = _opt("rollout", 1536, "packed sequence length (longer keeps its tail)")
    rollout_engine: str = _opt(
        "rollout",
        "torch",
        "torch (in process), sglang (a running SGLang server), vllm (vLLM in process), "
        "vllm-server (a running `vllm serve`, at rollout_url)",
        ("torch", "sglang", "vllm", "vllm-server"),
    )
    rollout_url: str = _opt("rollout", "http://localhost:8000", "vLLM server URL (vllm-server)")
    weight_sync: str = _opt(
        "rollout",
        "nccl",
        "how a rollout server gets new weights: nccl or gloo (broadcast over a process group "
        "the trainer hosts; vllm-server takes nccl only), disk (SGLang: files under "
        "sglang_shared_path)",
        ("nccl", "gloo", "disk"),
    )
    weight_sync_host: str = _opt(
        "rollout", "", "address the server reaches the trainer at for weight sync ('': auto)"
    )
    weight_sync_timeout_sec: float = _opt(
        "rollout", 600.0, "wait for the server's side of a weight-sync step"
    )
    multi_gpu_mode: str = _opt(
        "rollout",
        "trainer_rollout",
        "multi-GPU layout (one process here: no effect)",
        ("trainer_rollout", "ddp"),
    )
    sglang_base_url: str = _opt("rollout", "http://localhost:8998", "SGLang server URL")
    sglang_model_path: str = _opt("rollout", "../model", "model path the SGLang server loads")
    sglang_wait_sec: float = _opt("rollout", 60.0, "wait for the rollout server to be up")
    vllm_gpu_memory_utilization: float = _opt("rollout", 0.3, "vLLM GPU memory share")
    sglang_shared_path: str = _opt(
        "rollout", "./sglang_ckpt_agentic_async", "where weights are shared with SGLang (disk)"
    )
    async_workers: int = _opt("rollout", 1, "rollout threads (0: rollout in the trainer loop)")
    max_version_gap: int = _opt(
        "rollout", -1, "drop groups more versions behind (-1: max_head_offpolicyness)"
    )
    max_head_offpolicyness: int = _opt("rollout", 1, "default version gap")
    max_queue_groups: int = _opt("rollout", 0, "queue capacity (0: (gap + 1) x batch_size)")
    global_prefetch_groups: int = _opt("rollout", 0, "groups prefetched across ranks")
    prefill_queue_groups: int = _opt("rollout", 0, "groups queued before training starts")
    prefill_timeout_sec: float = _opt("rollout", 180.0, "wait for the initial queue fill")
    fetch_timeout_sec: float = _opt("rollout", 180.0, "wait for a batch of groups")
    policy_sync_interval: int = _opt("rollout", 1, "optimizer steps between weight syncs")
    async_stale_discount: float = _opt("rollout", 0.65, "loss weight x discount^staleness")
    strict_group_packing: int = _opt("rollout", 1, "train only on complete groups", _FLAG)
    dynamic_sampling_rounds: int = _opt(
        "rollout",
        0,
        "DAPO dynamic sampling: extra rollout rounds per step to fill it with groups "
        "whose rewards differ (0: off)",
    )

    # ---- optimisation ----
    learning_rate: float = _opt("optim", 2e-7, "AdamW peak rate (cosine to a tenth)")
    weight_decay: float = _opt("optim", 0.01, "AdamW weight decay")
    adam_beta1: float = _opt("optim", 0.9, "AdamW first-moment decay")
    adam_beta2: float = _opt("optim", 0.95, "AdamW second-moment decay")
    adam_epsilon: float = _opt("optim", 1e-8, "AdamW epsilon (larger: damps tiny-gradient weights)")
    accumulation_steps: int = _opt("optim", 2, "training steps per optimizer step")
    grad_clip: float = _opt("optim", 0.5, "gradient-norm clip (0: off)")
    warmup_steps: int = _opt("optim", 0, "optimizer steps of linear lr warm-up")
    micro_batch_size: int = _opt("optim", 0, "rows per forward pass (0: whole batch)")
    ppo_epochs: int = _opt("optim", 1, "passes over each rollout batch (PPO epochs)")
    num_mini_batches: int = _opt(
        "optim", 1, "optimizer updates per pass: the batch's rows cut into this many parts"
    )

    # ---- loss and advantages ----
    epsilon: float = _opt("loss", 0.20, "PPO clip width")
    epsilon_high: float = _opt("loss", 0.0, "upper clip width, clip-higher (0: epsilon)")
    use_decoupled_ppo: int = _opt("loss", 1, "decoupled PPO with a proximal policy", _FLAG)
    prox_logp_method: str = _opt(
        "loss", "loglinear", "proximal log-probs", tuple(PROXIMAL_POLICIES)
    )
    behav_imp_weight_cap: float = _opt("loss", 1.5, "cap of the behaviour importance weight")
    m2_threshold: float = _opt("loss", 0.0, "mask tokens with (behav - prox)^2 above (0: off)")
    loss_reduction: str = _opt(
        "loss",
        "sequence",
        "how token losses are averaged over the batch",
        tuple(REDUCTIONS),
    )
    importance_sampling_level: str = _opt(
        "loss",
        "token",
        "importance ratio per token or per sequence (GSPO)",
        tuple(OBJECTIVE_BY_LEVEL),
    )
    kl_estimator: str = _opt("loss", "k3", "KL estimator", tuple(KL_ESTIMATORS))
    max_completion_length: int = _opt("loss", 0, "dr_grpo's constant length (0: max_gen_len)")
    advantage_mode: str = _opt(
        "loss",
        "mixed",
        "how rewards become advantages",
        tuple(ADVANTAGE_ESTIMATORS),
    )
    adv_min_std: float = _opt("loss", 0.10, "group std below this counts as zero")
    zero_std_advantage_mode: str = _opt(
        "loss",
        "baseline",
        "advantage of a zero-std group in mixed mode",
        ZERO_STD_MODES,
    )
    adv_clip: float = _opt("loss", 3.0, "clip advantages to +-adv_clip (0: off)")
    negative_adv_scale: float = _opt(
        "loss", 1.0, "weight of negative advantages (1: symmetric, 0: learn from successes)"
    )

    # ---- KL control ----
    beta: float = _opt("kl", 0.03, "initial KL coefficient")
    beta_auto_tune: int = _opt("kl", 1, "adapt beta towards kl_target", _FLAG)
    beta_control_metric: str = _opt(
        "kl",
        "old_current_abs_delta",
        "drift metric beta follows",
        tuple(CONTROL_METRICS),
    )
    beta_update_interval: int = _opt("kl", 4, "optimizer steps between beta updates")
    beta_ema_decay: float = _opt("kl", 0.90, "EMA decay of the drift metric")
    kl_target: float = _opt("kl", 0.06, "drift the controller aims at")
    beta_min: float = _opt("kl", 0.01, "lower bound of beta")
    beta_max: float = _opt("kl", 0.08, "upper bound of beta")
    hard_kl_stop_mult: float = _opt("kl", 8.0, "skip updates past mult x kl_target (0: off)")

    # ---- behaviour-cloning auxiliary loss ----
    bc_coef: float = _opt("bc", 0.16, "BC weight while held (0: off)")
    bc_min_coef: float = _opt("bc", 0.03, "BC weight floor after the decay")
    bc_stop_steps: int = _opt("bc", 0, "no BC after this step (0: never stop)")
    bc_hold_steps: int = _opt("bc", 1200, "steps at the full BC weight")
    bc_decay_steps: int = _opt("bc", 4000, "steps of linear decay to the floor")
    bc_max_examples: int = _opt("bc", 24, "demonstrations per step")
    bc_max_exprs: int = _opt("bc", 8, "expressions per demonstration")
    bc_max_len: int = _opt("bc", 1536, "tokens per demonstration")
    bc_call_style: str = _opt(
        "bc",
        "compact",
        "call spelling: compact JSON or the chat template's",
        ("compact", "template"),
    )

    # ---- evaluation ----
    eval_ratio: float = _opt("eval", 0.02, "share of the prompts held out")
    eval_max_pool: int = _opt("eval", 256, "held-out prompts at most")
    eval_interval: int = _opt("eval", 100, "steps between evaluations (0: off)")
    eval_samples: int = _opt("eval", 32, "held-out prompts scored per evaluation")
    eval_seed: int = _opt("eval", 1234, "seed that fixes which prompts are scored")
    eval_temperature: float = _opt("eval", 0.0, "eval sampling temperature (0: greedy)")
    eval_generations: int = _opt(
        "eval",
        1,
        "episodes per scored prompt; with eval_temperature > 0, accuracy over all and pass@k",
    )
    eval_before_train: int = _opt("eval", 1, "evaluate the starting policy", _FLAG)
    eval_max_gen_len: int = _opt("eval", 192, "new tokens per eval turn (0: max_gen_len)")
    eval_data_path: str = _opt("eval", "", "held-out prompt-pool JSONL ('': split)")

    # ---- reward (every other reward option is a RewardConfig field) ----
    use_reward_model: int = _opt("reward", 0, "add a learned reward model's score", _FLAG)
    reward_model_path: str = _opt("reward", "../../internlm2-1_8b-reward", "reward model path")
    reward_funcs: str = _opt(
        "reward",
        "",
        "reward functions: comma-separated built-in names or pkg.module:function "
        "('': tool_use, or the environment's reward)",
    )
    reward_weights: str = _opt("reward", "", "weights of reward_funcs, e.g. 1.0,0.5 ('': 1 each)")
    reward: RewardConfig = field(default_factory=RewardConfig, metadata={"section": "reward"})

    def __post_init__(self) -> None:
        validate(self)

    # ---- views ----

    @property
    def run_dir(self) -> Path:
        return Path(self.save_dir) / self.save_weight

    @property
    def logprob_divisor(self) -> float:
        """What logits are divided by before log-probs are taken (1.0: the raw policy)."""
        return self.temperature if self.logprob_temperature == "sampling" else 1.0

    @property
    def effective_max_version_gap(self) -> int:
        """The staleness bound used when max_version_gap is -1 (one process)."""
        return self.max_head_offpolicyness if self.max_version_gap < 0 else self.max_version_gap

    @property
    def effective_max_queue_groups(self) -> int:
        if self.max_queue_groups > 0:
            return self.max_queue_groups
        return (self.effective_max_version_gap + 1) * self.batch_size

    def flat(self) -> dict[str, Any]:
        """Every option by name, reward options included (for ``agentrl.rl.config_from``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "reward"}
        out.update(self.reward.to_dict())
        out.pop("current_step", None)
        return out

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with options changed by name (reward options included)."""
        return TrainConfig.from_mapping({**self.flat(), **changes})

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Options from a flat name -> value mapping; unknown names are an error."""
        check_names(values)
        own = {k: _joined(k, v) for k, v in values.items() if k in _OWN}
        reward = {k: v for k, v in values.items() if k in _REWARD}
        return cls(**own, reward=RewardConfig.from_dict(reward))

    def to_toml(self) -> str:
        """The resolved options as a TOML document with one table per section."""
        flat = self.flat()
        lines = ["# agentrl train configuration (resolved)"]
        for section in SECTIONS:
            names = [n for n in flat if option_section(n) == section]
            lines.append(f"\n[{section}]")
            lines.extend(f"{n} = {_toml_value(flat[n])}" for n in names)
        return "\n".join(lines) + "\n"


_OWN = {f.name: f for f in fields(TrainConfig) if f.name != "reward"}
_REWARD = {f.name: f for f in fields(RewardConfig) if f.name != "current_step"}
OPTION_NAMES: tuple[str, ...] = (*_OWN, *_REWARD)


# Options holding a list, written as one comma-separated string (TOML may give a list).
LIST_OPTIONS = ("tools", "reward_funcs", "reward_weights")


# Options holding commands (which may contain commas), joined with ";".
COMMAND_OPTIONS = ("mcp",)


def _joined(name: str, value: Any) -> Any:
    if name in LIST_OPTIONS and isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if name in COMMAND_OPTIONS and isinstance(value, list | tuple):
        return ";".join(str(v) for v in value)
    return value


def option_section(name: str) -> str:
    return "reward" if name in _REWARD else str(_OWN[name].metadata["section"])


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def check_names(values: Iterable[str]) -> None:
    """Raise ValueError for unknown option names, suggesting the closest known one."""
    for name in values:
        if name not in _OWN and name not in _REWARD:
            close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown option {name!r}{hint}")


# ------------------------------------------------------------------ validation


def _fail(name: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"option {name}={value!r}: expected {expected}")


def _check_types(config: TrainConfig) -> None:
    for name, f in _OWN.items():
        value = getattr(config, name)
        kind = type(f.default)
        if kind is bool:
            if not isinstance(value, bool):
                raise _fail(name, value, "true or false")
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(name, value, "an integer")
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _fail(name, value, "a number")
            if not math.isfinite(value):
                raise _fail(name, value, "a finite number")
            object.__setattr__(config, name, float(value))
        elif not isinstance(value, str):
            raise _fail(name, value, "a string")
        choices = f.metadata["choices"]
        if choices and value not in choices:
            raise _fail(name, value, "one of " + ", ".join(map(str, choices)))


_AT_LEAST_ONE = (  # noqa: SIM905 - a word list reads better than a column of strings
    "epochs batch_size log_interval num_generations max_turns max_gen_len max_context_len "
    "accumulation_steps policy_sync_interval beta_update_interval bc_max_exprs bc_max_len "
    "eval_generations ppo_epochs num_mini_batches"
).split()
_NON_NEGATIVE = (  # noqa: SIM905
    "total_steps save_interval debug_interval keep_last max_time generated_tasks max_samples "
    "num_threads dynamic_sampling_rounds dump_rollouts "
    "top_k async_workers max_head_offpolicyness max_queue_groups global_prefetch_groups "
    "prefill_queue_groups prefill_timeout_sec fetch_timeout_sec weight_decay grad_clip "
    "warmup_steps "
    "lora_rank lora_alpha sglang_wait_sec dist_timeout_sec "
    "micro_batch_size epsilon_high behav_imp_weight_cap m2_threshold max_completion_length "
    "adv_min_std adv_clip beta beta_min beta_max hard_kl_stop_mult bc_coef bc_min_coef "
    "bc_stop_steps bc_hold_steps bc_decay_steps bc_max_examples eval_max_pool eval_interval "
    "eval_samples eval_temperature eval_max_gen_len temperature"
).split()
_UNIT_INTERVAL = ("thinking_ratio", "async_stale_discount", "negative_adv_scale",
                  "adam_beta1", "adam_beta2", "beta_ema_decay", "eval_ratio", "lora_dropout",
                  "vllm_gpu_memory_utilization")  # fmt: skip


def validate(config: TrainConfig) -> None:
    """Raise ValueError naming the first option whose value cannot work."""
    _check_types(config)
    for name in _AT_LEAST_ONE:
        if getattr(config, name) < 1:
            raise _fail(name, getattr(config, name), "at least 1")
    for name in _NON_NEGATIVE:
        if getattr(config, name) < 0:
            raise _fail(name, getattr(config, name), "0 or more")
    for name in _UNIT_INTERVAL:
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise _fail(name, getattr(config, name), "a value in [0, 1]")
    positive = ("learning_rate", "adam_epsilon", "epsilon", "kl_target", "repetition_penalty")
    for name in positive:
        if getattr(config, name) <= 0:
            raise _fail(name, getattr(config, name), "a positive number")
    if not 0.0 < config.top_p <= 1.0:
        raise _fail("top_p", config.top_p, "a value in (0, 1]")
    if config.max_version_gap < -1:
        raise _fail("max_version_gap", config.max_version_gap, "-1 (derived) or 0 or more")
    if config.max_total_len < 2:
        raise _fail("max_total_len", config.max_total_len, "at least 2")
    if config.beta_min > config.beta_max:
        raise ValueError(f"beta_min={config.beta_min} is above beta_max={config.beta_max}")
    parse_report_to(config.report_to)
    if config.logprob_temperature == "sampling" and config.rollout_engine != "torch":
        raise UsageError(
            "option logprob_temperature='sampling' needs rollout_engine='torch': the remote "
            "engines return log-probs of the raw policy"
        )
    if config.rollout_compile and config.rollout_engine != "torch":
        raise UsageError(
            "option rollout_compile=1 needs rollout_engine='torch': a rollout server "
            f"({config.rollout_engine!r}) runs its own kernels"
        )
    _check_weight_sync(config)
    if config.logprob_temperature == "sampling" and config.temperature <= 1e-6:
        raise _fail("temperature", config.temperature, "above 0 with logprob_temperature=sampling")
    for name, reason in COMPAT_ONLY.items():
        value, default = getattr(config, name), _OWN[name].default
        if value != default:
            raise ValueError(
                f"option {name}={value!r}: accepted only at its default {default!r}, for "
                f"compatibility: {reason}"
            )


def _check_weight_sync(config: TrainConfig) -> None:
    """``weight_sync`` other than the default only where a server can honour it."""
    engine, sync = config.rollout_engine, config.weight_sync
    if config.weight_sync_timeout_sec <= 0:
        raise _fail("weight_sync_timeout_sec", config.weight_sync_timeout_sec, "above 0")
    if sync == "disk" and engine != "sglang":
        raise UsageError(f"option weight_sync='disk' needs rollout_engine='sglang', not {engine!r}")
    if sync == "gloo" and engine != "sglang":
        raise UsageError(
            f"option weight_sync='gloo' needs rollout_engine='sglang' (rollout_engine={engine!r}: "
            + ("the vLLM server receives over NCCL only)" if engine == "vllm-server"
               else "no server receives weights)")
        )  # fmt: skip


# ------------------------------------------------------------------ presets and files


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file's options as a flat mapping; section tables must hold their own options."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from exc
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                raise ValueError(f"{path}: unknown table [{key}]; tables: {', '.join(SECTIONS)}")
            for name, item in value.items():
                try:
                    check_names([name])
                except ValueError as exc:
                    raise ValueError(f"{path}: [{key}] {exc}") from None
                if option_section(name) != key:
                    raise ValueError(f"{path}: [{key}] {name} belongs in [{option_section(name)}]")
                flat[name] = item
        else:
            if key != "preset":
                try:
                    check_names([key])
                except ValueError as exc:
                    raise ValueError(f"{path}: {exc}") from None
            flat[key] = value
    return flat


def resolve(
    preset: str | None = None,
    config_file: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Preset, then the TOML file, then explicit overrides (e.g. command-line flags)."""
    from_file = read_toml(config_file) if config_file else {}
    name = preset or from_file.pop("preset", None) or DEFAULT_PRESET
    from_file.pop("preset", None)
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    chosen = {**from_file, **dict(overrides or {})}
    values: dict[str, Any] = {**PRESETS[name], **chosen}
    check_names(values)
    if chosen.get("model") and "save_weight" not in chosen:
        values["save_weight"] = run_name_for(str(chosen["model"]))
    return TrainConfig.from_mapping(values)


def run_name_for(model: str) -> str:
    """The run directory's name for a policy spec: its last path part (a file without its
    suffix, a Hub id's name) plus ``-rl``, so runs of different models do not collide."""
    text = model.rstrip("/\\")
    part = text.replace("\\", "/").rsplit("/", 1)[-1]
    if "." in part and Path(text).suffix.lower() in (".gguf", ".pth", ".pt", ".bin"):
        part = part.rsplit(".", 1)[0]
    return (part or "model") + "-rl"


# ------------------------------------------------------------------ command line


def _str2bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on", "y", "t"):
        return True
    if lowered in ("0", "false", "no", "off", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {text!r}")


def _cli_type(default: Any) -> Any:
    if isinstance(default, bool):
        return _str2bool
    return type(default) if isinstance(default, int | float) else str


def _help(name: str, doc: str, default: Any) -> str:
    if name in COMPAT_ONLY:
        text = f"{doc}: compatibility only, {default!r} is the one value accepted; "
        return (text + COMPAT_ONLY[name]).replace("%", "%%")
    tiny = PRESETS[DEFAULT_PRESET]
    preset = f"; {DEFAULT_PRESET} preset: {tiny[name]!r}" if name in tiny else ""
    return f"{doc} (default: {default!r}{preset})".replace("%", "%%")


def add_config_arguments(
    parser: argparse.ArgumentParser, names: Collection[str] | None = None
) -> None:
    """One flag per option (all, or only ``names``); only flags given on the line are set.

    ``--config`` and ``--preset`` are always there: a TOML file may hold any option, so
    one file can describe a run for training and evaluation alike.
    """
    if names is not None:
        check_names(names)
    wanted = set(OPTION_NAMES if names is None else names)
    parser.add_argument("--config", default=None, help="TOML file with options")
    parser.add_argument(
        "--preset", default=None, choices=sorted(PRESETS), help="base values (default: tiny)"
    )
    used = [s for s in SECTIONS if any(option_section(n) == s for n in wanted)]
    groups = {s: parser.add_argument_group(f"{s} options") for s in used}
    for name, f in _OWN.items():
        if name not in wanted:
            continue
        flags = [f"--{name}"]
        if name == "data_path":
            flags.append("--data")
        if name == "save_weight":
            flags.append("--run_name")
        choices = f.metadata["choices"] or None
        repeatable = {"action": "append"} if name in COMMAND_OPTIONS else {}
        groups[f.metadata["section"]].add_argument(
            *flags,
            dest=name,
            type=_cli_type(f.default),
            choices=choices,
            default=argparse.SUPPRESS,
            help=_help(name, f.metadata["doc"], f.default)
            + (" (repeatable)" if repeatable else ""),
            **repeatable,
        )
    for name, f in _REWARD.items():
        if name not in wanted:
            continue
        groups["reward"].add_argument(
            f"--{name}",
            dest=name,
            type=_cli_type(f.default),
            default=argparse.SUPPRESS,
            help=_help(name, f.metadata.get("doc", ""), f.default),
        )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The resolved config of a parsed command line; a bad option or file is a UsageError."""
    given = {k: v for k, v in vars(args).items() if k in _OWN or k in _REWARD}
    try:
        return resolve(getattr(args, "preset", None), getattr(args, "config", None), given)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


__all__ = [
    "COMPAT_ONLY",
    "DEFAULT_PRESET",
    "OPTION_NAMES",
    "PRESETS",
    "SECTIONS",
    "TrainConfig",
    "add_config_arguments",
    "check_names",
    "config_from_args",
    "option_section",
    "read_toml",
    "resolve",
    "run_name_for",
    "validate",
]
