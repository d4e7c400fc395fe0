"""Tools of MCP servers: ``--mcp "command args"`` starts one over stdio and offers its tools.

The official ``mcp`` SDK (``pip install 'agentrl[mcp]'``) runs the client session on an
event loop in a background thread that lives as long as the server; each tool becomes a
:class:`~agentrl.tools.registry.Tool` whose calls are sent to that loop and waited for
with the tool's timeout, so a server that stops answering costs a failed call. A tool
result flagged as an error is an error event; its text (or structured content) is the
result otherwise.
"""

from __future__ import annotations

import asyncio
import atexit
import shlex
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from agentrl.tools.registry import Tool, ToolTimeoutError

# Seconds to wait for a server to start and list its tools.
START_TIMEOUT = 30.0


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

    def __init__(self, command: str, *, timeout: float = 10.0) -> None:
        argv = shlex.split(command)
        if not argv:
            raise MCPError("--mcp: empty server command")
        self.command = command
        self.timeout = float(timeout)
        mcp, stdio_client = _sdk()
        self._params = mcp.StdioServerParameters(command=argv[0], args=argv[1:])
        self._client_session = mcp.ClientSession
        self._stdio_client = stdio_client
        self._loop = asyncio.new_event_loop()
        self._ready: Future[list[Any]] = Future()
        self._stop: asyncio.Event | None = None
        self._session: Any = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="agentrl-mcp", daemon=True
        )
        self._thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            listed = self._ready.result(timeout=START_TIMEOUT)
        except FutureTimeout:
            self.close()
            raise MCPError(f"MCP server {command!r} did not list its tools in time") from None
        except BaseException as exc:
            self.close()
            raise MCPError(f"MCP server {command!r} failed to start: {exc}") from exc
        self.tools = [self._tool(item) for item in listed]
        atexit.register(self.close)

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with self._stdio_client(self._params) as streams:
                read, write = streams[0], streams[1]
                async with self._client_session(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    self._session = session
                    self._ready.set_result(list(listed.tools))
                    await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

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
            future = asyncio.run_coroutine_threadsafe(
                self._session.call_tool(name, arguments), self._loop
            )
            try:
                result = future.result(timeout=self.timeout if self.timeout > 0 else None)
            except FutureTimeout:
                future.cancel()
                raise ToolTimeoutError(f"timed out after {self.timeout:g}s") from None
            return _result_value(result)

        call.__name__ = name
        return call

    def close(self) -> None:
        """End the session and the server process (once; later calls do nothing)."""
        if not self._loop.is_running():
            return
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._main.result(timeout=5)
        except BaseException:  # closing: the server's own errors no longer matter
            self._main.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _result_value(result: Any) -> Any:
    texts = [str(getattr(c, "text", "")) for c in (result.content or []) if hasattr(c, "text")]
    text = "\n".join(texts)
    if getattr(result, "isError", False) or getattr(result, "is_error", False):
        raise RuntimeError(text or "the MCP tool reported an error")
    structured = getattr(result, "structuredContent", None) or getattr(
        result, "structured_content", None
    )
    return structured if structured is not None else text


def mcp_tools(commands: list[str], *, timeout: float = 10.0) -> tuple[list[Tool], list[MCPServer]]:
    """Start every server; (their tools, the servers to close)."""
    servers: list[MCPServer] = []
    try:
        for command in commands:
            servers.append(MCPServer(command, timeout=timeout))
    except BaseException:
        for server in servers:
            server.close()
        raise
    return [t for s in servers for t in s.tools], servers


__all__ = ["MCPError", "MCPServer", "mcp_tools"]
