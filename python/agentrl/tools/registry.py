"""Tools the policy may call, and the one place where a call is executed.

``@tool`` turns a typed Python function into a :class:`Tool` (function + OpenAI-style
spec). A :class:`ToolRegistry` holds tools and executes parsed tool calls. Executing a call
never raises: it always returns a :class:`~agentrl.trajectory.ToolEvent` (``ok``, ``name``,
``args``, ``result``, ``canonical``) in the shape of the golden events, because the
rollout appends the event's result to the conversation and the reward scores the events;
a tool that crashes, hangs or floods the context must cost the episode a failed call, not
the training run.

User tools run with a timeout and a cap on the size of their JSON result, checked while
the result is encoded. Sync user tools that can be imported again by name run in worker
processes (`agentrl.tools.workers`), so a hung one is killed at its timeout and a crash
(``SystemExit`` included) is an error event; others (closures, bound methods of episode
environments) and ``async def`` tools run in a worker thread, async ones on their own
event loop there. Built-in tools are pure and bounded, so they run inline.
The threads and the count of hung ones are in `agentrl.tools.threads`; the events, call
arguments and tool messages in `agentrl.tools.events`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentrl.errors import RecurringError
from agentrl.tools.events import (
    ToolEvent,
    call_arguments,
    failed_event,
    tool_message,
    why,
)
from agentrl.tools.signature import bind_arguments, check_parameters, function_schema
from agentrl.tools.threads import (
    MAX_HUNG_THREADS,
    HungToolCalls,
    Pending,
    ToolTimeoutError,
    count_hung,
    hung_tool_threads,
)
from agentrl.tools.workers import (
    ResultTooLarge,
    ToolCallTimeout,
    capped_json,
    import_reference,
    shared_workers,
)

Visibility = Literal["listed", "hidden", "inactive"]


class ToolResultTooLargeError(ValueError):
    """A tool's JSON result is longer than its size cap."""


@dataclass
class Tool:
    """A callable tool: the Python function and the spec the model is shown.

    ``timeout`` (seconds) and ``max_result_chars`` of None take the registry's defaults;
    a timeout of 0 means no limit. ``raw_args`` tools receive the argument object as one
    dict (the built-ins read ``expression`` or ``query`` from it);
    others are called with checked keyword arguments. ``inline`` tools run in the caller's
    thread without a timeout. ``Tool`` objects stay callable like the function they wrap.
    """

    name: str
    fn: Callable[..., Any]
    spec: dict[str, Any]
    timeout: float | None = None
    max_result_chars: int | None = None
    raw_args: bool = False
    inline: bool = False
    # Run in a worker process when it can be imported by name (sync tools only); False
    # keeps it in this process, e.g. to share module state with the caller.
    isolate: bool = True
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.fn)
        self.spec["function"]["name"] = self.name
        check_parameters(self.name, self.spec["function"].get("parameters"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = None,
    isolate: bool = True,
) -> Any:
    """Decorator: build a :class:`Tool` from a function's signature, hints and docstring.

    Usable bare (``@tool``) or with options (``@tool(name="lookup", timeout=2)``);
    ``isolate=False`` runs a sync tool in a thread of this process, not a worker process.
    """

    def build(func: Callable[..., Any]) -> Tool:
        tool_name = name or getattr(func, "__name__", type(func).__name__)
        return Tool(
            name=tool_name,
            fn=func,
            spec=function_schema(func, name=tool_name, description=description),
            timeout=timeout,
            max_result_chars=max_result_chars,
            isolate=isolate,
        )

    return build(fn) if fn is not None else build


class ToolRegistry:
    """Named tools, the specs shown to the model, and safe execution of calls.

    ``listed`` tools are advertised by :meth:`specs` and accepted by
    :meth:`supported_names`; ``hidden`` ones are accepted but not advertised (the
    ``python_math`` alias); ``inactive`` ones run only when a prompt's own tool list names them.
    """

    def __init__(
        self, *, timeout: float = 10.0, max_result_chars: int = 8192, isolate: bool = True
    ) -> None:
        self.timeout = float(timeout)
        self.max_result_chars = int(max_result_chars)
        self.isolate = bool(isolate)  # sync user tools in worker processes when importable
        self._tools: dict[str, Tool] = {}
        self._visibility: dict[str, Visibility] = {}
        self._lock = threading.Lock()
        self.stats: dict[str, int] = {
            "calls": 0,
            "failed": 0,
            "timeouts": 0,
            "oversize": 0,
            "in_process": 0,  # calls run in a worker process
            "in_thread": 0,  # user calls run in a thread (async, or not importable by name)
        }

    # ---- registration ----

    def register(
        self,
        fn: Callable[..., Any] | Tool,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
        visibility: Visibility = "listed",
        replace: bool = False,
    ) -> Tool:
        """Add a function (its schema is built from it) or a ready :class:`Tool`."""
        if isinstance(fn, Tool):
            item = fn
            if name is not None and name != fn.name:
                item = Tool(
                    name=name,
                    fn=fn.fn,
                    spec=json.loads(json.dumps(fn.spec)),
                    timeout=fn.timeout,
                    max_result_chars=fn.max_result_chars,
                    raw_args=fn.raw_args,
                    inline=fn.inline,
                    isolate=fn.isolate,
                )
            if timeout is not None:
                item.timeout = timeout
            if max_result_chars is not None:
                item.max_result_chars = max_result_chars
        else:
            item = tool(
                fn,
                name=name,
                description=description,
                timeout=timeout,
                max_result_chars=max_result_chars,
            )
        if item.name in self._tools and not replace:
            raise ValueError(f"tool {item.name!r} is already registered")
        self._tools[item.name] = item
        self._visibility[item.name] = visibility
        return item

    def tool(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """Decorator form of :meth:`register`; returns the :class:`Tool`."""
        if fn is not None:
            return self.register(fn, **options)
        return lambda func: self.register(func, **options)

    def copy(self) -> ToolRegistry:
        """A registry with the same tools and limits, sharing the call counters: an
        episode's own tool set (its environment's tools added) without touching this one."""
        other = ToolRegistry(
            timeout=self.timeout, max_result_chars=self.max_result_chars, isolate=self.isolate
        )
        other._tools = dict(self._tools)
        other._visibility = dict(self._visibility)
        other._lock = self._lock
        other.stats = self.stats
        return other

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._visibility.pop(name, None)

    def set_visibility(self, name: str, visibility: Visibility) -> None:
        if name not in self._tools:
            raise KeyError(name)
        self._visibility[name] = visibility

    # ---- queries ----

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._tools))

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Deep copies of the specs to show the model: the listed tools, or ``names``."""
        chosen = (
            [n for n, v in self._visibility.items() if v == "listed"]
            if names is None
            else [n for n in names if n in self._tools]
        )
        return [json.loads(json.dumps(self._tools[n].spec, ensure_ascii=False)) for n in chosen]

    def supported_names(self) -> set[str]:
        """Names a model may call when a prompt does not list its own tools."""
        return {n for n, v in self._visibility.items() if v in ("listed", "hidden")}

    # ---- execution ----

    def run(self, name: str, args: Mapping[str, Any]) -> Any:
        """Run one tool and return its result; raises on any failure (for direct use)."""
        return self._finish(self._start(name, dict(args)))

    def execute(
        self, call: Mapping[str, Any], valid_names: Collection[str] | None = None
    ) -> ToolEvent:
        """Execute one parsed call; never raises. ``valid_names`` empty or None allows all."""
        return self.execute_many([call], valid_names)[0]

    def execute_many(
        self, calls: Sequence[Mapping[str, Any]], valid_names: Collection[str] | None = None
    ) -> list[ToolEvent]:
        """Execute calls concurrently (each user tool in its own thread); events in order.

        Every call's time limit starts when the batch starts, so one slow tool costs the
        batch at most its own timeout.
        """
        pending: list[tuple[str, dict[str, Any], bool, Any]] = []
        for call in calls:
            raw_name = call.get("name", "") or ""
            name = raw_name if isinstance(raw_name, str) else str(raw_name)
            args = call_arguments(call)
            canonical = bool(call.get("canonical", False))
            handle: Any
            if not name:
                handle = failed_event(name, args, "bad tool call", canonical)
            elif valid_names and name not in valid_names:
                handle = failed_event(name, args, f"tool not allowed: {name}", canonical)
            else:
                try:
                    handle = self._start(name, args)
                except RecurringError:
                    raise  # the run cannot go on (a tool server past its restart limit)
                except Exception as exc:
                    handle = failed_event(name, args, why(exc), canonical)
            pending.append((name, args, canonical, handle))
        events: list[ToolEvent] = []
        for name, args, canonical, handle in pending:
            if isinstance(handle, ToolEvent):
                events.append(handle)
                continue
            try:
                result = self._finish(handle)
            except RecurringError:
                raise
            except Exception as exc:
                events.append(failed_event(name, args, why(exc), canonical))
                continue
            events.append(ToolEvent(True, name, args, result, canonical))
        with self._lock:
            self.stats["calls"] += len(events)
            self.stats["failed"] += sum(1 for e in events if not e.ok)
        return events

    async def aexecute_many(
        self, calls: Sequence[Mapping[str, Any]], valid_names: Collection[str] | None = None
    ) -> list[ToolEvent]:
        """:meth:`execute_many` for callers that live on an event loop."""
        return await asyncio.to_thread(self.execute_many, calls, valid_names)

    def _limits(self, item: Tool) -> tuple[float, int]:
        timeout = self.timeout if item.timeout is None else float(item.timeout)
        cap = self.max_result_chars if item.max_result_chars is None else int(item.max_result_chars)
        return timeout, cap

    def _start(self, name: str, args: dict[str, Any]) -> Any:
        """Begin a call: an inline tool's result, or a :class:`Pending` thread."""
        item = self._tools.get(name)
        if item is None:
            raise ValueError(f"unknown tool: {name}")
        if item.raw_args:
            kwargs: dict[str, Any] | None = None
        else:
            kwargs = bind_arguments(item.fn, item.spec, args)
        if item.inline:
            return ("inline", item, item.fn(args) if kwargs is None else item.fn(**kwargs))
        timeout, _ = self._limits(item)
        if item.is_async:

            async def limited() -> Any:
                coro = item.fn(args) if kwargs is None else item.fn(**kwargs)
                if timeout <= 0:
                    return await coro
                try:
                    return await asyncio.wait_for(coro, timeout)
                except TimeoutError as exc:
                    # wait_for's own timeout is chained to the cancellation it caused; a
                    # TimeoutError raised by the tool itself is an ordinary failure.
                    if isinstance(exc.__cause__, asyncio.CancelledError):
                        raise ToolTimeoutError(f"timed out after {timeout:g}s") from None
                    raise

            def target() -> Any:
                return asyncio.run(limited())

        else:
            reference = import_reference(item.fn) if self.isolate and item.isolate else None
            if reference is not None:
                module, qualname = reference
                _, cap = self._limits(item)
                call_args = args if kwargs is None else kwargs

                def in_process() -> Any:
                    return shared_workers().call(
                        module, qualname, call_args, raw=kwargs is None, cap=cap, timeout=timeout
                    )

                self._count("in_process")
                # The worker enforces the timeout (and is killed past it); the thread
                # waiting for it gets a second more, so it always sees the worker's answer.
                wait = timeout + 1.0 if timeout > 0 else 0.0
                return ("process", item, Pending(in_process, name, wait))

            def target() -> Any:
                return item.fn(args) if kwargs is None else item.fn(**kwargs)

        self._count("in_thread")
        return ("thread", item, Pending(target, name, timeout))

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _finish(self, handle: Any) -> Any:
        kind, item, payload = handle
        if kind == "inline":
            return payload
        try:
            value = payload.wait()
        except (ToolTimeoutError, ToolCallTimeout) as exc:
            with self._lock:
                self.stats["timeouts"] += 1
            if kind == "thread":
                count_hung(payload.thread, item.name)
            raise ToolTimeoutError(str(exc)) from None
        except RuntimeError as exc:
            if str(exc).startswith("ResultTooLarge"):
                with self._lock:
                    self.stats["oversize"] += 1
                raise ToolResultTooLargeError(str(exc).split(": ", 1)[-1]) from None
            raise
        if kind == "process":
            return value  # already plain JSON, its size checked in the worker
        return self._checked_result(item, value)

    def _checked_result(self, item: Tool, value: Any) -> Any:
        """A plain-JSON copy of a user tool's result, refused when over its size cap."""
        _, cap = self._limits(item)
        try:
            text = capped_json(value, cap)
        except ResultTooLarge as exc:
            with self._lock:
                self.stats["oversize"] += 1
            raise ToolResultTooLargeError(str(exc)) from None
        return json.loads(text)


def execute_tool_call(
    registry: ToolRegistry, valid_names: Collection[str] | None, call: Mapping[str, Any]
) -> ToolEvent:
    """One parsed call to one event, never raising."""
    return registry.execute(call, valid_names)


__all__ = [
    "MAX_HUNG_THREADS",
    "HungToolCalls",
    "Tool",
    "ToolEvent",
    "ToolRegistry",
    "ToolResultTooLargeError",
    "ToolTimeoutError",
    "call_arguments",
    "execute_tool_call",
    "hung_tool_threads",
    "tool",
    "tool_message",
]
