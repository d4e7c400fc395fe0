"""Tools of MCP servers: ``--mcp "command args"`` starts one over stdio and offers its tools.

The official ``mcp`` SDK (``pip install 'agentrl[mcp]'``) runs the client session on an
event loop in a background thread that lives as long as the server; each tool becomes a
:class:`~agentrl.tools.registry.Tool` whose calls are sent to that loop and waited for
with the tool's timeout, so a server that stops answering costs a failed call. A tool
result flagged as an error is an error event; its text (or structured content) is the
result otherwise, and a failed call always says why.

A server that exits is noticed on the next call that fails: its exit status is said once
on the console, the call fails saying so, and the server is started again, up to
``--mcp_max_restarts`` times in a run (default :data:`MAX_RESTARTS`; ``tools/mcp/restarts``
in the step metrics); one more exit stops the run with one line (:class:`ToolServerFailed`).
Each server's stderr goes to ``<run dir>/mcp-<n>.log`` when the run gives a directory,
never to agentrl's console. The server runs under ``/bin/sh``, which records its exit
status.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import IO, Any

from agentrl.errors import RecurringError
from agentrl.tools.registry import Tool, ToolTimeoutError

# Seconds to wait for a server to start and list its tools.
START_TIMEOUT = 30.0
# Times a run starts an exited server again before it stops.
MAX_RESTARTS = 3
# The server under a shell that writes its exit status to the file named first.
_WRAPPER = '"$@"; echo $? > "$0"'
# The servers running in this process (for the step metrics).


class ToolServerFailed(RecurringError):
    """An MCP server kept exiting: past its restart limit the run stops with this line."""


class MCPError(RuntimeError):
    """The SDK is missing, or a server could not start or list its tools."""


def _sdk() -> Any:
    try:
        import mcp
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise MCPError(
            "--mcp needs the MCP Python SDK: pip install 'agentrl[mcp]' (or pip install mcp)"
        ) from exc
    return mcp, stdio_client


class MCPServer:
    """One stdio MCP server process and its client session, on a background event loop."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float = 10.0,
        log_dir: str | os.PathLike[str] | None = None,
        log: Callable[[str], None] = print,
        max_restarts: int = MAX_RESTARTS,
        index: int = 0,
    ) -> None:
        """``index``: the server's place among the run's (``--mcp "a; b"``), naming its log."""
        argv = shlex.split(command)
        if not argv:
            raise MCPError("--mcp: empty server command")
        self.command = command
        self.timeout = float(timeout)
        self.log = log
        self.max_restarts = int(max_restarts)
        self.restarts = 0
        # Exit statuses of the sessions that ended, for the calls still waiting on them.
        self._ended: dict[Any, int] = {}
        self._failed: str | None = None
        self._lock = threading.Lock()
        self.stderr_path: Path | None = None
        self._stderr: IO[str] = sys.stderr
        if log_dir is not None:
            self.stderr_path = Path(log_dir) / f"mcp-{index}.log"
            self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
            self._stderr = open(self.stderr_path, "a", encoding="utf-8")  # noqa: SIM115
        fd, status = tempfile.mkstemp(prefix="agentrl-mcp-status-")
        os.close(fd)
        self._status = Path(status)
        mcp, stdio_client = _sdk()
        self._params = mcp.StdioServerParameters(
            command="/bin/sh", args=["-c", _WRAPPER, str(self._status), *argv]
        )
        self._client_session = mcp.ClientSession
        self._stdio_client = stdio_client
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._session: Any = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="agentrl-mcp", daemon=True
        )
        self._thread.start()
        try:
            self.tools = [self._tool(item) for item in self._start()]
        except BaseException:
            # A server that failed to start (or listed a tool that cannot be used) leaves
            # nothing behind: no process, no event-loop thread, no status file.
            self.close()
            raise
        atexit.register(self.close)

    def _start(self) -> list[Any]:
        """Start the server and its session; the tools it lists."""
        self._status.write_text("")
        ready: Future[list[Any]] = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            return ready.result(timeout=START_TIMEOUT)
        except FutureTimeout:
            self._end_session()
            raise MCPError(
                f"MCP server {self.command!r} did not list its tools in time{self._see_log()}"
            ) from None
        except BaseException as exc:
            self._end_session()
            status = self.exit_status(wait=1.0)
            why = f"exited with status {status}" if status is not None else str(exc)
            raise MCPError(
                f"MCP server {self.command!r} failed to start: {why}{self._see_log()}"
            ) from exc

    def _see_log(self) -> str:
        return f" (its stderr: {self.stderr_path})" if self.stderr_path is not None else ""

    async def _serve(self, ready: Future[list[Any]]) -> None:
        self._stop = stop = asyncio.Event()
        try:
            async with self._stdio_client(self._params, errlog=self._stderr) as streams:
                read, write = streams[0], streams[1]
                async with self._client_session(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    self._session = session
                    ready.set_result(list(listed.tools))
                    await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    def exit_status(self, wait: float = 0.0) -> int | None:
        """The server's exit status once it has exited (None while it runs)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                text = self._status.read_text().strip()
            except OSError:
                text = ""
            if text:
                return int(text)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def _tool(self, item: Any) -> Tool:
        name = str(item.name)
        # mcp 2 spells the field input_schema, mcp 1 inputSchema.
        schema = getattr(item, "input_schema", None) or getattr(item, "inputSchema", None)
        schema = dict(schema or {"type": "object", "properties": {}})
        spec = {
            "type": "function",
            "function": {
                "name": name,
                "description": str(item.description or ""),
                "parameters": schema,
            },
        }
        return Tool(name=name, fn=self._caller(name), spec=spec, raw_args=True)

    def _caller(self, name: str) -> Callable[[dict[str, Any]], Any]:
        def call(arguments: dict[str, Any]) -> Any:
            if self._failed is not None:
                raise ToolServerFailed(self._failed)
            session = self._session
            future = asyncio.run_coroutine_threadsafe(
                session.call_tool(name, arguments), self._loop
            )
            try:
                result = future.result(timeout=self.timeout if self.timeout > 0 else None)
            except FutureTimeout:
                future.cancel()
                status = self._status_of(session)
                if status is None:
                    raise ToolTimeoutError(f"timed out after {self.timeout:g}s") from None
                self._exited(status, session)
                raise RuntimeError(f"the MCP server exited with status {status}") from None
            except Exception as exc:
                status = self._status_of(session, wait=2.0)
                if status is None:
                    why = str(exc).strip() or type(exc).__name__
                    raise RuntimeError(f"MCP call failed: {why}") from None
                self._exited(status, session)
                raise RuntimeError(f"the MCP server exited with status {status}") from None
            return _result_value(result)

        call.__name__ = name
        return call

    def _status_of(self, session: Any, wait: float = 0.0) -> int | None:
        """The exit status of the server behind ``session`` (None while it runs). A call
        that fails with others sent at the same time may look after one of them has
        started the server again (its status file emptied): it gets the recorded one."""
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                known = self._ended.get(session)
            if known is not None:
                return known
            status = self.exit_status()
            if status is not None or time.monotonic() >= deadline:
                return status
            time.sleep(0.05)

    def _exited(self, status: int, session: Any) -> None:
        """Say that the server exited, once, and start it again or stop the run."""
        with self._lock:
            if self._failed is not None:
                raise ToolServerFailed(self._failed)
            if session is not self._session:
                return  # another call saw it first and restarted it
            self._ended = {**dict(list(self._ended.items())[-7:]), session: status}
            self._end_session()
            if self.restarts >= self.max_restarts:
                self._failed = (
                    f"MCP server {self.command!r} exited with status {status} after "
                    f"{self.restarts} restart(s), its limit: stopping{self._see_log()}"
                )
                raise ToolServerFailed(self._failed)
            self.restarts += 1
            self.log(
                f"MCP server {self.command!r} exited with status {status}; starting it again "
                f"(restart {self.restarts} of {self.max_restarts}){self._see_log()}"
            )
            try:
                self._start()
            except MCPError as exc:
                self._failed = str(exc)
                raise ToolServerFailed(self._failed) from None

    def _end_session(self) -> None:
        """Stop the current session (and the server process, if it still runs)."""
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._main.result(timeout=5)
        except BaseException:  # ending: the server's own errors no longer matter
            self._main.cancel()
        self._session = None

    def close(self) -> None:
        """End the session and the server process (once; later calls do nothing)."""
        if not self._loop.is_running():
            return
        self._end_session()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if self._stderr is not sys.stderr:
            self._stderr.close()
        self._status.unlink(missing_ok=True)


def mcp_metrics(servers: Sequence[MCPServer]) -> dict[str, float]:
    """``tools/mcp/restarts``: restarts of a run's servers (no server: no key)."""
    if not servers:
        return {}
    return {"tools/mcp/restarts": float(sum(server.restarts for server in servers))}


def _result_value(result: Any) -> Any:
    texts = [str(getattr(c, "text", "")) for c in (result.content or []) if hasattr(c, "text")]
    text = "\n".join(texts)
    if getattr(result, "isError", False) or getattr(result, "is_error", False):
        raise RuntimeError(text or "the MCP tool reported an error")
    structured = getattr(result, "structuredContent", None) or getattr(
        result, "structured_content", None
    )
    return structured if structured is not None else text


def mcp_tools(
    commands: list[str],
    *,
    timeout: float = 10.0,
    log_dir: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] = print,
    max_restarts: int = MAX_RESTARTS,
) -> tuple[list[Tool], list[MCPServer]]:
    """Start every server; (their tools, the servers to close). ``log_dir``: where their
    stderr goes (None: this process's stderr); ``log`` hears of servers that exit;
    ``max_restarts``: how often each is started again (``--mcp_max_restarts``)."""
    servers: list[MCPServer] = []
    try:
        for index, command in enumerate(commands):
            server = MCPServer(
                command,
                timeout=timeout,
                log_dir=log_dir,
                log=log,
                max_restarts=max_restarts,
                index=index,
            )
            servers.append(server)
    except BaseException:
        for server in servers:
            server.close()
        raise
    return [t for s in servers for t in s.tools], servers


__all__ = ["MAX_RESTARTS", "MCPError", "MCPServer", "ToolServerFailed", "mcp_metrics", "mcp_tools"]
