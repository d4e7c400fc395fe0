"""`VLLMEngine`: rollout with an in-process `vllm.LLM`, colocated with training.

vLLM shares the GPU with the trainer (``gpu_memory_utilization`` caps its share). Prompts
go in as token ids (``TokensPrompt``), so vLLM never re-tokenizes our chat rendering;
each sampled token comes back with its log-prob (``logprobs=0``: the chosen token only).
After each policy sync the new weights are pushed straight into vLLM's model
(``load_weights``) and its prefix cache is reset, so no KV computed by old weights is
reused.

vLLM's log-probs are those of the model's raw output by default (vLLM's
``logprobs_mode``), computed by its own kernels in bf16: close to, not equal to, the
trainer's. Decoupled PPO takes them as the behaviour policy, which is what it is for.

`vllm` is optional and heavy: it is imported only when this engine is built, and a clear
message says how to install it when it is missing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from agentrl.errors import UserError
from agentrl.rollout.engine import Generation, WeightSource
from agentrl.rollout.remote.common import (
    LiveRowsEngine,
    finish_generation,
    shared_sampling_fields,
    stored_logp,
    tokenizer_end_ids,
)
from agentrl.rollout.remote.weights import has_nonfinite, policy_state_dict
from agentrl.rollout.sampling import SamplingParams
from agentrl.utils.imports import require_module


class VLLMUnavailableError(UserError, ImportError):
    """`vllm` is not installed (or cannot be imported on this machine)."""


def require_vllm() -> Any:
    return require_module(
        "vllm",
        VLLMUnavailableError,
        "--rollout_engine vllm needs vLLM and a GPU: pip install 'agentrl[vllm]' "
        "(or pip install vllm); import failed with: {exc}",
    )


# Where an in-process vLLM keeps its torch model, across vLLM versions.
_MODEL_PATHS = (
    ("llm_engine", "model_executor", "driver_worker", "worker", "model_runner", "model"),
    ("llm_engine", "model_executor", "driver_worker", "model_runner", "model"),
    (
        "llm_engine",
        "engine_core",
        "engine_core",
        "model_executor",
        "driver_worker",
        "worker",
        "model_runner",
        "model",
    ),
)


class VLLMEngine(LiveRowsEngine):
    """Generate with ``vllm.LLM`` in this process; push weights into it after each sync.

    ``model_path``: an HF directory vLLM can load (the policy's starting point, e.g. the
    warm start exported by `agentrl sft`). ``llm_kwargs`` go to ``vllm.LLM`` unchanged.
    """

    STAT_NAMES = (
        "sequences",
        "generate_calls",
        "generated_tokens",
        "nonfinite_logps",
        "weight_updates",
        "weight_updates_skipped",
    )

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.3,
        seed: int = 0,
        version: int = 0,
        eos_token_ids: Sequence[int] | None = None,
        llm: Any = None,
        **llm_kwargs: Any,
    ) -> None:
        self.vllm = require_vllm()
        if llm is None:
            # The model must live in this process for weights to be pushed into it.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            llm = self.vllm.LLM(
                model=str(model_path),
                tokenizer=str(model_path),
                dtype=dtype,
                gpu_memory_utilization=float(gpu_memory_utilization),
                seed=int(seed),
                enable_prefix_caching=True,
                **llm_kwargs,
            )
        self.llm = llm
        self.tokenizer = tokenizer
        ends = tokenizer_end_ids(tokenizer) if eos_token_ids is None else eos_token_ids
        self.eos_token_ids = frozenset(int(t) for t in ends)
        self.version = int(version)
        self.lock = threading.RLock()
        self.stats = self._fresh_stats()
        self._seed: int | None = int(seed)
        self._calls = 0

    # ---- weights ----

    @property
    def model(self) -> torch.nn.Module:
        """vLLM's own torch model (its parameter layout is vLLM's, e.g. fused qkv)."""
        for path in _MODEL_PATHS:
            obj: Any = self.llm
            for attr in path:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
            if obj is not None and hasattr(obj, "load_weights"):
                return obj
        raise RuntimeError(
            "cannot reach the model inside vllm.LLM to push weights (vLLM "
            f"{getattr(self.vllm, '__version__', '?')}); set VLLM_ENABLE_V1_MULTIPROCESSING=0 "
            "before starting so the model runs in this process"
        )

    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        """Push ``source`` (HF parameter names) into vLLM; ``strict`` is not needed: vLLM's
        load_weights maps HF names to its fused layout itself."""
        state = policy_state_dict(source)
        if has_nonfinite(state):
            return False
        with torch.no_grad():
            self.model.load_weights(weights=list(state.items()))
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):
            reset()
        return True

    # ---- generation ----

    def _sampling(self, params: SamplingParams, budget: int) -> Any:
        kwargs: dict[str, Any] = {
            "n": 1,
            "max_tokens": int(budget),
            **shared_sampling_fields(params, self.eos_token_ids),
            "stop": list(params.stop) or None,
            "logprobs": 0,
            "detokenize": False,
        }
        seed = self._call_seed()
        if seed is not None:
            kwargs["seed"] = seed
        if params.stop:
            kwargs["detokenize"] = True  # stop strings are matched on text
        top_k = int(params.top_k)
        try:
            return self.vllm.SamplingParams(top_k=top_k if top_k > 0 else 0, **kwargs)
        except (ValueError, TypeError):
            # Older vLLM spells "no top-k" as -1.
            return self.vllm.SamplingParams(top_k=top_k if top_k > 0 else -1, **kwargs)

    def _generate_live(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams, version: int
    ) -> list[Generation]:
        """All rows in one ``LLM.generate`` call (vLLM schedules them itself)."""
        token_prompt = self.vllm.inputs.TokensPrompt
        outputs = self.llm.generate(
            [token_prompt(prompt_token_ids=row) for row in rows],
            sampling_params=[self._sampling(params, b) for b in budgets],
            use_tqdm=False,
        )
        if len(outputs) != len(rows):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(rows)}")
        return [self._parse(out, len(row), version) for out, row in zip(outputs, rows, strict=True)]

    def _parse(self, request_output: Any, prompt_len: int, version: int) -> Generation:
        completion = request_output.outputs[0]
        ids = [int(t) for t in completion.token_ids]
        steps = completion.logprobs or []
        if len(steps) != len(ids):
            raise RuntimeError(f"vLLM gave {len(steps)} log-prob entries for {len(ids)} tokens")
        logps = [self._logp(step, token) for step, token in zip(steps, ids, strict=True)]
        reason = completion.finish_reason
        if reason == "abort":
            raise RuntimeError("vLLM aborted a generation")
        out = finish_generation(
            self.tokenizer,
            ids,
            logps,
            stopped=reason == "stop",
            matched=getattr(completion, "stop_reason", None),
            end_ids=self.eos_token_ids,
            version=version,
            prompt_len=prompt_len,
        )
        self.stats["generated_tokens"] += len(out.token_ids)
        return out

    def _logp(self, step: Any, token: int) -> float:
        """The chosen token's log-prob in one step's ``{token: Logprob}`` map."""
        entry = step.get(token) if isinstance(step, Mapping) else None
        return stored_logp(getattr(entry, "logprob", entry), self.stats)


__all__ = ["VLLMEngine", "VLLMUnavailableError", "require_vllm"]
