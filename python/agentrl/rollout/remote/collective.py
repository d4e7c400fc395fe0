"""Pushing policy weights to a rollout server over a collective broadcast (NCCL, or gloo).

Both SGLang and vLLM take new weights over a process group that the trainer and the
server's workers join for that purpose only: the trainer is rank 0 and broadcasts each
tensor; the server learns the names, dtypes and shapes over HTTP and receives the bytes
over the group. Two things follow, and live here once:

* The HTTP call and the trainer's side of the collective must run at the same time: the
  server answers the call only after it has joined (or received), and joining or
  broadcasting blocks until the server does its part. `beside_server_call` runs both and
  fails as soon as either side fails, naming which. When the server refuses to join, this
  side's wait for it is called off (`TorchGroupFactory.call_off`) rather than left blocked
  in native code: a thread still waiting there when the interpreter exits aborts the process.
* The group must be one the server can join. SGLang builds a plain ``torch.distributed``
  group on a ``tcp://`` rendezvous under a store prefixed with the group's name, registered
  beside (not instead of) any default group; `TorchBroadcastGroup` builds the same one, with
  any backend torch has (``nccl`` on GPUs, ``gloo`` on CPUs). vLLM's weight-transfer engine
  joins with its own ``StatelessProcessGroup`` and ``PyNcclCommunicator``; its trainer side
  exists only inside vLLM, so `VLLMNcclGroup` borrows it from an installed vLLM.

The group is created once, on the first weight update, under a name unique to this run so
that a server that outlives one run can join the next one's group.
"""

from __future__ import annotations

import datetime
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import torch

from agentrl.rollout.remote.http import RemoteEngineError
from agentrl.utils.imports import require_module

T = TypeVar("T")

BACKENDS = ("nccl", "gloo")

VLLM_MISSING = (
    "--rollout_engine vllm-server pushes weights through vLLM's NCCL group, whose trainer "
    "side comes with vLLM: pip install 'agentrl[vllm]' in the trainer's environment too "
    "(import failed: {exc})"
)


class BroadcastGroup(Protocol):
    """The trainer's end of a weight-update group: rank 0, the only sender."""

    device: torch.device

    def broadcast(self, tensor: torch.Tensor) -> None:
        """Send ``tensor`` (already on ``device``) to every other rank."""

    def close(self) -> None:
        """Leave the group (the server must be told separately)."""


# Builds the trainer's end: (master address, master port, world size, group name) -> group.
GroupFactory = Callable[[str, int, int, str], BroadcastGroup]


@dataclass(frozen=True)
class TensorSpecs:
    """What the server needs to receive a state dict: names, dtype names, shapes, in order."""

    names: list[str]
    dtypes: list[str]
    shapes: list[list[int]]


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: the spelling both servers resolve with getattr."""
    return str(dtype).removeprefix("torch.")


def tensor_specs(state: Mapping[str, torch.Tensor]) -> TensorSpecs:
    """The names, dtypes and shapes of ``state``'s tensors, in the order they are sent."""
    names = [k for k, v in state.items() if torch.is_tensor(v)]
    return TensorSpecs(
        names=names,
        dtypes=[dtype_name(state[k].dtype) for k in names],
        shapes=[list(state[k].shape) for k in names],
    )


def broadcast_state(
    group: BroadcastGroup, state: Mapping[str, torch.Tensor], specs: TensorSpecs
) -> int:
    """Broadcast ``state``'s tensors in ``specs`` order; the bytes sent."""
    sent = 0
    with torch.no_grad():
        for name in specs.names:
            tensor = state[name].detach().to(group.device).contiguous()
            group.broadcast(tensor)
            sent += tensor.numel() * tensor.element_size()
    return sent


def unique_group_name(prefix: str = "agentrl-weights") -> str:
    """A group name no earlier run used: a server cannot register one name twice."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def free_port(host: str) -> int:
    """A TCP port free on ``host`` now (the rendezvous store listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host if host not in ("", "localhost") else "127.0.0.1", 0))
        return int(sock.getsockname()[1])


def address_seen_by(server_url: str) -> str:
    """This machine's address on the route to the server: where the server can reach us.

    A loopback server gets ``127.0.0.1``; otherwise the local end of a UDP "connection" to
    the server's host (no packet is sent) names the interface the server is reached by.
    """
    host = urlsplit(server_url).hostname or "127.0.0.1"
    if host in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((host, 9))
            return str(sock.getsockname()[0])
    except OSError as exc:
        raise RemoteEngineError(
            f"cannot tell which local address the server at {server_url} reaches this "
            f"machine by ({exc}); set --weight_sync_host"
        ) from exc


def require_gpu(what: str, instead: str) -> None:
    """RemoteEngineError when this process has no CUDA device for ``what``."""
    if not torch.cuda.is_available():
        raise RemoteEngineError(f"{what} sends from a GPU and this process has none: {instead}")


class TorchBroadcastGroup:
    """A ``torch.distributed`` group built the way SGLang's server builds its end.

    ``tcp://address:port`` rendezvous (rank 0 hosts the store), the store prefixed with the
    group's name, and the group registered by name next to the default group (if any), so
    that a trainer that already runs ``torch.distributed`` keeps its own group untouched.
    """

    def __init__(
        self,
        master_address: str,
        master_port: int,
        world_size: int,
        group_name: str,
        *,
        backend: str = "nccl",
        rank: int = 0,
        timeout_s: float = 600.0,
        device: torch.device | None = None,
        called_off: threading.Event | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"weight-sync backend {backend!r}: choose from {', '.join(BACKENDS)}")
        if backend == "nccl" and device is None:
            TorchGroupFactory(backend).preflight()
        from torch.distributed import distributed_c10d as c10d

        self.backend = backend
        self.group_name = group_name
        if device is None:
            on_gpu = backend == "nccl"
            device = (
                torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
            )
        self.device = device
        timeout = datetime.timedelta(seconds=float(timeout_s))
        url = f"tcp://{master_address}:{int(master_port)}"
        _raise_if_called_off(called_off, group_name)
        store, rank, world_size = next(c10d.rendezvous(url, rank, world_size, timeout=timeout))
        _raise_if_called_off(called_off, group_name)
        store.set_timeout(timeout)
        prefixed = c10d.PrefixStore(group_name, store)
        group, _ = c10d._new_process_group_helper(
            world_size,
            rank,
            [],
            c10d.Backend(backend),
            prefixed,
            group_name=group_name,
            timeout=timeout,
        )
        # Ranks in this group are its own: map them one to one so collectives accept them.
        c10d._world.pg_group_ranks[group] = {i: i for i in range(world_size)}
        self.group = group
        self.rank = rank

    def broadcast(self, tensor: torch.Tensor) -> None:
        torch.distributed.broadcast(tensor, src=0, group=self.group)

    def close(self) -> None:
        if self.group is not None:
            torch.distributed.destroy_process_group(self.group)
            self.group = None


class TorchGroupFactory:
    """A `GroupFactory` for `TorchBroadcastGroup` with ``backend``; joins it starts can be
    called off (`call_off`) while they wait for the server."""

    def __init__(self, backend: str, *, timeout_s: float = 600.0) -> None:
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self._called_off: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def preflight(self) -> None:
        """Fail before the server is contacted when this side cannot join at all."""
        if self.backend == "nccl":
            require_gpu("weight_sync='nccl'", "use --weight_sync gloo or disk")

    def __call__(self, address: str, port: int, world_size: int, name: str) -> BroadcastGroup:
        event = self._event(name)
        try:
            return TorchBroadcastGroup(
                address,
                port,
                world_size,
                name,
                backend=self.backend,
                timeout_s=self.timeout_s,
                called_off=event,
            )
        finally:
            with self._lock:
                self._called_off.pop(name, None)

    def _event(self, name: str) -> threading.Event:
        with self._lock:
            return self._called_off.setdefault(name, threading.Event())

    def call_off(self, address: str, port: int, world_size: int, name: str) -> None:
        """End a join of ``name`` that waits for the server: it raises instead of building
        the group. The rendezvous store waits for ``world_size - 1`` clients in native
        code; clients that connect and leave release it (more than needed is harmless)."""
        with self._lock:
            pending = name in self._called_off  # else the join, once it starts, sees the event
        self._event(name).set()
        if pending and _listening(address, port, CALL_OFF_PROBE_S):
            _release_rendezvous(address, port, world_size)


def torch_group_factory(backend: str, *, timeout_s: float = 600.0) -> GroupFactory:
    """A `GroupFactory` for `TorchBroadcastGroup` with ``backend``."""
    return TorchGroupFactory(backend, timeout_s=timeout_s)


# Seconds to wait for a join's rendezvous store to listen before releasing it.
CALL_OFF_PROBE_S = 2.0


def _raise_if_called_off(called_off: threading.Event | None, name: str) -> None:
    if called_off is not None and called_off.is_set():
        raise RemoteEngineError(f"joining weight-update group {name!r} was called off")


def _listening(address: str, port: int, within_s: float) -> bool:
    """Whether something accepts connections at ``address:port`` within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            with socket.create_connection((address, int(port)), timeout=0.2):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def _release_rendezvous(address: str, port: int, world_size: int) -> None:
    """Connect ``world_size - 1`` store clients to a rendezvous master that waits for them."""
    from torch.distributed import TCPStore

    for _ in range(max(0, int(world_size) - 1)):
        try:
            TCPStore(address, int(port), int(world_size), False, datetime.timedelta(seconds=5))
        except (RuntimeError, ValueError):  # the master ended meanwhile: nothing to release
            return


def call_off(factory: GroupFactory, address: str, port: int, world_size: int, name: str) -> None:
    """Call off a pending join where ``factory`` knows how (`TorchGroupFactory` does)."""
    method = getattr(factory, "call_off", None)
    if callable(method):
        method(address, port, world_size, name)


class VLLMNcclGroup:
    """The trainer's end of vLLM's NCCL weight-transfer group, built by vLLM's own classes.

    vLLM's workers join with ``vllm.distributed.utils.StatelessProcessGroup`` (a TCP store
    at ``master_address:master_port``) and a ``PyNcclCommunicator`` over it; only the same
    pair on this side forms the same NCCL communicator, so this needs vLLM installed here.
    """

    def __init__(self, master_address: str, master_port: int, world_size: int) -> None:
        try:
            from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
            from vllm.distributed.utils import StatelessProcessGroup
        except ImportError as exc:
            raise RemoteEngineError(VLLM_MISSING.format(exc=exc)) from exc
        require_gpu("the vLLM server's NCCL weight transfer", "the trainer needs a CUDA device")
        self.device = torch.device("cuda", torch.cuda.current_device())
        store_group = StatelessProcessGroup.create(
            host=master_address, port=int(master_port), rank=0, world_size=int(world_size)
        )
        self._comm: Any = PyNcclCommunicator(store_group, device=self.device)

    def broadcast(self, tensor: torch.Tensor) -> None:
        self._comm.broadcast(tensor, src=0, stream=torch.cuda.current_stream())

    def close(self) -> None:
        self._comm = None


def _vllm_preflight() -> None:
    require_gpu("the vLLM server's NCCL weight transfer", "the trainer needs a CUDA device")
    require_module("vllm", RemoteEngineError, VLLM_MISSING)  # only its presence is checked


def vllm_nccl_group(address: str, port: int, world_size: int, _name: str) -> BroadcastGroup:
    """`GroupFactory` for `VLLMNcclGroup` (vLLM's group has no name)."""
    return VLLMNcclGroup(address, port, world_size)


vllm_nccl_group.preflight = _vllm_preflight  # type: ignore[attr-defined]


def preflight(factory: GroupFactory) -> None:
    """Run ``factory``'s own check that this side can join, when it has one."""
    check = getattr(factory, "preflight", None)
    if callable(check):
        check()


class _Outcome:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


def _start(fn: Callable[[], Any], name: str) -> _Outcome:
    outcome = _Outcome()

    def run() -> None:
        try:
            outcome.value = fn()
        except BaseException as exc:
            outcome.error = exc
        finally:
            outcome.done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    return outcome


def beside_server_call(
    server_call: Callable[[], T],
    local_side: Callable[[], Any],
    *,
    what: str,
    timeout_s: float,
    poll_s: float = 0.02,
    call_off_local: Callable[[], None] | None = None,
    grace_s: float = 5.0,
) -> tuple[T, Any]:
    """Run ``server_call`` (an HTTP request) and ``local_side`` (this rank's collective) at
    once; both results, or RemoteEngineError as soon as either fails or ``timeout_s`` passes.

    When the server fails first, ``call_off_local`` (if given) ends the local side's wait,
    which is then given ``grace_s`` to finish. A side that cannot be called off is left to
    its own timeout in a daemon thread: the group is then unusable, and the error stops
    the run.
    """
    server = _start(server_call, f"{what}-http")
    local = _start(local_side, f"{what}-collective")
    deadline = time.monotonic() + float(timeout_s)
    while not (server.done.is_set() and local.done.is_set()):
        if server.error is not None:
            _call_off(local, call_off_local, grace_s)
            raise _failure(what, "the server", server.error)
        if local.error is not None:
            server.done.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            if server.error is not None:
                raise _failure(what, "the server", server.error)
            raise _failure(what, "this side", local.error)
        if time.monotonic() >= deadline:
            waiting = "the server's answer" if not server.done.is_set() else "the collective"
            _call_off(local, call_off_local, grace_s)
            raise RemoteEngineError(f"{what}: still waiting for {waiting} after {timeout_s:.0f}s")
        time.sleep(poll_s)
    if server.error is not None:
        raise _failure(what, "the server", server.error)
    if local.error is not None:
        raise _failure(what, "this side", local.error)
    return server.value, local.value


def _call_off(local: _Outcome, call_off_local: Callable[[], None] | None, grace_s: float) -> None:
    if call_off_local is None or local.done.is_set():
        return
    try:
        call_off_local()
    except Exception:  # best effort: the failure being raised is what the caller needs
        return
    local.done.wait(grace_s)


def _failure(what: str, side: str, error: BaseException) -> RemoteEngineError:
    if isinstance(error, RemoteEngineError) and side == "the server":
        return RemoteEngineError(f"{what} failed: {error}")
    out = RemoteEngineError(f"{what} failed on {side}: {type(error).__name__}: {error}")
    out.__cause__ = error
    return out


def require_success(answer: Any, what: str) -> None:
    """SGLang's weight endpoints answer ``{"success": bool, "message": str}``."""
    if not isinstance(answer, Mapping) or answer.get("success") is not True:
        message = answer.get("message") if isinstance(answer, Mapping) else answer
        raise RemoteEngineError(f"{what}: the server reported failure: {message}")


__all__ = [
    "BACKENDS",
    "BroadcastGroup",
    "GroupFactory",
    "TensorSpecs",
    "TorchBroadcastGroup",
    "TorchGroupFactory",
    "VLLMNcclGroup",
    "address_seen_by",
    "beside_server_call",
    "broadcast_state",
    "call_off",
    "dtype_name",
    "free_port",
    "preflight",
    "require_gpu",
    "require_success",
    "tensor_specs",
    "torch_group_factory",
    "unique_group_name",
    "vllm_nccl_group",
]
