"""The process group of a `torchrun` launch, and collectives that fail loudly.

`init_distributed` joins the group `torchrun` set up through its environment variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``), with NCCL on
GPUs and gloo on CPUs, and a collective timeout. Outside `torchrun` it returns None and
everything runs as one process.

Every collective goes through :meth:`DistContext.guard`: when a peer rank has died (its
sockets close) or hangs (the timeout expires), the collective's exception becomes a
:class:`DistributedError` that names this rank, the operation and the timeout, and the
context is marked broken so that later collectives fail at once instead of waiting out
the timeout again. The run then ends with that error; `torchrun` stops the other ranks.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from agentrl.errors import UsageError, UserError, first_line
from agentrl.utils.launch import launched_by_torchrun

DEFAULT_TIMEOUT_S = 1800.0  # 30 minutes


class DistributedError(UserError, RuntimeError):
    """A collective failed: another rank died, hung past the timeout, or disagreed."""


@dataclass
class DistContext:
    """This process's place in the group plus guarded collectives over it."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    timeout_s: float
    device: torch.device  # where this rank computes (cuda:<local_rank> or cpu)
    broken: str | None = field(default=None)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def comm_device(self) -> torch.device:
        """Where collective tensors must live: the GPU for NCCL, the CPU for gloo."""
        return self.device if self.backend == "nccl" else torch.device("cpu")

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn any failure inside into a DistributedError naming ``what`` (see module doc)."""
        if self.broken is not None:
            raise DistributedError(
                f"rank {self.rank}: {what} not attempted, the process group already failed: "
                f"{self.broken}"
            )
        try:
            yield
        except DistributedError:
            raise
        except (RuntimeError, ValueError, OSError, EOFError) as exc:
            self.broken = f"{what}: {first_line(exc)}"
            raise DistributedError(
                f"rank {self.rank} of {self.world_size}: '{what}' failed; another rank died or "
                f"did not answer within the {self.timeout_s:.0f}s collective timeout "
                f"(dist_timeout_sec). Cause: {type(exc).__name__}: {first_line(exc)}"
            ) from exc

    # ---- object collectives (small control messages) ----

    def broadcast_object(self, obj: Any, src: int = 0, what: str = "broadcast") -> Any:
        box = [obj if self.rank == src else None]
        with self.guard(what):
            dist.broadcast_object_list(box, src=src, device=self.comm_device)
        return box[0]

    def all_gather_objects(self, obj: Any, what: str = "all-gather") -> list[Any]:
        out: list[Any] = [None] * self.world_size
        with self.guard(what):
            dist.all_gather_object(out, obj)
        return out

    def gather_objects(self, obj: Any, dst: int = 0, what: str = "gather") -> list[Any] | None:
        """Every rank's ``obj`` on ``dst`` (None elsewhere)."""
        out: list[Any] | None = [None] * self.world_size if self.rank == dst else None
        with self.guard(what):
            dist.gather_object(obj, out, dst=dst)
        return out

    def barrier(self, what: str = "barrier", timeout_s: float | None = None) -> None:
        """Wait for every rank; on gloo a timeout names the ranks that did not arrive.

        ``timeout_s`` (gloo only) overrides the collective timeout, e.g. for the wait while
        rank 0 prepares a run (a warm start can take minutes).
        """
        with self.guard(what):
            if self.backend == "gloo":
                wait = self.timeout_s if timeout_s is None else float(timeout_s)
                dist.monitored_barrier(timeout=timedelta(seconds=wait), wait_all_ranks=True)
            else:
                dist.barrier()

    # ---- numeric agreement ----

    def all_true(self, flag: bool, what: str = "agree") -> bool:
        x = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.comm_device)
        with self.guard(what):
            dist.all_reduce(x, op=dist.ReduceOp.MIN)
        return bool(x.item() > 0)

    def mean(self, values: Sequence[float], what: str = "mean") -> list[float]:
        """Element-wise mean over ranks (a non-finite input counts as 0)."""
        clean = [float(v) if math.isfinite(float(v)) else 0.0 for v in values]
        x = torch.tensor(clean, dtype=torch.float64, device=self.comm_device)
        with self.guard(what):
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return (x / self.world_size).tolist()

    def sum(self, values: Sequence[float], what: str = "sum") -> list[float]:
        x = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.comm_device)
        with self.guard(what):
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x.tolist()

    def average_metrics(
        self, metrics: Mapping[str, Any], what: str = "metrics"
    ) -> dict[str, float]:
        """Every numeric metric averaged over the ranks that reported it (keys may differ)."""
        local = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, int | float) and math.isfinite(float(v))
        }
        gathered = self.all_gather_objects(local, what)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for part in gathered:
            for key, value in (part or {}).items():
                sums[key] = sums.get(key, 0.0) + value
                counts[key] = counts.get(key, 0) + 1
        out = {k: v for k, v in metrics.items() if k not in sums}
        out.update({k: sums[k] / counts[k] for k in sums})
        return out

    # ---- tensors ----

    def broadcast_tensors(
        self, tensors: Sequence[torch.Tensor], src: int = 0, what: str = "broadcast weights"
    ) -> None:
        """Broadcast ``tensors`` in place from ``src``, packed into few large messages."""
        for bucket in _buckets(tensors):
            flat = _flatten(bucket, self.comm_device)
            with self.guard(what):
                dist.broadcast(flat, src=src)
            if self.rank != src:
                _unflatten_into(flat, bucket)

    def all_reduce_mean_(self, tensors: Sequence[torch.Tensor], what: str = "average") -> None:
        """Average ``tensors`` over ranks, in place."""
        for bucket in _buckets(tensors):
            flat = _flatten(bucket, self.comm_device)
            with self.guard(what):
                dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            flat.div_(self.world_size)
            _unflatten_into(flat, bucket)


BUCKET_BYTES = 256 * 1024 * 1024


def _buckets(tensors: Sequence[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Consecutive runs of one dtype and device, each at most BUCKET_BYTES (or one tensor)."""
    out: list[list[torch.Tensor]] = []
    size = 0
    for t in tensors:
        last = out[-1] if out else None
        fits = last is not None and size + t.numel() * t.element_size() <= BUCKET_BYTES
        if last is not None and fits and last[0].dtype == t.dtype and last[0].device == t.device:
            last.append(t)
            size += t.numel() * t.element_size()
        else:
            out.append([t])
            size = t.numel() * t.element_size()
    return out


def _flatten(bucket: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).to(device) for t in bucket])


@torch.no_grad()
def _unflatten_into(flat: torch.Tensor, bucket: Sequence[torch.Tensor]) -> None:
    offset = 0
    for t in bucket:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t).to(t.device))
        offset += n


def init_distributed(
    backend: str = "auto",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    log: Any = print,
    *,
    one_rank_too: bool = False,
) -> DistContext | None:
    """Join the `torchrun` process group; None for a single process (see module doc).

    ``backend``: ``auto`` (NCCL when CUDA is available, falling back to gloo if NCCL
    cannot start; gloo otherwise), ``nccl`` or ``gloo``. Calling it again returns the
    same group.
    """
    if not launched_by_torchrun(one_rank_too):
        return None
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = str(backend or "auto").lower()
    if backend not in ("auto", "nccl", "gloo"):
        raise UsageError(f"dist_backend must be auto, nccl or gloo, got {backend!r}")
    cuda = torch.cuda.is_available()
    if backend == "nccl" and not cuda:
        raise UsageError("dist_backend nccl needs CUDA; use gloo on CPUs")
    candidates = ["nccl", "gloo"] if backend == "auto" and cuda else [backend]
    if backend == "auto" and not cuda:
        candidates = ["gloo"]
    # A hung NCCL collective must raise instead of blocking forever.
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(local_rank)
    if dist.is_initialized():
        chosen = str(dist.get_backend())
        return DistContext(rank, world, local_rank, chosen, timeout_s, device)
    errors = []
    for candidate in candidates:
        try:
            dist.init_process_group(backend=candidate, timeout=timedelta(seconds=timeout_s))
            if candidate == "nccl":
                probe = torch.ones(1, device=device)
                dist.all_reduce(probe)
                torch.cuda.synchronize(device)
        except (RuntimeError, ValueError) as exc:
            errors.append(f"{candidate}: {exc}")
            if dist.is_initialized():
                with contextlib.suppress(RuntimeError, ValueError):
                    dist.destroy_process_group()
            continue
        if errors and rank == 0:
            log(f"distributed backend {candidate} (fell back: {'; '.join(errors)})")
        return DistContext(rank, world, local_rank, candidate, timeout_s, device)
    raise DistributedError(f"rank {rank}: could not start a process group: {'; '.join(errors)}")


def shutdown(ctx: DistContext | None) -> None:
    """Leave the process group (quietly when it already failed)."""
    if ctx is None or not dist.is_initialized():
        return
    with contextlib.suppress(RuntimeError, ValueError):
        dist.destroy_process_group()


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DistContext",
    "DistributedError",
    "init_distributed",
    "launched_by_torchrun",
    "shutdown",
]
