"""The episode environment of the stateful ``python`` tool: one sandboxed interpreter per
episode (`agentrl.tools.python_sandbox`), closed with the episode (``--python_keep_state 1``,
the default for ``--tools python``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrl.envs.environment import environment_tools
from agentrl.tools.python_sandbox import PythonSandbox, SandboxLimits, sandbox_tool


class PythonEnvironment:
    """An episode environment with its own ``python`` interpreter, closed with the episode.

    ``inner`` is the user's environment factory (or None): its tools, ``reset``,
    ``reward`` and ``close`` are passed through, so ``--environment`` and the stateful
    ``python`` tool go together.
    """

    def __init__(self, limits: SandboxLimits, inner: Callable[[], Any] | None = None) -> None:
        self.sandbox = PythonSandbox(limits)
        self.inner = inner() if inner is not None else None
        if self.inner is not None and callable(getattr(self.inner, "reward", None)):
            self.reward = self.inner.reward
        inner_tools = [] if self.inner is None else environment_tools(self.inner)
        self.tools = [*inner_tools, sandbox_tool(self._run, limits)]

    def _run(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.sandbox.run(args.get("code", ""))

    def reset(self, sample: Any) -> Any:
        reset = getattr(self.inner, "reset", None)
        return reset(sample) if callable(reset) else None

    def close(self) -> None:
        try:
            self.sandbox.close()
        finally:
            close = getattr(self.inner, "close", None)
            if callable(close):
                close()


def python_environment(
    limits: SandboxLimits, inner: Callable[[], Any] | None = None
) -> Callable[[], PythonEnvironment]:
    """A factory of :class:`PythonEnvironment` objects (what ``--environment`` takes)."""

    def factory() -> PythonEnvironment:
        return PythonEnvironment(limits, inner)

    factory.__name__ = "python_environment"
    return factory


__all__ = ["PythonEnvironment", "python_environment"]
