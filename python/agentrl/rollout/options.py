"""How episodes are generated (the ``rollout`` section of the run's config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.utils.options import option

__all__ = ["RolloutConfig"]


@dataclass(frozen=True)
class RolloutConfig:
    """Episodes, sampling, the rollout engine and asynchronous production."""

    SECTION: ClassVar[str] = "rollout"

    num_generations: int = option(
        4, "trajectories per prompt (the group size G)", check=">=1", common=True
    )
    max_turns: int = option(3, "assistant turns per episode", check=">=1", common=True)
    tool_workers: int = option(
        8, "episodes whose tool calls run at once (1: one episode's after another)", check=">=1"
    )
    thinking_ratio: float = option(0.0, "share of prompts rendered with thinking on", check="[0,1]")
    temperature: float = option(0.7, "sampling temperature", check=">=0", common=True)
    top_p: float = option(0.88, "nucleus sampling mass", check="(0,1]")
    top_k: int = option(40, "top-k filter (0: off)", check=">=0")
    min_p: float = option(
        0.0, "drop tokens below min_p x the top token's probability (0: off)", check="[0,1]"
    )
    stop_at_answer_end: bool = option(
        False, "end a turn once it has written </answer> (the answer ends the episode)"
    )
    call_parser: str = option(
        "lenient",
        "which calls run: lenient (every call format the parser reads) or reward (only the "
        "calls the reward's own parser finds)",
        ("lenient", "reward"),
    )
    call_mode: str = option(
        "auto",
        "what the policy's tool calls are: execute (run, results observed, more turns) or "
        "answer (the first turn's calls are the answer: recorded, not run; the episode "
        "ends); auto: answer for function-calling data, else execute",
        ("auto", "execute", "answer"),
    )
    keep_eos: bool = option(
        False, "keep the token that ends each turn in the response, trained on with the rest"
    )
    repetition_penalty: float = option(1.03, "penalty on tokens already generated", check=">0")
    logprob_temperature: str = option(
        "raw",
        "behaviour and training log-probs: raw logits, or divided by the sampling temperature "
        "(the policy that sampled; top-p/top-k/penalty stay off-policy)",
        ("raw", "sampling"),
    )
    torch_rollout_use_cache: bool = option(True, "KV cache in generation")
    rollout_kv_reuse: bool = option(
        True,
        "torch engine: keep each episode's KV cache between turns and prefill only what a "
        "turn added (the same log-probs within float rounding, less compute)",
    )
    rollout_batch_rows: int = option(
        0,
        "torch engine: rows decoded in one forward pass, in chunks of similar length (0: all "
        "at once); bounds the memory of a large evaluation (every row's KV cache at once)",
        check=">=0",
    )
    rollout_batch_tokens: int = option(
        0,
        "torch engine: tokens a forward pass's KV cache holds at most, rows x (their longest "
        "prompt + new tokens), under the rollout_batch_rows cap (0: rows alone); short "
        "prompts then go many a pass, long ones few",
        check=">=0",
    )
    rollout_compile: bool = option(
        False,
        "torch engine: decode over a fixed-size KV cache with the model compiled "
        "(torch.compile; seconds to compile at the first rollout, then faster steps; "
        "tokens can differ from eager decoding by float rounding)",
    )
    max_context_len: int = option(1024, "prompt tokens kept (from the end)", check=">=1")
    max_gen_len: int = option(192, "new tokens per assistant turn", check=">=1", common=True)
    max_total_len: int = option(1536, "packed sequence length (longer keeps its tail)", check=">=2")
    rollout_engine: str = option(
        "torch",
        "torch (in process), sglang (a running SGLang server), vllm (vLLM in process), "
        "vllm-server (a running `vllm serve`, at rollout_url)",
        ("torch", "sglang", "vllm", "vllm-server"),
        common=True,
    )
    rollout_url: str = option("http://localhost:8000", "vLLM server URL (vllm-server)")
    weight_sync: str = option(
        "nccl",
        "how a rollout server gets new weights: nccl or gloo (broadcast over a process group "
        "the trainer hosts; vllm-server takes nccl only), disk (SGLang: files under "
        "sglang_shared_path)",
        ("nccl", "gloo", "disk"),
    )
    weight_sync_host: str = option(
        "", "address the server reaches the trainer at for weight sync ('': auto)"
    )
    weight_sync_timeout_sec: float = option(
        600.0, "wait for the server's side of a weight-sync step"
    )
    multi_gpu_mode: str = option(
        "trainer_rollout",
        "multi-GPU layout (one process here: no effect)",
        ("trainer_rollout", "ddp"),
    )
    sglang_base_url: str = option("http://localhost:8998", "SGLang server URL")
    sglang_model_path: str = option("", "model path the SGLang server loads ('': the server's own)")
    sglang_wait_sec: float = option(60.0, "wait for the rollout server to be up", check=">=0")
    vllm_gpu_memory_utilization: float = option(0.3, "vLLM GPU memory share", check="[0,1]")
    sglang_shared_path: str = option(
        "runs/sglang-weights", "where weights are shared with SGLang (weight_sync disk)"
    )
    async_workers: int = option(1, "rollout threads (0: rollout in the trainer loop)", check=">=0")
    max_version_gap: int = option(
        -1, "drop groups more versions behind (-1: max_head_offpolicyness)", check=">=-1"
    )
    max_head_offpolicyness: int = option(1, "default version gap", check=">=0")
    max_queue_groups: int = option(
        0,
        "queue capacity (0: (gap + 1) x batch_size; a trainer_rollout rank: at least "
        "batch_size x max(8, 4 x rollout ranks))",
        check=">=0",
    )
    global_prefetch_groups: int = option(0, "groups prefetched across ranks", check=">=0")
    prefill_queue_groups: int = option(0, "groups queued before training starts", check=">=0")
    prefill_timeout_sec: float = option(180.0, "wait for the initial queue fill", check=">=0")
    fetch_timeout_sec: float = option(180.0, "wait for a batch of groups", check=">=0")
    policy_sync_interval: int = option(1, "optimizer steps between weight syncs", check=">=1")
    async_stale_discount: float = option(0.65, "loss weight x discount^staleness", check="[0,1]")
    strict_group_packing: bool = option(True, "train only on complete groups")
    dynamic_sampling_rounds: int = option(
        0,
        "DAPO dynamic sampling: extra rollout rounds per step to fill it with groups "
        "whose rewards differ (0: off)",
        check=">=0",
    )
