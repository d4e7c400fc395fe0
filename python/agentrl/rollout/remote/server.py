"""`ServerEngine`: what the SGLang and vLLM server engines share besides their formats.

Waiting for a server to come up, and pushing weights over a collective: the group is set
up once, on the first weight update (the server's worker count decides its size), then
every update names the tensors over HTTP while they are broadcast (see `collective`). A
subclass says how its server is asked: `_server_ranks`, `_init_group_request` and
`_update_request`, plus optional steps around an update.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from agentrl.rollout.engine import Generation
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.remote.collective import (
    BroadcastGroup,
    GroupFactory,
    TensorSpecs,
    address_seen_by,
    beside_server_call,
    broadcast_state,
    call_off,
    free_port,
    preflight,
    tensor_specs,
    unique_group_name,
)
from agentrl.rollout.remote.common import (
    LiveRowsEngine,
    PushedWeights,
    finish_generation,
    tokenizer_end_ids,
)
from agentrl.rollout.remote.http import (
    REQUEST_TIMEOUT_S,
    JsonHttpClient,
    RemoteEngineError,
    RetryPolicy,
)
from agentrl.rollout.remote.weights import has_nonfinite, policy_state_dict


class ServerEngine(LiveRowsEngine):
    """A `LiveRowsEngine` on an HTTP server whose weights arrive over a process group."""

    SERVER_NAME = "rollout server"
    LAUNCH_HINT = ""
    # Counters every server engine keeps; a subclass adds its own after these.
    COMMON_STATS = (
        "sequences",
        "generate_calls",
        "http_requests",
        "generated_tokens",
        "prompt_tokens",
        "nonfinite_logps",
        "weight_updates",
        "weight_updates_skipped",
        "weight_bytes_sent",
    )

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        send_seed: bool,
        group_factory: GroupFactory | None = None,
        eos_token_ids: Sequence[int] | None = None,
        version: int = 0,
        timeout_s: float = REQUEST_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        client: JsonHttpClient | None = None,
        weight_sync_host: str = RolloutConfig.weight_sync_host,
        weight_sync_timeout_s: float = RolloutConfig.weight_sync_timeout_sec,
    ) -> None:
        """The server at ``base_url`` (or ``client``, an HTTP client for it), asked with
        ``timeout_s`` per request and ``retry``. ``eos_token_ids`` default: the tokenizer's
        end tokens. ``group_factory`` builds the trainer's end of the weight-update group
        (default: `_default_group_factory`); ``weight_sync_host`` is the address the server
        reaches the trainer at (empty: the one it is reached from). Per-request seeds are
        sent only with ``send_seed`` (the server must allow them)."""
        self.client = client or JsonHttpClient(base_url, timeout_s=timeout_s, retry=retry)
        self.tokenizer = tokenizer
        ends = tokenizer_end_ids(tokenizer) if eos_token_ids is None else eos_token_ids
        self.eos_token_ids: frozenset[int] = frozenset(int(t) for t in ends)
        self.version = int(version)
        self.send_seed = bool(send_seed)
        self.weight_sync_host = weight_sync_host
        self.weight_sync_timeout_s = float(weight_sync_timeout_s)
        self.group_factory: GroupFactory = group_factory or self._default_group_factory()
        self.pushed = PushedWeights()
        self._group: BroadcastGroup | None = None
        self.group_name: str | None = None
        self.lock = threading.RLock()
        self.stats = self._fresh_stats()
        self._seed: int | None = None
        self._calls = 0

    @abc.abstractmethod
    def _default_group_factory(self) -> GroupFactory:
        """The trainer's end of the weight-update group when none is given."""

    # ---- server state ----

    def health(self, timeout_s: float = 5.0) -> bool:
        """True when ``GET /health`` answers 200 now (one attempt, short timeout)."""
        try:
            response = self.client.request("GET", "/health", timeout_s=timeout_s, attempts=1)
        except RemoteEngineError:
            return False
        return response.status == 200

    def wait_until_healthy(self, timeout_s: float = 300.0, poll_s: float = 2.0) -> None:
        """Block until the server is healthy; RemoteEngineError after ``timeout_s``."""
        deadline = time.monotonic() + max(float(timeout_s), 0.0)
        while True:
            if self.health():
                return
            if time.monotonic() >= deadline:
                hint = (
                    f" (is it running? start it with `{self.LAUNCH_HINT}`)"
                    if self.LAUNCH_HINT
                    else ""
                )
                raise RemoteEngineError(
                    f"{self.SERVER_NAME} at {self.client.base_url} not healthy after "
                    f"{timeout_s:.0f}s{hint}"
                )
            time.sleep(poll_s)

    def _counted_generation(
        self,
        ids: list[int],
        logps: list[float],
        *,
        stopped: bool,
        matched: Any,
        version: int,
        prompt_len: int,
    ) -> Generation:
        """`finish_generation` of one server result with this engine's tokenizer and end
        tokens, its generated and prompt tokens added to the counters."""
        out = finish_generation(
            self.tokenizer,
            ids,
            logps,
            stopped=stopped,
            matched=matched,
            end_ids=self.eos_token_ids,
            version=version,
            prompt_len=prompt_len,
        )
        self.stats["generated_tokens"] += len(out.token_ids)
        self.stats["prompt_tokens"] += prompt_len
        return out

    # ---- weights over a process group ----

    @abc.abstractmethod
    def _server_ranks(self) -> int:
        """How many of the server's processes join the group (ranks 1..N)."""

    def _server_info(self, path: str, key: str, hint: str) -> Mapping[str, Any]:
        """The JSON object ``GET path`` answers, which must hold the integer ``key``; else
        RemoteEngineError, ending in ``hint`` (what to do about it)."""
        response = self.client.request("GET", path)
        info = response.json() if 200 <= response.status < 300 else None
        if not isinstance(info, Mapping) or not isinstance(info.get(key), int):
            raise RemoteEngineError(
                f"GET {self.client.base_url}{path} gave no {key} (HTTP {response.status}): {hint}"
            )
        return info

    @abc.abstractmethod
    def _init_group_request(self, address: str, port: int, world_size: int, name: str) -> None:
        """Ask the server to join the group (returns once it has; `rendezvous` says where);
        raise on refusal."""

    @abc.abstractmethod
    def _update_request(self, specs: TensorSpecs, version: int) -> None:
        """Ask the server to receive ``specs`` from the group (returns once loaded)."""

    def _weight_call(self, path: str, payload: Any) -> Any:
        """POST a weight-sync request: one attempt (the other end is waiting in the group
        meanwhile), within the weight-sync timeout; the JSON answer."""
        return self.client.post_json(
            path, payload, attempts=1, timeout_s=self.weight_sync_timeout_s
        )

    def _before_update(self, version: int) -> None:
        """A step the server needs before receiving (default: none)."""

    def _after_update(self, version: int) -> None:
        """A step the server needs after receiving (default: none)."""

    @property
    def model(self) -> PushedWeights:
        return self.pushed

    def _ensure_group(self) -> BroadcastGroup:
        if self._group is not None:
            return self._group
        preflight(self.group_factory)  # before the server is asked to wait for us
        world_size = 1 + self._server_ranks()
        address = self.weight_sync_host or address_seen_by(self.client.base_url)
        port = free_port(address)
        name = unique_group_name()
        _, group = beside_server_call(
            lambda: self._init_group_request(address, port, world_size, name),
            lambda: self.group_factory(address, port, world_size, name),
            what=f"joining the {self.SERVER_NAME}'s weight-update group at {address}:{port}",
            timeout_s=self.weight_sync_timeout_s,
            call_off_local=lambda: call_off(self.group_factory, address, port, world_size, name),
        )
        self._group, self.group_name = group, name
        return group

    def _with_stop_and_seed(
        self, body: dict[str, Any], params: Any, *, seed_field: str
    ) -> dict[str, Any]:
        """``body`` with the stop strings and this call's seed, under the server's names."""
        if params.stop:
            body["stop"] = list(params.stop)
        seed = self._call_seed() if self.send_seed else None
        if seed is not None:
            body[seed_field] = seed
        return body

    def _send_weights(self, source: Any, version: int) -> bool:
        """Broadcast a model's or state dict's tensors as ``version``; False (nothing sent)
        when any of them is not finite."""
        state = policy_state_dict(source)
        if has_nonfinite(state):
            return False
        self._push_state(state, version)
        return True

    def _push_state(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Send ``state`` as weights ``version``: RemoteEngineError if the server fails."""
        group = self._ensure_group()
        specs = tensor_specs(state)
        try:
            self._before_update(version)
            _, sent = beside_server_call(
                lambda: self._update_request(specs, version),
                lambda: broadcast_state(group, state, specs),
                what=f"sending weights v{version} to the {self.SERVER_NAME}",
                timeout_s=self.weight_sync_timeout_s,
            )
            self._after_update(version)
        except RemoteEngineError:
            # The two ends may now disagree on what comes next over the group: never reuse
            # it; a later update sets up a fresh one.
            self._group, self.group_name = None, None
            raise
        self.stats["weight_bytes_sent"] += int(sent)
        self.pushed.keep(state)

    def close(self) -> None:
        """Leave the weight-update group (this side only)."""
        if self._group is not None:
            self._group.close()
            self._group = None


def rendezvous(address: str, port: int, world_size: int) -> dict[str, Any]:
    """Where the weight-update group meets and how large it is, as both servers' requests
    name it: the trainer is rank 0, the server's processes start at rank 1."""
    return {
        "master_address": address,
        "master_port": int(port),
        "rank_offset": 1,
        "world_size": int(world_size),
    }


__all__ = ["ServerEngine", "rendezvous"]
