"""Stopping a run cleanly: SIGINT/SIGTERM (or a time limit) finish the current step,
save a checkpoint and end the run; the signal is remembered (``signum``) so that the
command exits with 128 + its number (130, 143), as a scheduler expects of a stopped job.

The first signal only sets a flag the loop checks between steps; a second SIGINT means
"now" and raises KeyboardInterrupt as usual (`agentrl.errors.Interrupted`, told apart from
one that user code raises). Handlers are installed only in the main
thread (Python allows nothing else) and the previous ones are put back afterwards.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from agentrl.errors import Interrupted


class StopRequest:
    """A flag set by SIGINT/SIGTERM or by running past ``max_time`` seconds."""

    def __init__(self, max_time: float = 0.0, log: Callable[[str], None] = print) -> None:
        self.max_time = float(max_time)
        self.log = log
        self.started = time.monotonic()
        self.reason: str | None = None
        self.signum: int | None = None  # the signal that asked to stop, if one did
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.reason is not None and signum == signal.SIGINT:
            raise Interrupted
        name = signal.Signals(signum).name
        self.reason = f"received {name}"
        self.signum = signum
        self.log(f"{name} received: finishing the current step, then saving and exiting")

    def install(self) -> StopRequest:
        if not self._previous and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def request(self, reason: str) -> None:
        """Ask the loop to stop after the current step (for callers other than signals)."""
        self.reason = self.reason or reason

    @property
    def requested(self) -> bool:
        elapsed = time.monotonic() - self.started
        if self.reason is None and 0 < self.max_time <= elapsed:
            self.reason = f"time limit of {self.max_time:.0f}s reached"
        return self.reason is not None

    def __enter__(self) -> StopRequest:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.restore()


__all__ = ["StopRequest"]
