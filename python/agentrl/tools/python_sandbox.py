"""The ``python`` tool: the model's code run in a sandboxed interpreter.

Each :class:`PythonSandbox` is one interpreter process (``sandbox_boot.py``) that keeps its
variables from call to call until it is closed. What is guaranteed (Linux; the set-up
refuses to start rather than run with less, except where an option says otherwise):

* **time**: each call has a wall-clock limit (the process tree is killed past it) and a
  CPU-time limit (a ``TimeoutError`` inside the code; the interpreter survives); the
  interpreter's total CPU time is capped too;
* **memory**: the address space of every process is capped (``RLIMIT_AS``): a huge
  allocation is a ``MemoryError``;
* **processes**: the code runs in its own PID namespace under a fresh unprivileged uid
  (when agentrl runs as root) with ``RLIMIT_NPROC``: a fork bomb stops at the cap, and
  closing the sandbox (or its time limit) kills every process it started;
* **network**: a fresh network namespace with no interfaces up (``allow_network=True``
  opts out; without the namespace the sandbox refuses to start);
* **files**: the code sees a root of its own (``pivot_root``, the host's root detached):
  read-only binds of the system's directories and the interpreter's (its venv and base;
  not the user's project or home), and a private, size-capped tmpfs ``/tmp`` holding the
  working directory ``/tmp/work``, gone with the sandbox; with Landlock (Linux 5.13+)
  writes outside ``/tmp`` are refused by the kernel too (see :meth:`guarantees`);
* **output**: stdout and stderr (of child processes too) are captured up to a cap.

:func:`python_tool` makes the stateless tool (a fresh interpreter per call);
`agentrl.envs.python_env.PythonEnvironment` gives each episode its own interpreter, closed
with the episode (``--python_keep_state 1``, the default for ``--tools python``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import UsageError
from agentrl.tools.framing import FrameTimeout, read_frame, write_frame
from agentrl.tools.registry import Tool
from agentrl.utils.closing import Closing

PYTHON_TOOL = "python"
_BOOT = Path(__file__).with_name("sandbox_boot.py")
# Fresh uids for sandboxes started as root: far above any real account's, one per sandbox.
_UID_BASE, _UID_SPAN = 0x60000000, 1 << 24
_uids = itertools.count((os.getpid() * 4099) % _UID_SPAN)

PYTHON_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PYTHON_TOOL,
        "description": (
            "Run Python code and get what it prints; the value of a last bare expression "
            "is returned too. No network; files only in the working directory."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source code"}},
            "required": ["code"],
        },
    },
}


class SandboxUnavailable(RuntimeError):
    """The OS cannot give the sandbox what it guarantees (the message says what and why)."""


class PythonToolError(RuntimeError):
    """The code failed (an exception, a time or memory limit); the message says how."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Limits of one sandbox; ``cpu_seconds`` 0 means the wall-clock ``timeout``.

    ``timeout``, ``memory_mb`` and ``allow_network`` are the run's ``python_*`` options,
    declared with their defaults in `agentrl.data.options.DataConfig` (see
    :func:`limits_from_options`); the others are the sandbox's own.
    """

    timeout: float  # wall-clock seconds per call
    memory_mb: int  # address space of each process
    allow_network: bool
    cpu_seconds: float = 0.0  # CPU seconds per call (0: timeout)
    max_processes: int = 16  # processes of the sandbox's uid
    disk_mb: int = 16  # the private /tmp, and the largest file
    max_output_chars: int = 4096  # each of stdout and stderr

    def __post_init__(self) -> None:
        checks = {
            "timeout": self.timeout > 0,
            "cpu_seconds": self.cpu_seconds >= 0,
            "memory_mb": self.memory_mb >= 64,
            "max_processes": self.max_processes >= 1,
            "disk_mb": self.disk_mb >= 1,
            "max_output_chars": self.max_output_chars >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = ", ".join(f"{n}={getattr(self, n)!r}" for n in bad)
            raise ValueError(f"python tool limits out of range: {values}")

    @property
    def cpu(self) -> float:
        return self.cpu_seconds or self.timeout


class PythonSandbox(Closing):
    """One sandboxed interpreter; :meth:`run` calls share its variables until :meth:`close`.

    Started on the first call. A call that passes its wall-clock limit, or a sandbox that
    dies, kills the whole process tree; the next call starts a fresh interpreter and its
    result says the state was lost. Calls on one sandbox run one at a time.
    """

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._lost_state = False
        self._guarantees: dict[str, Any] = {}
        self.uid: int | None = None
        self.stats = {"calls": 0, "timeouts": 0, "restarts": 0}

    # ---- lifecycle ----

    def _settings(self) -> dict[str, Any]:
        self.uid = _UID_BASE + next(_uids) % _UID_SPAN if os.geteuid() == 0 else None
        limits = self.limits
        return {
            "network": limits.allow_network,
            "memory_mb": limits.memory_mb,
            "max_processes": limits.max_processes,
            "disk_mb": limits.disk_mb,
            "max_output_chars": limits.max_output_chars,
            # The interpreter's whole CPU budget: 100 calls at the per-call limit.
            "cpu_budget": max(int(limits.cpu * 100), 10),
            "uid": self.uid,
        }

    def _start(self) -> None:
        if sys.platform != "linux":
            raise SandboxUnavailable(f"the python tool's sandbox needs Linux, not {sys.platform}")
        process = subprocess.Popen(
            [sys.executable, "-I", str(_BOOT), json.dumps(self._settings())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            cwd="/",
            start_new_session=True,
            bufsize=0,
        )
        self._process = process
        wait = max(self.limits.timeout, 10.0)
        try:
            ready = self._receive(wait)
        except PythonToolError:
            self._kill()
            raise SandboxUnavailable(
                f"the python tool's sandbox did not start: no ready signal within {wait:g}s"
            ) from None
        if "setup_error" in ready:
            self._kill()
            hint = (
                " (or run with --python_allow_network 1 to give the code network access)"
                if "network namespace" in ready["setup_error"] and not self.limits.allow_network
                else ""
            )
            raise SandboxUnavailable(
                f"the python tool's sandbox cannot be set up on this system: "
                f"{ready['setup_error']}{hint}"
            )
        self._guarantees = dict(ready.get("guarantees", {}))

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        # The launcher kills the PID-namespace init on SIGTERM and reaps it (the kernel
        # kills every process in the namespace with it). A launcher that does not exit is
        # killed with its group; the init then dies with its parent (PDEATHSIG).
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        """Kill the interpreter and everything it started; the sandbox can start again."""
        with self._lock:
            self._kill()

    def guarantees(self) -> dict[str, Any]:
        """What the running sandbox applied: namespaces, uid, Landlock ABI (0: none)."""
        with self._lock:
            if self._process is None:
                self._start()
            return dict(self._guarantees)

    # ---- calls ----

    def run(self, code: str) -> dict[str, Any]:
        """Run ``code``: ``{"stdout", "stderr", "value"?}``; raises :class:`PythonToolError`
        when it fails (its message has the error line, then the output)."""
        if not isinstance(code, str):
            raise PythonToolError("code must be a string")
        with self._lock:
            self.stats["calls"] += 1
            lost = self._lost_state
            if self._process is None or self._process.poll() is not None:
                if self._process is not None:
                    self._kill()
                    lost = True
                if lost:
                    self.stats["restarts"] += 1
                self._start()
            self._lost_state = False
            try:
                reply = self._call(code)
            except PythonToolError:
                self._kill()
                self._lost_state = True
                raise
        result: dict[str, Any] = {"stdout": reply.get("stdout", "")}
        if reply.get("stderr"):
            result["stderr"] = reply["stderr"]
        if reply.get("value") is not None:
            result["value"] = reply["value"]
        if lost:
            result["note"] = "the interpreter was restarted: earlier variables are gone"
        if reply.get("status") != "ok":
            raise PythonToolError(_failure_text(reply.get("error") or "failed", result))
        return result

    def _call(self, code: str) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdin is not None
        data = json.dumps({"code": code, "cpu": self.limits.cpu}).encode()
        try:
            write_frame(process.stdin.fileno(), data)
        except OSError:
            raise PythonToolError("the interpreter died") from None
        return self._receive(self.limits.timeout)

    def _receive(self, timeout: float) -> dict[str, Any]:
        process = self._process
        assert process is not None and process.stdout is not None
        # A reply holds two capped outputs, an error line and a value: far below this.
        limit = 16 * self.limits.max_output_chars + 65536
        try:
            body = read_frame(process.stdout.fileno(), time.monotonic() + timeout, limit)
        except FrameTimeout:
            self.stats["timeouts"] += 1
            raise PythonToolError(
                f"TimeoutError: the code ran past the {self.limits.timeout:g}s time limit "
                "(it was killed, its variables are gone)"
            ) from None
        except EOFError:
            raise PythonToolError(
                "the interpreter died (a limit was passed, or it exited)"
            ) from None
        except ValueError:
            raise PythonToolError("the interpreter sent a malformed reply") from None
        try:
            reply = json.loads(body)
        except ValueError:
            raise PythonToolError("the interpreter sent a malformed reply") from None
        if not isinstance(reply, dict):
            raise PythonToolError("the interpreter sent a malformed reply")
        return reply


def _failure_text(error: str, result: dict[str, Any]) -> str:
    """The error first (events keep the start of a message), then what the code printed."""
    parts = [error]
    if "note" in result:
        parts.append(result["note"])
    for key in ("stdout", "stderr"):
        text = result.get(key, "").strip()
        if text and not (key == "stderr" and text.endswith(error)):
            parts.append(f"{key}: {text}")
    return " | ".join(parts)


def check_sandbox(limits: SandboxLimits) -> dict[str, Any]:
    """Start a sandbox, run nothing, close it: its guarantees, or SandboxUnavailable."""
    with PythonSandbox(limits) as sandbox:
        return sandbox.guarantees()


def python_tool(limits: SandboxLimits) -> Tool:
    """The stateless ``python`` tool: every call in a fresh sandbox, closed after it."""

    def python(args: dict[str, Any]) -> dict[str, Any]:
        with PythonSandbox(limits) as sandbox:
            return sandbox.run(args.get("code", ""))

    return sandbox_tool(python, limits)


def sandbox_tool(fn: Callable[[dict[str, Any]], Any], limits: SandboxLimits) -> Tool:
    """The ``python`` tool calling ``fn(args)``, with waits and caps fitted to ``limits``."""
    spec = json.loads(json.dumps(PYTHON_SPEC))
    # The registry's own wait outlasts the sandbox's limit, so the sandbox's answer wins;
    # start-up (a second or so) counts too.
    return Tool(
        name=PYTHON_TOOL,
        fn=fn,
        spec=spec,
        timeout=limits.timeout + 15.0,
        max_result_chars=4 * limits.max_output_chars + 1024,
        raw_args=True,
        isolate=False,
    )


def limits_from_options(options: Any) -> SandboxLimits:
    """The sandbox limits a run's config (or its ``data`` section, `DataConfig`) asks for:
    its ``python_*`` options."""
    return SandboxLimits(
        timeout=float(options.python_timeout),
        memory_mb=int(options.python_memory_mb),
        allow_network=bool(options.python_allow_network),
    )


def checked_limits(options: Any) -> SandboxLimits:
    """:func:`limits_from_options`, after a sandbox has started with them: a system that
    cannot isolate the code is a :class:`UsageError` before the run starts."""
    try:
        limits = limits_from_options(options)
        check_sandbox(limits)
    except (ValueError, SandboxUnavailable) as exc:
        raise UsageError(f"--tools python: {exc}") from None
    return limits


__all__ = [
    "PYTHON_SPEC",
    "PYTHON_TOOL",
    "PythonSandbox",
    "PythonToolError",
    "SandboxLimits",
    "SandboxUnavailable",
    "check_sandbox",
    "checked_limits",
    "limits_from_options",
    "python_tool",
    "sandbox_tool",
]
