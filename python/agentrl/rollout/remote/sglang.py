"""`SGLangEngine`: rollout on an SGLang server, behind the same interface as `TorchEngine`.

The client speaks SGLang's native HTTP API (the server itself needs a GPU; start it with
``python -m sglang.launch_server --model-path ... --port 8998``):

* ``POST /generate`` with ``input_ids`` (a batch of token-id prompts, so the server never
  re-tokenizes our chat rendering), per-row ``sampling_params`` and ``return_logprob``.
  Each answer's ``meta_info.output_token_logprobs`` holds ``[logprob, token_id, text]``
  per generated token: the token ids and their behaviour log-probs.
* Weights, after each policy sync, one of two ways (``weight_sync``):

  - ``nccl`` (default) or ``gloo``: a process group between the trainer (rank 0) and the
    server's tensor-parallel workers. Once: ``GET /get_server_info`` (its ``tp_size``), then
    ``POST /init_weights_update_group`` (``master_address``, ``master_port``,
    ``rank_offset`` 1, ``world_size``, ``group_name``, ``backend``) while the trainer joins
    the same group. Every sync: ``POST /update_weights_from_distributed`` (``names``,
    ``dtypes``, ``shapes``, ``group_name``, ``flush_cache``, ``weight_version``) while the
    trainer broadcasts the tensors in that order (see `collective`). Nothing touches disk.
  - ``disk``: the trainer writes the weights to a directory the server can read at the
    same path (see `weights.publish_weights`), then ``POST /update_weights_from_disk`` and
    ``POST /flush_cache``. Chosen explicitly only: never a fallback.

* ``GET /health`` to wait for a server that is still loading.

Behaviour log-probs from the server are used as the behaviour policy of decoupled PPO.
They are computed by another kernel, often in bf16, so they differ a little from what the
trainer computes for the same weights; decoupled PPO's proximal policy and the capped
behaviour importance weight (``behav_imp_weight_cap``) exist for exactly this. Depending on
the SGLang version they may also be taken after temperature scaling: start the server with
``SGLANG_RETURN_ORIGINAL_LOGPROB=1`` to get raw-policy log-probs as the torch engine does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from agentrl.rollout.engine import Generation, WeightSource
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.remote.collective import (
    BACKENDS,
    GroupFactory,
    TensorSpecs,
    require_success,
    torch_group_factory,
)
from agentrl.rollout.remote.common import shared_sampling_fields, stored_logp
from agentrl.rollout.remote.http import RemoteEngineError
from agentrl.rollout.remote.server import ServerEngine, rendezvous
from agentrl.rollout.remote.weights import (
    WEIGHTS_FILE,
    has_nonfinite,
    latest_published,
    model_config_of,
    policy_state_dict,
    publish_weights,
)
from agentrl.rollout.sampling import SamplingParams

WEIGHT_SYNCS = (*BACKENDS, "disk")


class _PublishedWeights:
    """Stands in for ``engine.model`` with disk sync: the weights last published."""

    def __init__(self, engine: SGLangEngine) -> None:
        self._engine = engine

    def state_dict(self) -> dict[str, torch.Tensor]:
        path = self._engine.published_path
        if path is None:
            raise RuntimeError("no weights have been published to the SGLang server yet")
        from safetensors.torch import load_file

        return load_file(str(Path(path) / WEIGHTS_FILE))


class SGLangEngine(ServerEngine):
    """Generate with an SGLang server; send it new weights after each policy sync.

    ``weight_sync``: ``nccl``/``gloo`` (a process group, see the module doc; the backend
    must be one the server's workers can use) or ``disk`` (``shared_dir`` must then be
    readable by the server at the same path). ``group_factory`` builds the trainer's end of
    the group (default: `TorchBroadcastGroup` with that backend). The server is asked to
    stop on the end tokens too, and a final end token is moved out of ``token_ids`` as
    `TorchEngine` does. ``max_batch_rows`` caps prompts per HTTP request (0: the whole
    batch in one request). ``server``: the `ServerEngine` options (connection, end tokens,
    version, weight-sync address and timeout).
    """

    SERVER_NAME = "SGLang server"
    LAUNCH_HINT = "python -m sglang.launch_server --model-path <dir> --port <port>"
    STAT_NAMES = (*ServerEngine.COMMON_STATS, "cache_flush_failures", "group_destroy_failures")

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        weight_sync: str = RolloutConfig.weight_sync,
        shared_dir: str | os.PathLike[str] | None = None,
        model_path: str | None = None,
        max_batch_rows: int = 0,
        keep_published: int = 2,
        load_format: str | None = None,
        send_seed: bool = False,
        **server: Any,
    ) -> None:
        if weight_sync not in WEIGHT_SYNCS:
            raise ValueError(f"weight_sync {weight_sync!r}: choose from {', '.join(WEIGHT_SYNCS)}")
        if weight_sync == "disk" and shared_dir is None:
            raise ValueError("weight_sync='disk' needs shared_dir, a directory the server reads")
        self.weight_sync = weight_sync
        super().__init__(base_url, tokenizer, send_seed=send_seed, **server)
        self.shared_dir = Path(shared_dir) if shared_dir is not None else None
        self.model_path = model_path
        self.max_batch_rows = max(0, int(max_batch_rows))
        self.keep_published = int(keep_published)
        self.load_format = load_format
        self.published_path: Path | None = (
            latest_published(self.shared_dir) if self.shared_dir is not None else None
        )

    def _default_group_factory(self) -> GroupFactory:
        backend = self.weight_sync if self.weight_sync in BACKENDS else "nccl"
        return torch_group_factory(backend, timeout_s=self.weight_sync_timeout_s)

    def flush_cache(self) -> bool:
        """Drop the server's prefix cache; False (and counted) when it refuses."""
        try:
            response = self.client.request("POST", "/flush_cache", None, timeout_s=60.0)
        except RemoteEngineError:
            ok = False
        else:
            ok = 200 <= response.status < 300
        if not ok:
            self.stats["cache_flush_failures"] += 1
        return ok

    @property
    def model(self) -> Any:
        """The weights last sent (disk sync: read back from the published directory)."""
        return _PublishedWeights(self) if self.weight_sync == "disk" else self.pushed

    # ---- weights ----

    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        """Send ``source`` (a model or a state dict; with disk sync also a directory in the
        server's reach) to the server as weights ``version``.

        A server that fails to load the weights raises RemoteEngineError: rollouts must not
        go on silently with the old weights. ``strict`` is not needed: the server checks
        names and shapes itself.
        """
        if self.weight_sync == "disk":
            return self._load_through_disk(source, version)
        if isinstance(source, str | os.PathLike):
            raise ValueError(
                f"weight_sync={self.weight_sync!r} sends tensors: pass a model or a state "
                "dict, not a path (a directory is loaded only with weight_sync='disk')"
            )
        return self._send_weights(source, version)

    def _server_ranks(self) -> int:
        """The server's tensor-parallel size: each TP worker joins as ``1 + tp_rank``."""
        info = self._server_info(
            "/get_server_info", "tp_size", "cannot size the weight-update group"
        )
        for name in ("dp_size", "pp_size"):
            if int(info.get(name) or 1) != 1:
                raise RemoteEngineError(
                    f"the SGLang server runs with {name}={info[name]}: the weight-update "
                    "group here serves one tensor-parallel replica (start one server per "
                    "replica, or use weight_sync='disk')"
                )
        return int(info["tp_size"])

    def _init_group_request(self, address: str, port: int, world_size: int, name: str) -> None:
        payload = {
            **rendezvous(address, port, world_size),
            "group_name": name,
            "backend": self.weight_sync,
        }
        answer = self._weight_call("/init_weights_update_group", payload)
        require_success(answer, "/init_weights_update_group")

    def _update_request(self, specs: TensorSpecs, version: int) -> None:
        payload = {
            "names": specs.names,
            "dtypes": specs.dtypes,
            "shapes": specs.shapes,
            "group_name": self.group_name,
            "flush_cache": True,
            "weight_version": str(version),
        }
        answer = self._weight_call("/update_weights_from_distributed", payload)
        require_success(answer, "/update_weights_from_distributed")

    def close(self) -> None:
        """Leave the weight-update group and ask the server to drop its end (best effort:
        a server that cannot is counted in ``group_destroy_failures``)."""
        name = self.group_name
        super().close()
        if name is None:
            return
        self.group_name = None
        try:
            answer = self.client.post_json(
                "/destroy_weights_update_group", {"group_name": name}, attempts=1, timeout_s=30.0
            )
            require_success(answer, "/destroy_weights_update_group")
        except RemoteEngineError:
            self.stats["group_destroy_failures"] += 1

    def _load_through_disk(self, source: WeightSource, version: int) -> bool:
        assert self.shared_dir is not None
        if isinstance(source, str | os.PathLike):
            path = Path(source)
        else:
            state = policy_state_dict(source)
            if has_nonfinite(state):
                return False
            path = publish_weights(
                state,
                self.shared_dir,
                version,
                keep=self.keep_published,
                config_dir=self.model_path,
                model_config=model_config_of(source),
            )
        self._load_from_disk(path, version)
        self.flush_cache()
        self.published_path = path
        return True

    def _load_from_disk(self, path: Path, version: int) -> None:
        payload: dict[str, Any] = {"model_path": str(path), "weight_version": str(version)}
        if self.load_format:
            payload["load_format"] = self.load_format
        answer = self.client.post_json("/update_weights_from_disk", payload)
        if not isinstance(answer, Mapping) or not answer.get("success", False):
            message = answer.get("message") if isinstance(answer, Mapping) else answer
            raise RemoteEngineError(f"the SGLang server could not load {path}: {message}")

    # ---- generation ----

    def _sampling_params(self, params: SamplingParams, budget: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_new_tokens": int(budget),
            "top_k": int(params.top_k) if params.top_k > 0 else -1,
            **shared_sampling_fields(params, self.eos_token_ids),
        }
        return self._with_stop_and_seed(out, params, seed_field="sampling_seed")

    def _generate_live(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams, version: int
    ) -> list[Generation]:
        """``max_batch_rows`` rows per ``/generate`` request (all of them when 0)."""
        step = self.max_batch_rows or len(rows)
        out: list[Generation] = []
        for start in range(0, len(rows), step):
            out += self._request(
                rows[start : start + step],
                [self._sampling_params(params, b) for b in budgets[start : start + step]],
                version,
            )
        return out

    def _request(
        self, rows: list[list[int]], sampling: list[dict[str, Any]], version: int
    ) -> list[Generation]:
        payload = {"input_ids": rows, "sampling_params": sampling, "return_logprob": True}
        answer = self.client.post_json("/generate", payload)
        self.stats["http_requests"] += 1
        items = [answer] if isinstance(answer, Mapping) else answer
        if not isinstance(items, list) or len(items) != len(rows):
            got = len(items) if isinstance(items, list) else type(answer).__name__
            raise RemoteEngineError(f"/generate answered {got} result(s) for {len(rows)} prompts")
        return [self._parse(item, len(row), version) for item, row in zip(items, rows, strict=True)]

    def _parse(self, item: Any, prompt_len: int, version: int) -> Generation:
        if not isinstance(item, Mapping) or not isinstance(item.get("meta_info"), Mapping):
            raise RemoteEngineError(f"/generate result without meta_info: {str(item)[:200]}")
        meta = item["meta_info"]
        reason = meta.get("finish_reason")
        kind = reason.get("type") if isinstance(reason, Mapping) else reason
        matched = reason.get("matched") if isinstance(reason, Mapping) else None
        if kind == "abort":
            message = reason.get("message", "") if isinstance(reason, Mapping) else ""
            raise RemoteEngineError(f"the SGLang server aborted a generation: {message}")
        entries = meta.get("output_token_logprobs")
        if not isinstance(entries, list):
            raise RemoteEngineError(
                "/generate result has no meta_info.output_token_logprobs "
                "(the request asked for return_logprob)"
            )
        ids, logps = [], []
        for entry in entries:
            if not isinstance(entry, list | tuple) or len(entry) < 2:
                raise RemoteEngineError(f"malformed output_token_logprobs entry: {entry!r}")
            ids.append(_token_id(entry[1]))
            logps.append(stored_logp(entry[0], self.stats))
        output_ids = item.get("output_ids")
        if isinstance(output_ids, list) and [int(t) for t in output_ids] != ids:
            raise RemoteEngineError(
                f"output_ids ({len(output_ids)} tokens) disagree with output_token_logprobs "
                f"({len(ids)} tokens)"
            )
        return self._counted_generation(
            ids,
            logps,
            stopped=kind == "stop",
            matched=matched,
            version=version,
            prompt_len=prompt_len,
        )


def _token_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RemoteEngineError(f"invalid token id in /generate result: {value!r}")
    return value


__all__ = ["WEIGHT_SYNCS", "SGLangEngine"]
