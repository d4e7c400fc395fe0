"""Loopback stand-ins for an SGLang server and a ``vllm serve``, for CPU-only tests.

The real servers need GPUs. These answer the same HTTP requests with the same JSON shapes
(see the docstrings of `agentrl.rollout.remote.sglang` and `.vllm_server` for the versions
followed) and can be told to fail, stall or answer garbage. Their weight-update endpoints
do what the real ones do, on CPUs: a separate process (`GroupPeer`) joins the trainer's
process group over gloo as the server's worker (rank 1), built the way SGLang's server
builds its end (``tcp://`` rendezvous, store prefixed with the group name, a named group
beside the default one), and receives the broadcast tensors by the names, dtypes and shapes
of the HTTP request, which the fake then checks and keeps.

Generation is scripted: row r continues with tokens ``3 + (sum(prompt) + k) % (VOCAB - 3)``
(never 0 or EOS), log-prob ``-0.1 * (k + 1)``; ``eos_after`` ends rows with EOS.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

EOS = 2
VOCAB = 50
WEIGHTS_FILE = "model.safetensors"


# ---------------------------------------------------------------- the server's group end


def _peer_main(
    conn: Any, address: str, port: int, rank: int, world: int, name: str, backend: str
) -> None:
    """Child process: join the group as ``rank``, then receive what the parent asks for."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    try:
        timeout = datetime.timedelta(seconds=60)
        store, rank, world = next(
            c10d.rendezvous(f"tcp://{address}:{port}", rank, world, timeout=timeout)
        )
        store.set_timeout(timeout)
        group, _ = c10d._new_process_group_helper(
            world,
            rank,
            [],
            c10d.Backend(backend),
            c10d.PrefixStore(name, store),
            group_name=name,
            timeout=timeout,
        )
        c10d._world.pg_group_ranks[group] = {i: i for i in range(world)}
    except Exception as exc:  # reported to the fake server, which answers the HTTP call
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("joined", None))
    while True:
        command, args = conn.recv()
        if command == "close":
            dist.destroy_process_group(group)
            conn.send(("closed", None))
            return
        names, dtypes, shapes = args
        received = {}
        try:
            for n, d, s in zip(names, dtypes, shapes, strict=True):
                tensor = torch.empty(s, dtype=getattr(torch, d))
                dist.broadcast(tensor, src=0, group=group)
                received[n] = tensor
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("received", received))


class GroupPeer:
    """The parent's handle on a `_peer_main` process (one per fake server)."""

    def __init__(
        self, address: str, port: int, rank: int, world: int, name: str, backend: str
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        args = (child, address, port, rank, world, name, backend)
        self.process = ctx.Process(target=_peer_main, daemon=True, args=args)
        self.process.start()

    def wait(self, timeout_s: float = 90.0) -> tuple[str, Any]:
        if not self.conn.poll(timeout_s):
            return "error", f"the group peer said nothing in {timeout_s:.0f}s"
        return self.conn.recv()

    def receive(
        self, names: list[str], dtypes: list[str], shapes: list[list[int]]
    ) -> tuple[str, Any]:
        self.conn.send(("receive", (names, dtypes, shapes)))
        return self.wait()

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self.conn.send(("close", None))
                self.wait(10.0)
            except (OSError, EOFError):
                pass
            self.process.join(5.0)
            if self.process.is_alive():
                self.process.kill()


# ---------------------------------------------------------------- HTTP plumbing


class _QuietServer(ThreadingHTTPServer):
    """Says nothing when a client hangs up first (a timed-out or failed test's client)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _FakeHTTP:
    """A threaded loopback HTTP server routing to ``self.route(method, path, body)``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.fail_next: dict[str, int] = {}  # path -> how many 503 answers to give first
        self.status_next: dict[str, int] = {}  # path -> one answer with this status
        self.raw_next: dict[str, bytes] = {}  # path -> one 200 answer with this body
        self.delay_s = 0.0
        self.unhealthy_polls = 0
        self.peer: GroupPeer | None = None
        self.old_peers: list[GroupPeer] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _reply(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.requests.append(("GET " + self.path, None))
                if self.path == "/health":
                    if fake.unhealthy_polls > 0:
                        fake.unhealthy_polls -= 1
                        self._reply(503, b"")
                    else:
                        self._reply(200, b"")
                    return
                self._reply(*fake.route("GET", self.path, None))

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else None
                fake.requests.append((self.path, body))
                if fake.fail_next.get(self.path, 0) > 0:
                    fake.fail_next[self.path] -= 1
                    self._reply(503, {"error": "server is busy"})
                    return
                if self.path in fake.status_next:
                    self._reply(fake.status_next.pop(self.path), {"error": "internal error"})
                    return
                if self.path in fake.raw_next:
                    self._reply(200, fake.raw_next.pop(self.path))
                    return
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                self._reply(*fake.route("POST", self.path, body))

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        raise NotImplementedError

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]

    def bodies(self, path: str) -> list[Any]:
        return [b for p, b in self.requests if p == path]

    def scripted_ids(self, row: list[int], n: int) -> list[int]:
        return [3 + (sum(row) + k) % (VOCAB - 3) for k in range(n)]

    def join_group(
        self, address: str, port: int, rank: int, world: int, name: str, backend: str
    ) -> str | None:
        """Join as the server's worker; None, or why it failed."""
        if self.peer is not None:
            self.old_peers.append(self.peer)
        self.peer = GroupPeer(address, port, rank, world, name, backend)
        kind, detail = self.peer.wait()
        return None if kind == "joined" else str(detail)

    def receive(self, names: list[str], dtypes: list[str], shapes: list[list[int]]) -> Any:
        """The tensors the group delivered, checked against the request; or an error text."""
        if self.peer is None:
            return "no weight-update group"
        kind, got = self.peer.receive(names, dtypes, shapes)
        if kind != "received":
            return str(got)
        for name, dtype, shape in zip(names, dtypes, shapes, strict=True):
            t = got[name]
            if list(t.shape) != list(shape) or str(t.dtype) != f"torch.{dtype}":
                return f"{name}: got {t.dtype} {list(t.shape)}"
        return got

    def close(self) -> None:
        for peer in [*self.old_peers, self.peer]:
            if peer is not None:
                peer.close()
        self.httpd.shutdown()
        self.httpd.server_close()


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    )


# ---------------------------------------------------------------- SGLang


class FakeSGLang(_FakeHTTP):
    """SGLang's native API: ``/generate``, ``/get_server_info``, ``/init_weights_update_group``,
    ``/update_weights_from_distributed``, ``/destroy_weights_update_group``,
    ``/update_weights_from_disk``, ``/flush_cache``, ``/health``."""

    INIT_FIELDS = frozenset(
        ("master_address", "master_port", "rank_offset", "world_size", "group_name", "backend")
    )
    UPDATE_FIELDS = frozenset(
        (
            "names",
            "dtypes",
            "shapes",
            "group_name",
            "flush_cache",
            "abort_all_requests",
            "weight_version",
            "load_format",
        )
    )

    def __init__(self, tp_size: int = 1) -> None:
        self.tp_size = tp_size
        self.dp_size = 1
        self.eos_after: int | None = None
        self.stop_string_after: int | None = None
        self.load_ok = True
        self.garbage = False
        self.abort = False
        self.weight_version: str | None = None
        self.weights: dict[str, torch.Tensor] = {}
        self.group_name: str | None = None
        self.init_refuses = False
        super().__init__()

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/get_server_info":
            return 200, {"tp_size": self.tp_size, "dp_size": self.dp_size, "version": "0.5.23"}
        if path == "/generate":
            return self._generate(body)
        if path == "/init_weights_update_group":
            return self._init_group(body)
        if path == "/update_weights_from_distributed":
            return self._update_distributed(body)
        if path == "/destroy_weights_update_group":
            ok = body.get("group_name") == self.group_name
            return 200, {"success": ok, "message": "destroyed" if ok else "no such group"}
        if path == "/update_weights_from_disk":
            ok = self.load_ok and (Path(body["model_path"]) / WEIGHTS_FILE).is_file()
            if ok:
                self.weight_version = body.get("weight_version")
            message = "Succeeded to update model weights." if ok else "Failed to load."
            return (200 if ok else 400), {"success": ok, "message": message}
        if path == "/flush_cache":
            return 200, b"Cache flushed.\n"
        return 404, {"detail": "Not Found"}

    def _init_group(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not set(body) <= self.INIT_FIELDS:
            return 400, {
                "detail": f"unexpected fields {sorted(set(body or {}) - self.INIT_FIELDS)}"
            }
        if self.init_refuses:
            return 200, {"success": False, "message": "Failed to init group: NCCL unavailable"}
        name = body.get("group_name", "weight_update_group")
        error = self.join_group(
            body["master_address"],
            body["master_port"],
            body["rank_offset"],
            body["world_size"],
            name,
            body.get("backend", "nccl"),
        )
        if error is not None:
            return 200, {"success": False, "message": f"Failed to init group: {error}"}
        self.group_name = name
        return 200, {"success": True, "message": "Succeeded to initialize custom process group."}

    def _update_distributed(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not set(body) <= self.UPDATE_FIELDS:
            return 400, {"detail": "unexpected fields"}
        names, dtypes, shapes = body["names"], body["dtypes"], body["shapes"]
        if not (len(names) == len(dtypes) == len(shapes)):
            return 400, {"detail": "names, dtypes and shapes differ in length"}
        if body.get("group_name", "weight_update_group") != self.group_name:
            return 200, {"success": False, "message": f"group {body.get('group_name')} not found"}
        got = self.receive(names, dtypes, shapes)
        if isinstance(got, str):
            return 200, {"success": False, "message": f"Failed to update weights: {got}"}
        self.weights = got
        self.weight_version = body.get("weight_version")
        return 200, {"success": True, "message": "Succeeded to update parameter online."}

    def _generate(self, body: dict[str, Any]) -> tuple[int, Any]:
        if not isinstance(body.get("input_ids"), list) or "sampling_params" not in body:
            return 400, {"error": "input_ids and sampling_params are required"}
        if self.garbage:
            return 200, [{"text": "x", "meta_info": {}}] * len(body["input_ids"])
        pairs = zip(body["input_ids"], body["sampling_params"], strict=True)
        out = [self.complete(row, sp) for row, sp in pairs]
        return 200, out

    def complete(self, row: list[int], sp: dict[str, Any]) -> dict[str, Any]:
        n = int(sp["max_new_tokens"])
        ids = self.scripted_ids(row, n)
        finish: dict[str, Any] = {"type": "length", "length": n}
        if self.eos_after is not None and self.eos_after < n:
            ids = [*ids[: self.eos_after], EOS]
            finish = {"type": "stop", "matched": EOS}
        elif self.stop_string_after is not None and self.stop_string_after < n:
            ids = ids[: self.stop_string_after]
            finish = {"type": "stop", "matched": "</tool_call>"}
        if self.abort:
            finish = {"type": "abort", "message": "weights are being updated"}
        logprobs = [[-0.1 * (k + 1), t, None] for k, t in enumerate(ids)]
        meta = {
            "id": "r",
            "finish_reason": finish,
            "prompt_tokens": len(row),
            "completion_tokens": len(ids),
            "output_token_logprobs": logprobs,
        }
        return {"text": "", "output_ids": ids, "meta_info": meta}


# ---------------------------------------------------------------- vLLM


def vllm_stand_in_name(port: int) -> str:
    """The torch group name both ends of the gloo stand-in for vLLM's (nameless) NCCL group
    derive from what the protocol does carry: the rendezvous port."""
    return f"vllm-weight-transfer-{port}"


def vllm_gloo_group(address: str, port: int, world_size: int, _name: str) -> Any:
    """The trainer's end matching `FakeVLLM`'s workers (a `GroupFactory`)."""
    from agentrl.rollout.remote.collective import TorchBroadcastGroup

    return TorchBroadcastGroup(
        address, port, world_size, vllm_stand_in_name(port), backend="gloo", timeout_s=60.0
    )


class FakeVLLM(_FakeHTTP):
    """``vllm serve`` (dev mode, NCCL weight transfer): ``/v1/models``, ``/v1/completions``,
    ``/get_world_size``, ``/init_weight_transfer_engine``, ``/start_weight_update``,
    ``/update_weights``, ``/finish_weight_update``, ``/reset_prefix_cache``, ``/health``.

    Its workers join the trainer's group over gloo here (the real ones use vLLM's NCCL
    communicator, which needs GPUs).
    """

    MODEL = "policy"
    INIT_FIELDS = frozenset(("master_address", "master_port", "rank_offset", "world_size"))
    UPDATE_FIELDS = frozenset(
        (
            "names",
            "dtype_names",
            "shapes",
            "packed",
            "packed_buffer_size_bytes",
            "packed_num_buffers",
        )
    )

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.eos_after: int | None = None
        self.stop_token_after: int | None = None
        self.stop_string_after: int | None = None
        self.abort = False
        self.updating = False
        self.weight_version: str | None = None
        self.weights: dict[str, torch.Tensor] = {}
        self.cache_resets = 0
        super().__init__()

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/v1/models":
            card = {"id": self.MODEL, "object": "model", "owned_by": "vllm", "max_model_len": 1024}
            return 200, {"object": "list", "data": [card]}
        if method == "GET" and path.startswith("/get_world_size"):
            return 200, {"world_size": self.world_size}
        if path == "/v1/completions":
            return self._completions(body)
        if path == "/init_weight_transfer_engine":
            init = body.get("init_info") if isinstance(body, dict) else None
            if not isinstance(init, dict):
                return 400, {"detail": "Missing 'init_info' in request body"}
            if set(init) != self.INIT_FIELDS:
                return 500, {"error": f"init_info fields {sorted(init)}"}
            port, name = init["master_port"], vllm_stand_in_name(init["master_port"])
            error = self.join_group(
                init["master_address"], port, init["rank_offset"], init["world_size"], name, "gloo"
            )
            if error is not None:
                return 500, {"error": f"init failed: {error}"}
            return 200, {"message": "Weight transfer initialized"}
        if path == "/start_weight_update":
            self.updating = True
            return 200, {"message": "Weight update started"}
        if path == "/update_weights":
            info = body.get("update_info") if isinstance(body, dict) else None
            if not isinstance(info, dict):
                return 400, {"detail": "Missing 'update_info' in request body"}
            if not self.updating:
                return 500, {"error": "update_weights outside start/finish_weight_update"}
            if not set(info) <= self.UPDATE_FIELDS or info.get("packed", False):
                return 500, {"error": f"update_info fields {sorted(info)}"}
            names, dtypes, shapes = info["names"], info["dtype_names"], info["shapes"]
            if not (len(names) == len(dtypes) == len(shapes)):
                return 500, {"error": "`dtype_names` should be of the same size as `names`"}
            got = self.receive(names, dtypes, shapes)
            if isinstance(got, str):
                return 500, {"error": got}
            self.weights = got
            return 200, {"message": "Weights updated"}
        if path == "/finish_weight_update":
            if not self.updating:
                return 500, {"error": "no weight update in progress"}
            self.updating = False
            self.weight_version = (body or {}).get("weight_version")
            return 200, {"message": "Weight update finished"}
        if path == "/reset_prefix_cache":
            self.cache_resets += 1
            return 200, b""
        return 404, {"detail": "Not Found"}

    def _completions(self, body: Any) -> tuple[int, Any]:
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if body.get("model") != self.MODEL:
            return 404, {
                "error": {
                    "message": f"The model `{body.get('model')}` does not exist.",
                    "type": "NotFoundError",
                    "code": 404,
                }
            }
        if _is_int_list(prompt):
            prompt = [prompt]
        if not isinstance(prompt, list) or not all(_is_int_list(p) for p in prompt):
            return 400, {"error": {"message": "prompt must be token ids", "code": 400}}
        n = int(body["max_tokens"])
        as_ids = body.get("return_tokens_as_token_ids", False)
        choices = []
        for index, row in enumerate(prompt):
            ids = self.scripted_ids(row, n)
            reason, stop_reason = "length", None
            if self.eos_after is not None and self.eos_after < n:
                ids, reason = [*ids[: self.eos_after], EOS], "stop"
            elif self.stop_token_after is not None and self.stop_token_after < n:
                stop = body["stop_token_ids"][-1]
                ids, reason, stop_reason = [*ids[: self.stop_token_after], stop], "stop", stop
            elif self.stop_string_after is not None and self.stop_string_after < n:
                ids, reason, stop_reason = ids[: self.stop_string_after], "stop", body["stop"][0]
            if self.abort:
                reason = "abort"
            tokens = [f"token_id:{t}" if as_ids else f"t{t}" for t in ids]
            logprobs = None
            if body.get("logprobs") is not None:
                values = [-0.1 * (k + 1) for k in range(len(ids))]
                logprobs = {
                    "text_offset": list(range(len(ids))),
                    "token_logprobs": values,
                    "tokens": tokens,
                    "top_logprobs": [{tok: v} for tok, v in zip(tokens, values, strict=True)],
                }
            choice = {
                "index": index,
                "text": " ".join(f"t{t}" for t in ids),
                "logprobs": logprobs,
                "finish_reason": reason,
                "stop_reason": stop_reason,
            }
            if body.get("return_token_ids"):
                choice["prompt_token_ids"], choice["token_ids"] = row, ids
            choices.append(choice)
        # The server may answer the prompts in any order: ``index`` says which is which.
        choices.reverse()
        usage = {"prompt_tokens": sum(map(len, prompt)), "completion_tokens": 0, "total_tokens": 0}
        return 200, {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": self.MODEL,
            "choices": choices,
            "usage": usage,
        }
