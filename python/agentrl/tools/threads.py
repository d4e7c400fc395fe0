"""Tool calls that run in a thread of this process, and the count of those that hung.

A call that runs past its timeout in a thread cannot be stopped by Python: it is counted
process-wide (across every registry), and at `MAX_HUNG_THREADS` still running the run
stops in one line (`HungToolCalls`) rather than pile up threads, and what they hold, for
the rest of its life.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agentrl.errors import RecurringError

# Calls that ran past their timeout in a thread and are still running, across every
# registry of the process: past MAX_HUNG_THREADS the run stops.
MAX_HUNG_THREADS = 8
_HUNG: list[tuple[threading.Thread, str]] = []
_HUNG_LOCK = threading.Lock()


class ToolTimeoutError(TimeoutError):
    """A tool did not return within its time limit."""


class HungToolCalls(RecurringError):
    """Too many tool calls still run in threads past their timeout: the run stops rather
    than pile up threads (and what they hold) for the rest of its life."""


def hung_tool_threads() -> int:
    """Threads of timed-out tool calls that are still running."""
    with _HUNG_LOCK:
        _HUNG[:] = [(thread, name) for thread, name in _HUNG if thread.is_alive()]
        return len(_HUNG)


def count_hung(thread: threading.Thread, name: str) -> None:
    """Note a timed-out call's thread; raise :class:`HungToolCalls` at the cap."""
    with _HUNG_LOCK:
        _HUNG[:] = [(t, n) for t, n in _HUNG if t.is_alive()]
        if thread.is_alive():
            _HUNG.append((thread, name))
        if len(_HUNG) < MAX_HUNG_THREADS:
            return
        names = sorted({n for _, n in _HUNG})
    raise HungToolCalls(
        f"{MAX_HUNG_THREADS} tool calls ({', '.join(names)}) still run past their timeout in "
        "threads that cannot be stopped: stopping the run. A tool importable by name (a "
        "module-level function, not a bound method or closure) runs in a worker process "
        "that is killed at its timeout instead"
    )


class Pending:
    """A call started in a worker thread, to be collected with :meth:`wait`."""

    def __init__(self, target: Callable[[], Any], name: str, timeout: float) -> None:
        self.timeout = timeout
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(target,), name=f"agentrl-tool-{name}", daemon=True
        )
        self.thread.start()

    def _run(self, target: Callable[[], Any]) -> None:
        try:
            self.value = target()
        except Exception as exc:  # reported as a failed call, never re-raised here
            self.error = exc
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the tool's, not ours
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.error = RuntimeError(text)
        finally:
            self.done.set()

    def wait(self) -> Any:
        if not self.done.wait(self.timeout if self.timeout > 0 else None):
            raise ToolTimeoutError(f"timed out after {self.timeout:g}s")
        if self.error is not None:
            raise self.error
        return self.value


__all__ = [
    "MAX_HUNG_THREADS",
    "HungToolCalls",
    "Pending",
    "ToolTimeoutError",
    "count_hung",
    "hung_tool_threads",
]
