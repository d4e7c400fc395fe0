"""`VLLMServerEngine`: rollout on a running ``vllm serve``, weights pushed over NCCL.

Written against vLLM's HTTP server as documented for vLLM 0.29-0.33 (the PyPI release
here is 0.33.0); nothing of vLLM is imported for generation. Start the server with the
development routes and the NCCL weight-transfer engine on:

    VLLM_SERVER_DEV_MODE=1 vllm serve <hf-dir> --weight-transfer-config '{"backend": "nccl"}'

Generation: ``POST /v1/completions`` (the OpenAI-compatible API) with token-id prompts
(``prompt`` a list of token-id lists, so the server never re-tokenizes our rendering),
``logprobs: 0`` (the sampled token's log-prob only), ``return_tokens_as_token_ids`` (each
entry of ``logprobs.tokens`` reads ``"token_id:<id>"``: the ids come back exactly, even for
tokens that do not decode alone), ``return_token_ids`` (newer servers also answer
``token_ids``, checked against the former) and ``include_stop_str_in_output``. Rows with
the same token budget share one request; ``choices[i].index`` is the prompt's position.
``finish_reason`` is ``stop``/``length`` (``abort`` is an error) and ``stop_reason`` the
matched stop token id or string (None: an end token).

Weights, vLLM's weight-transfer routes (``vllm/entrypoints/serve/dev/rlhf/api_router.py``):
once ``GET /get_world_size`` then ``POST /init_weight_transfer_engine`` with ``init_info``
``{master_address, master_port, rank_offset: 1, world_size}`` while the trainer joins the
group as rank 0; every sync ``POST /start_weight_update``, ``POST /update_weights`` with
``update_info`` ``{names, dtype_names, shapes}`` while the trainer broadcasts the tensors in
that order (unpacked), ``POST /finish_weight_update`` with ``weight_version``, then
``POST /reset_prefix_cache`` so no KV computed by old weights is reused. ``init_info``
leaves out vLLM's packed-transfer fields, so the workers expect one broadcast per tensor
(their default), which is what the trainer sends.

vLLM's workers receive over their own ``StatelessProcessGroup`` + ``PyNcclCommunicator``,
so the trainer's end is vLLM's too (`collective.VLLMNcclGroup`, vLLM installed in the
trainer's environment). The group factory is a parameter so that the whole exchange can be
exercised on CPUs against a loopback server that receives over a gloo group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrl.rollout.engine import Generation, WeightSource
from agentrl.rollout.remote.collective import GroupFactory, TensorSpecs, vllm_nccl_group
from agentrl.rollout.remote.common import shared_sampling_fields, stored_logp
from agentrl.rollout.remote.http import RemoteEngineError
from agentrl.rollout.remote.server import ServerEngine, rendezvous
from agentrl.rollout.sampling import SamplingParams

TOKEN_ID_PREFIX = "token_id:"


class VLLMServerEngine(ServerEngine):
    """Generate with a ``vllm serve`` over HTTP; push weights to it over its NCCL engine.

    ``served_model``: the ``model`` field of requests (default: the first id the server
    lists at ``GET /v1/models``). ``group_factory`` builds the trainer's end of the
    weight-transfer group (default: vLLM's own NCCL communicator). ``server``: the
    `ServerEngine` options (connection, end tokens, version, weight-sync address and timeout).
    """

    SERVER_NAME = "vLLM server"
    LAUNCH_HINT = (
        "VLLM_SERVER_DEV_MODE=1 vllm serve <dir> --port <port> "
        '--weight-transfer-config \'{"backend": "nccl"}\''
    )
    STAT_NAMES = (*ServerEngine.COMMON_STATS, "cache_reset_failures")

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        served_model: str | None = None,
        send_seed: bool = True,
        **server: Any,
    ) -> None:
        super().__init__(base_url, tokenizer, send_seed=send_seed, **server)
        self.served_model = served_model

    def _default_group_factory(self) -> GroupFactory:
        return vllm_nccl_group

    # ---- weights ----

    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        """Broadcast ``source`` (HF parameter names; vLLM maps them onto its fused layout)."""
        if not isinstance(source, Mapping) and not hasattr(source, "state_dict"):
            raise ValueError("the vLLM server engine sends tensors: pass a model or a state dict")
        return self._send_weights(source, version)

    def _server_ranks(self) -> int:
        info = self._server_info(
            "/get_world_size", "world_size", "start the server with VLLM_SERVER_DEV_MODE=1"
        )
        return int(info["world_size"])

    def _init_group_request(self, address: str, port: int, world_size: int, name: str) -> None:
        init_info = rendezvous(address, port, world_size)
        self._weight_call("/init_weight_transfer_engine", {"init_info": init_info})

    def _before_update(self, version: int) -> None:
        self._weight_call("/start_weight_update", {})

    def _update_request(self, specs: TensorSpecs, version: int) -> None:
        update_info = {"names": specs.names, "dtype_names": specs.dtypes, "shapes": specs.shapes}
        self._weight_call("/update_weights", {"update_info": update_info})

    def _after_update(self, version: int) -> None:
        self._weight_call("/finish_weight_update", {"weight_version": str(version)})
        try:
            response = self.client.request("POST", "/reset_prefix_cache", None, timeout_s=60.0)
            ok = 200 <= response.status < 300
        except RemoteEngineError:
            ok = False
        if not ok:
            self.stats["cache_reset_failures"] += 1

    # ---- generation ----

    def model_name(self) -> str:
        """The served model's name, asked of the server once."""
        if self.served_model is None:
            response = self.client.request("GET", "/v1/models")
            listing = response.json() if 200 <= response.status < 300 else None
            data = listing.get("data") if isinstance(listing, Mapping) else None
            if not data or not isinstance(data[0], Mapping) or "id" not in data[0]:
                raise RemoteEngineError(
                    f"GET {self.client.base_url}/v1/models listed no model (HTTP {response.status})"
                )
            self.served_model = str(data[0]["id"])
        return self.served_model

    def _request_body(
        self, rows: list[list[int]], params: SamplingParams, budget: int
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name(),
            "prompt": rows,
            "max_tokens": int(budget),
            "n": 1,
            "top_k": int(params.top_k) if params.top_k > 0 else -1,
            **shared_sampling_fields(params, self.eos_token_ids),
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "include_stop_str_in_output": True,
            "stream": False,
        }
        return self._with_stop_and_seed(body, params, seed_field="seed")

    def _generate_live(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams, version: int
    ) -> list[Generation]:
        """One request per distinct budget (``max_tokens`` is per request)."""
        by_budget: dict[int, list[int]] = {}
        for i, budget in enumerate(budgets):
            by_budget.setdefault(budget, []).append(i)
        made: dict[int, Generation] = {}
        for budget, members in by_budget.items():
            batch = [rows[i] for i in members]
            answer = self.client.post_json(
                "/v1/completions", self._request_body(batch, params, budget)
            )
            self.stats["http_requests"] += 1
            for i, out in zip(members, self._parse_answer(answer, batch, version), strict=True):
                made[i] = out
        return [made[i] for i in range(len(rows))]

    def _parse_answer(self, answer: Any, batch: list[list[int]], version: int) -> list[Generation]:
        choices = answer.get("choices") if isinstance(answer, Mapping) else None
        if not isinstance(choices, list) or len(choices) != len(batch):
            got = len(choices) if isinstance(choices, list) else "no"
            raise RemoteEngineError(
                f"/v1/completions answered {got} choices for {len(batch)} prompts: "
                f"{str(answer)[:200]}"
            )
        ordered: dict[int, Any] = {}
        for choice in choices:
            index = choice.get("index") if isinstance(choice, Mapping) else None
            if not isinstance(index, int) or not 0 <= index < len(batch) or index in ordered:
                raise RemoteEngineError(
                    f"/v1/completions choice with a bad index: {str(choice)[:200]}"
                )
            ordered[index] = choice
        return [self._parse_choice(ordered[i], len(batch[i]), version) for i in range(len(batch))]

    def _parse_choice(self, choice: Mapping[str, Any], prompt_len: int, version: int) -> Generation:
        reason = choice.get("finish_reason")
        if reason == "abort":
            raise RemoteEngineError("the vLLM server aborted a generation (paused or overloaded?)")
        if reason not in ("stop", "length"):
            raise RemoteEngineError(f"/v1/completions choice with finish_reason {reason!r}")
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, Mapping) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, Mapping) else None
        if (
            not isinstance(tokens, list)
            or not isinstance(values, list)
            or len(tokens) != len(values)
        ):
            raise RemoteEngineError(
                "/v1/completions choice without logprobs.tokens/token_logprobs of equal length "
                "(the request asked for logprobs=0)"
            )
        ids = [_token_id(t) for t in tokens]
        echoed = choice.get("token_ids")
        if echoed is not None and echoed != ids:
            raise RemoteEngineError(
                f"token_ids ({len(echoed)} tokens) disagree with logprobs.tokens ({len(ids)})"
            )
        logps = [stored_logp(v, self.stats) for v in values]
        return self._counted_generation(
            ids,
            logps,
            stopped=reason == "stop",
            matched=choice.get("stop_reason"),
            version=version,
            prompt_len=prompt_len,
        )


def _token_id(token: Any) -> int:
    """``"token_id:123"`` -> 123 (``return_tokens_as_token_ids``'s spelling)."""
    if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
        digits = token[len(TOKEN_ID_PREFIX) :]
        if digits.isdigit():
            return int(digits)
    raise RemoteEngineError(
        f"logprobs token {token!r} is not 'token_id:<id>' (is return_tokens_as_token_ids honoured?)"
    )


__all__ = ["TOKEN_ID_PREFIX", "VLLMServerEngine"]
