"""Worker processes for synchronous user tools: a hung or crashing tool costs a call.

A thread cannot be stopped, so a sync tool that never returns would keep its thread (and
whatever it holds) for the rest of the run. Sync user tools that can be found again by
import path (``module`` + ``qualname``) run instead in a worker process: past its timeout
the worker is killed and a fresh one takes its place on the next call. In the worker, any
exception (``SystemExit`` and ``KeyboardInterrupt`` included) becomes an error message,
and the result is encoded to JSON with its size cap checked while encoding, so a 100 MB
result is refused without being encoded (or sent back) in full.

Workers are fresh interpreters (``python -c``, with this process's ``sys.path``): forking
a process that runs torch threads is not safe, and unlike ``multiprocessing``'s spawn they
never re-run the main script, so a training script needs no ``__main__`` guard. Each
worker leads its own process group, and a worker is stopped (timeout, death, end of run)
by killing that group: a tool's children (a subprocess, a forked ``sleep``) go with it. Requests
and replies are pickles in frames (`agentrl.tools.framing`) on the worker's stdin and a copy
of its stdout; what a tool prints goes to stderr. Workers are kept warm between calls.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import decimal
import enum
import fractions
import importlib
import json
import os
import pathlib
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any

from agentrl.errors import exception_text
from agentrl.tools.framing import read_frame, write_frame


def tool_json_default(value: Any) -> Any:
    """The JSON form of a tool result's values that JSON has no type for, or TypeError.

    Kept conversions: ``datetime``/``date``/``time`` -> ISO 8601 text (``isoformat()``);
    ``set``/``frozenset`` -> a list (sorted when its items sort); ``bytes`` -> its UTF-8
    text; ``Decimal``/``Fraction`` -> a number; ``Path``, ``UUID`` -> text; an ``Enum`` ->
    its value; numpy and torch arrays and scalars -> lists and numbers; a dataclass -> an
    object of its fields. Anything else is an error observation for the model (never its
    ``str()`` passed off as a result).
    """
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError("bytes that are not UTF-8 text") from None
    if isinstance(value, decimal.Decimal | fractions.Fraction):
        return float(value)
    if isinstance(value, pathlib.PurePath | uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if type(value).__module__.split(".")[0] in ("numpy", "torch") and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a value of type {type(value).__name__}")


# Chunks of JSON text the capped encoder joins; a text longer than the cap stops encoding.
# No NaN or Infinity: they are not JSON, and the model is shown JSON.
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=tool_json_default, allow_nan=False
)


class ResultTooLarge(ValueError):
    """Raised by :func:`capped_json` when the encoded result passes its cap."""


class ResultNotJSON(ValueError):
    """Raised by :func:`capped_json` for a result JSON cannot carry (see
    :func:`tool_json_default`): the call fails with this message as its observation."""


def _encode_failure(exc: Exception) -> ResultNotJSON:
    if isinstance(exc, ValueError) and "Out of range float" in str(exc):
        return ResultNotJSON("result is not JSON: it holds NaN or an infinity")
    if isinstance(exc, ValueError) and "Circular reference" in str(exc):
        return ResultNotJSON("result is not JSON: it refers to itself")
    what = str(exc) if isinstance(exc, TypeError) and str(exc).startswith("a value") else exc
    return ResultNotJSON(f"result is not JSON: {what} (return dict, list, str, number, bool)")


def capped_json(value: Any, cap: int) -> str:
    """``value`` as compact JSON, refused as soon as the text passes ``cap`` characters.

    A long string (or bytes) is refused before encoding, from its length alone; anything
    else is encoded chunk by chunk and stops at the first chunk past the cap.
    """
    if cap > 0 and isinstance(value, str | bytes | bytearray) and len(value) + 2 > cap:
        raise ResultTooLarge(f"result too large: more than {cap} characters")
    try:
        if cap <= 0:
            return _ENCODER.encode(value)
        parts, size = [], 0
        for chunk in _ENCODER.iterencode(value):
            size += len(chunk)
            if size > cap:
                raise ResultTooLarge(f"result too large: more than {cap} characters")
            parts.append(chunk)
    except ResultTooLarge:
        raise
    except (TypeError, ValueError, RecursionError) as exc:
        raise _encode_failure(exc) from None
    return "".join(parts)


def import_reference(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(module, qualname)`` that finds ``fn`` again in another process, or None."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    if getattr(fn, "__self__", None) is not None:  # a bound method: its state lives here
        return None
    try:
        found = resolve_reference(module, qualname)
    except (ImportError, AttributeError):
        return None
    return (module, qualname) if found is fn else None


def resolve_reference(module: str, qualname: str) -> Callable[..., Any]:
    """The function at ``module``/``qualname``; a ``Tool`` found there gives its function."""
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    inner = getattr(value, "fn", None)  # a @tool-decorated function is a Tool object
    return inner if callable(inner) and hasattr(value, "spec") else value


def _send(fd: int, value: Any) -> None:
    write_frame(fd, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(fd: int) -> Any:
    return pickle.loads(read_frame(fd))


def _answer(request: tuple[str, str, dict[str, Any], bool, int]) -> tuple[str, str]:
    module, qualname, args, raw, cap = request
    try:
        fn = resolve_reference(module, qualname)
        value = fn(args) if raw else fn(**args)
        return ("ok", capped_json(value, cap))
    except BaseException as exc:  # every failure of a tool is the caller's error event
        text = exception_text(exc)
        return ("error", f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def serve_stdio() -> None:
    """A worker's loop: (module, qualname, args, raw, cap) in, ("ok"|"error", text) out."""
    requests, replies = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # tools read no protocol bytes
    os.dup2(2, 1)  # and what they print goes to stderr
    sys.stdout = sys.stderr
    try:
        _send(replies, READY)  # booted: the caller's clock for the call starts now
    except OSError:
        return
    while True:
        try:
            request = _receive(requests)
        except (EOFError, OSError):
            return
        try:
            _send(replies, _answer(request))
        except OSError:
            return


_BOOT = "from agentrl.tools.workers import serve_stdio; serve_stdio()"
# A worker's first frame, once its interpreter and imports are up.
READY = "ready"
# How long a new worker may take to boot (a busy machine can take seconds): not part of any
# call's timeout, which measures the tool, not the interpreter's start.
STARTUP_LIMIT_S = 120.0


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), *sys.path) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=env,
            # Its own process group: what the tool starts (a shell, a `sleep 3000`) dies with it.
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests: IO[bytes] = self.process.stdin
        self.replies: IO[bytes] = self.process.stdout
        self.ready = False

    def wait_ready(self, limit: float = STARTUP_LIMIT_S) -> float:
        """Wait for the boot frame: the seconds it took (0 once booted); RuntimeError when
        the worker dies or takes longer than ``limit``."""
        if self.ready:
            return 0.0
        began = time.monotonic()
        if not self.poll(limit):
            raise RuntimeError(f"the tool's worker process did not start within {limit:g}s")
        if self.recv() != READY:
            raise RuntimeError("the tool's worker process started with an unexpected reply")
        self.ready = True
        return time.monotonic() - began

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, request: Any) -> None:
        _send(self.requests.fileno(), request)

    def poll(self, timeout: float | None) -> bool:
        ready, _, _ = select.select([self.replies], [], [], timeout)
        return bool(ready)

    def recv(self) -> Any:
        return _receive(self.replies.fileno())

    def stop(self) -> None:
        """Kill the worker and every process the tool started in its group (children
        outlive a killed parent: the group, not the worker, is what a timeout ends)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        for stream in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                stream.close()


class ToolCallTimeout(TimeoutError):
    """The worker did not answer within the call's timeout; it was killed."""


class ToolWorkers:
    """Up to ``size`` warm worker processes; a call takes an idle one or starts one."""

    def __init__(self, size: int = 8) -> None:
        self.size = max(1, int(size))
        self._idle: list[_Worker] = []
        self._busy = 0
        self._cond = threading.Condition()
        self.stats = {"started": 0, "killed": 0}

    def call(
        self,
        module: str,
        qualname: str,
        args: Mapping[str, Any],
        *,
        raw: bool,
        cap: int,
        timeout: float,
    ) -> Any:
        """Run the function in a worker: its JSON result, or an exception with its message.

        ``timeout`` (seconds, 0: none) counts from the call's start, waiting for a free
        worker included, a new worker's start-up not (it has ``STARTUP_LIMIT_S``); past it
        the worker is killed and :class:`ToolCallTimeout` raised.
        """
        deadline = time.monotonic() + timeout if timeout > 0 else None
        worker = self._acquire(deadline, timeout)
        try:
            booted = worker.wait_ready()
            if deadline is not None:
                deadline += booted
            worker.send((module, qualname, dict(args), raw, cap))
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            answered = worker.poll(left)
            if answered:
                kind, text = worker.recv()
        except (EOFError, OSError) as exc:
            self._discard(worker)
            raise RuntimeError(f"the tool's worker process died ({type(exc).__name__})") from None
        except BaseException:
            self._discard(worker)
            raise
        if not answered:
            self._discard(worker)
            raise ToolCallTimeout(f"timed out after {timeout:g}s")
        self._release(worker)
        if kind == "error":
            raise RuntimeError(text)
        return json.loads(text)

    def busy(self) -> int:
        with self._cond:
            return self._busy

    def _acquire(self, deadline: float | None, timeout: float) -> _Worker:
        with self._cond:
            while not self._idle and self._busy >= self.size:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ToolCallTimeout(f"timed out after {timeout:g}s (no free worker)")
                self._cond.wait(left)
            self._busy += 1
            worker = self._idle.pop() if self._idle else None
        if worker is not None and not worker.alive():
            worker.stop()
            worker = None
        if worker is None:
            try:
                worker = _Worker()
            except BaseException:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify()
                raise
            self.stats["started"] += 1
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._busy -= 1
            self._idle.append(worker)
            self._cond.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.stop()
        self.stats["killed"] += 1
        with self._cond:
            self._busy -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()


_shared: ToolWorkers | None = None
_shared_lock = threading.Lock()


def shared_workers() -> ToolWorkers:
    """The process-wide worker pool (``AGENTRL_TOOL_WORKERS`` workers, default 8)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ToolWorkers(int(os.environ.get("AGENTRL_TOOL_WORKERS", "8")))
            atexit.register(_shared.close)
        return _shared


__all__ = [
    "ResultNotJSON",
    "ResultTooLarge",
    "ToolCallTimeout",
    "ToolWorkers",
    "capped_json",
    "import_reference",
    "resolve_reference",
    "serve_stdio",
    "shared_workers",
    "tool_json_default",
]
