"""An MCP server that exits: said once with its exit status, started again up to a limit
(counted), then the run stops in one line; failed calls say why; the server's stderr goes
to a log file, not the console; a run with only --mcp logs its tool metrics."""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agentrl.cli import main
from agentrl.errors import EXIT_DATA, RecurringError
from agentrl.observability import read_metrics
from agentrl.tools import ToolRegistry
from agentrl.tools.mcp import MCPServer, ToolServerFailed, mcp_metrics

from tests.fakes.mcp_server import command
from tests.fakes.runs import one_step_train_args


@pytest.fixture
def server_command() -> str:
    return command(mortal=True)


def test_an_exiting_server_is_said_restarted_to_its_limit_then_stops(
    server_command, tmp_path, capfd
):
    said: list[str] = []
    server = MCPServer(
        server_command,
        timeout=30,
        log_dir=tmp_path / "run",
        log=said.append,
        max_restarts=1,
    )
    try:
        registry = ToolRegistry(timeout=60)
        for item in server.tools:
            registry.register(item)
        add = {"name": "add", "arguments": {"a": 2, "b": 40}}
        die = {"name": "add", "arguments": {"die": True}}
        assert registry.execute(add)["result"] == "42"
        failed = registry.execute(die)
        assert not failed["ok"]
        assert failed["result"]["error"] == "the MCP server exited with status 3"
        assert (
            len(said) == 1
            and "exited with status 3; starting it again (restart 1 of 1)" in (said[0])
        )
        assert registry.execute(add)["result"] == "42"  # the restarted server answers
        assert mcp_metrics([server])["tools/mcp/restarts"] >= 1
        with pytest.raises(ToolServerFailed, match=r"exited with status 3 after 1 restart"):
            registry.execute(die)
        assert isinstance(ToolServerFailed("x"), RecurringError)
        with pytest.raises(ToolServerFailed):  # later calls stop too, the reason kept
            registry.execute(add)
        assert len(said) == 1
    finally:
        server.close()
    log = (tmp_path / "run" / "mcp-0.log").read_text()
    assert log.count("server starting") == 2 and "dying as asked" in log
    assert "server starting" not in capfd.readouterr().err  # not on agentrl's console


def test_a_call_to_a_server_failing_otherwise_carries_error_text(tmp_path):
    script = tmp_path / "exits_at_once.py"
    script.write_text("import sys\nprint('cannot start', file=sys.stderr)\nsys.exit(5)\n")
    from agentrl.tools.mcp import MCPError

    before = set(Path(tempfile.gettempdir()).glob("agentrl-mcp-status-*"))
    threads = set(threading.enumerate())
    with pytest.raises(MCPError, match=r"failed to start: exited with status 5 \(its stderr: "):
        MCPServer(f"{sys.executable} {script}", log_dir=tmp_path / "run")
    assert "cannot start" in (tmp_path / "run" / "mcp-0.log").read_text()
    # Nothing is left behind: the server's status file is gone and its thread ended.
    assert set(Path(tempfile.gettempdir()).glob("agentrl-mcp-status-*")) <= before
    assert not [t for t in set(threading.enumerate()) - threads if t.name == "agentrl-mcp"]


@pytest.mark.slow
def test_a_run_with_only_mcp_tools_logs_their_metrics(server_command, run_files, tmp_path):
    argv = one_step_train_args(run_files, tmp_path, "--mcp", server_command)
    assert main(argv) == 0
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert "tools/calls_per_episode" in train[0] and train[0]["tools/mcp/restarts"] == 0
    assert (tmp_path / "run" / "mcp-0.log").read_text().startswith("server starting")
    assert EXIT_DATA == 1


def test_the_restart_limit_is_the_runs_option(server_command, tmp_path):
    from agentrl.assembly.task import build_tools, start_mcp_servers
    from agentrl.config import resolve

    overrides = {"mcp": server_command, "mcp_max_restarts": 0}
    config = resolve(preset="tiny", overrides={**overrides, "save_dir": str(tmp_path)})
    said: list[str] = []
    [server] = start_mcp_servers(config, log=said.append)
    registry = build_tools(config, log=said.append, servers=[server])
    try:
        assert server.max_restarts == 0
        with pytest.raises(ToolServerFailed, match=r"after 0 restart\(s\), its limit"):
            registry.execute({"name": "add", "arguments": {"die": True}})
        assert not said  # stopped at once: never started again
    finally:
        server.close()
