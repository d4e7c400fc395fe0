"""The ``python`` tool's sandbox against hostile code: each attack fails inside the sandbox
and leaves no process running and no file written outside it."""

from __future__ import annotations

import ast
import contextlib
import os
import socket
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from agentrl.data.options import DataConfig
from agentrl.envs.python_env import PythonEnvironment
from agentrl.tools.python_sandbox import (
    PythonSandbox,
    PythonToolError,
    SandboxLimits,
    SandboxUnavailable,
    check_sandbox,
    limits_from_options,
    python_tool,
)
from agentrl.tools.registry import ToolRegistry


def _limits(**changes) -> SandboxLimits:
    """The run's default limits (the declared python_* options), with ``changes``."""
    return replace(limits_from_options(DataConfig()), **changes)


def _sandbox_support() -> str | None:
    if sys.platform != "linux":
        return "the sandbox needs Linux"
    try:
        check_sandbox(_limits())
    except SandboxUnavailable as exc:
        return str(exc)
    return None


_MISSING = _sandbox_support()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")

LIMITS = _limits(timeout=2.0, memory_mb=256, max_processes=8, disk_mb=4)


def _processes_of(uid: int | None) -> list[int]:
    """Host pids running as ``uid`` (the sandbox's own uid when agentrl runs as root)."""
    if uid is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        line = next((s for s in status.splitlines() if s.startswith("Uid:")), "")
        if line and int(line.split()[1]) == uid:
            found.append(int(entry.name))
    return found


def _gone(uid: int | None, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _processes_of(uid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def sandbox():
    box = PythonSandbox(LIMITS)
    yield box
    box.close()
    assert _gone(box.uid), f"processes of uid {box.uid} still run: {_processes_of(box.uid)}"


def test_state_is_kept_between_calls_and_output_is_captured(sandbox):
    assert sandbox.run("x = 6\nprint('hello')") == {"stdout": "hello\n"}
    assert sandbox.run("x * 7")["value"] == "42"
    printed = sandbox.run("import os\nos.system('echo from-a-child')")
    assert "from-a-child" in printed["stdout"]
    assert sandbox.run("import os\nos.getcwd()")["value"] == "'/tmp/work'"


def test_an_exception_is_a_failed_call_with_its_error_line(sandbox):
    with pytest.raises(PythonToolError, match=r"^ZeroDivisionError: division by zero"):
        sandbox.run("print('before')\n1/0")
    assert sandbox.run("'still alive'")["value"] == "'still alive'"


def test_output_is_cut_at_the_cap(sandbox):
    out = sandbox.run("print('x' * 100000)")["stdout"]
    assert len(out) < LIMITS.max_output_chars + 100 and "output cut" in out


@pytest.mark.slow
def test_an_infinite_loop_is_killed_at_the_time_limit(sandbox):
    start = time.monotonic()
    with pytest.raises(PythonToolError, match="time limit"):
        sandbox.run("while True:\n    pass")
    assert time.monotonic() - start < LIMITS.timeout + 3
    assert _gone(sandbox.uid)
    with pytest.raises(PythonToolError, match="restarted"):
        sandbox.run("x")  # a fresh interpreter, and the call says so
    assert sandbox.stats["timeouts"] == 1 and sandbox.stats["restarts"] == 1


@pytest.mark.slow
def test_a_busy_cpu_hits_the_cpu_limit_and_the_interpreter_survives():
    with PythonSandbox(_limits(timeout=10.0, cpu_seconds=1.0)) as box:
        box.run("kept = 1")
        with pytest.raises(PythonToolError, match="CPU time limit"):
            box.run("while True:\n    pass")
        assert box.run("kept")["value"] == "1"


@pytest.mark.slow
def test_a_fork_bomb_is_contained_and_killed(sandbox):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    with pytest.raises(PythonToolError, match="time limit"):
        sandbox.run(bomb)
    assert _gone(sandbox.uid)


def test_processes_stop_at_the_cap_and_die_with_the_sandbox(sandbox):
    code = (
        "import os, time\nkids = 0\nfor _ in range(64):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n"
        "        os._exit(0)\n    kids += 1\nkids"
    )
    kids = int(sandbox.run(code)["value"])
    assert 1 <= kids < LIMITS.max_processes
    assert sandbox.run("1")["value"] == "1"  # the sleeping children do not block the next call


def test_the_sandbox_sees_only_its_own_root(sandbox):
    listing = ast.literal_eval(sandbox.run("import os\nsorted(os.listdir('/'))")["value"])
    system = {"bin", "dev", "etc", "lib", "lib32", "lib64", "proc", "sbin", "tmp", "usr"}
    interpreter = {p.split("/")[1] for p in (sys.prefix, sys.base_prefix) if p.count("/") >= 1}
    assert set(listing) <= system | interpreter, listing
    with pytest.raises(PythonToolError, match="PermissionError"):
        sandbox.run("import os\nos.chroot('/tmp')")


def test_a_huge_allocation_is_a_memory_error(sandbox):
    with pytest.raises(PythonToolError, match="MemoryError"):
        sandbox.run("block = bytearray(8 * 1024**3)")
    with pytest.raises(PythonToolError, match="MemoryError"):
        sandbox.run("items = [0] * (4 * 1024**3)")
    assert sandbox.run("1 + 1")["value"] == "2"


def test_writes_outside_the_sandbox_are_refused(sandbox, tmp_path):
    open_dir = tmp_path / "world-writable"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    home = Path.cwd() / "sandbox-escape.txt"
    targets = [open_dir / "escape.txt", home, Path("/tmp/sandbox-escape.txt")]
    for target in targets:
        code = f"open({str(target)!r}, 'w').write('escaped')"
        with contextlib.suppress(PythonToolError):
            sandbox.run(code)
    # /tmp inside is a private tmpfs: a write there lands inside, never on the host.
    for target in targets:
        assert not target.exists(), target
    assert "work" in sandbox.run("import os\nos.listdir('/tmp')")["value"]


def test_filling_the_disk_or_the_output_stops_at_the_caps(sandbox):
    fill = "with open('big', 'wb') as f:\n    for _ in range(64):\n        f.write(b'x' * 2**20)"
    with pytest.raises(PythonToolError, match=r"OSError|File too large|No space"):
        sandbox.run(fill)
    flood = "import sys\nfor _ in range(10**6):\n    sys.stdout.write('y' * 1000)"
    with pytest.raises(PythonToolError, match=r"OSError|File too large"):
        sandbox.run(flood)
    assert sandbox.run("'alive'")["value"] == "'alive'"


def test_the_users_files_cannot_be_read(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    secret.chmod(0o644)
    with pytest.raises(PythonToolError, match=r"FileNotFoundError|PermissionError"):
        sandbox.run(f"open({str(secret)!r}).read()")


def test_socket_connects_fail_and_reach_nothing(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"
        with pytest.raises(PythonToolError, match="Error"):
            sandbox.run(code)
        with pytest.raises(PythonToolError, match="Error"):
            sandbox.run("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)")
    finally:
        thread.join()
        server.close()
    assert accepted == []


def test_the_stateless_tool_runs_each_call_in_a_fresh_sandbox():
    registry = ToolRegistry()
    registry.register(python_tool(LIMITS))
    first = registry.execute({"name": "python", "arguments": {"code": "y = 3\nprint(y)"}})
    assert first["ok"] and first["result"]["stdout"] == "3\n"
    second = registry.execute({"name": "python", "arguments": {"code": "print(y)"}})
    assert not second["ok"] and "NameError" in second["result"]["error"]


def test_an_episode_environment_keeps_one_interpreter_and_closes_it():
    env = PythonEnvironment(LIMITS)
    (tool,) = env.tools
    tool.fn({"code": "total = 40"})
    assert tool.fn({"code": "total + 2"})["value"] == "42"
    uid = env.sandbox.uid
    env.close()
    assert _gone(uid)


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="memory_mb"):
        _limits(memory_mb=1)


@pytest.mark.skipif(os.geteuid() != 0, reason="the fresh uid is given only when run as root")
def test_the_code_runs_as_an_unprivileged_uid(sandbox):
    assert sandbox.run("import os\nos.getuid()")["value"] == str(sandbox.uid)
    assert sandbox.guarantees()["namespaces"] == ["mount", "pid", "network"]


def _sandbox_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"sandbox_boot.py" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_tools_python_gives_each_episode_its_own_interpreter_closed_with_it():
    import json
    from types import SimpleNamespace

    from agentrl.envs import EnvironmentTools, task_parts, task_tools
    from agentrl.rollout.episodes import run_episodes
    from agentrl.tools import builtin_registry

    from tests.fakes.engines import ScriptedEngine

    def call(code: str) -> str:
        args = json.dumps({"name": "python", "arguments": {"code": code}})
        return f"<tool_call>{args}</tool_call>"

    def script(turn: int, context: str) -> str:
        codes = ["n = globals().get('n', 0) + 1", "print(n * 42)"]
        return call(codes[turn]) if turn < 2 else "<answer>42</answer>"

    options = SimpleNamespace(python_timeout=5.0, python_keep_state=True)
    tools = task_tools(builtin_registry(), task_parts(config_tools="python", options=options))
    assert isinstance(tools, EnvironmentTools)
    assert "python" in [s["function"]["name"] for s in tools.specs()]
    sample = {"messages": [{"role": "user", "content": "compute"}], "gt": ["42"]}
    groups = run_episodes(ScriptedEngine(script), [sample], tools, num_generations=2)
    for traj in groups[0].trajectories:
        events = traj.tool_events
        assert [e["ok"] for e in events] == [True, True], events
        assert events[1]["result"]["stdout"] == "42\n"  # n is 1: nothing shared between episodes
    assert _gone_sandboxes()


def _gone_sandboxes(seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _sandbox_processes():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_tools_python_without_state_is_a_plain_tool():
    from types import SimpleNamespace

    from agentrl.envs import task_parts

    parts = task_parts(config_tools="python", options=SimpleNamespace(python_keep_state=False))
    assert parts.environment is None and [t.name for t in parts.tools] == ["python"]


def test_a_system_without_namespaces_is_refused_with_the_way_out(tmp_path, monkeypatch):
    import agentrl.tools.python_sandbox as sandbox_module
    from agentrl.errors import UsageError
    from agentrl.tools.python_sandbox import checked_limits

    boot = tmp_path / "boot.py"
    boot.write_text(
        "import json, os, struct\n"
        "error = 'unshare (network namespace): Operation not permitted'\n"
        "data = json.dumps({'setup_error': error}).encode()\n"
        "os.write(1, struct.pack('<Q', len(data)) + data)\n"
    )
    monkeypatch.setattr(sandbox_module, "_BOOT", boot)
    with pytest.raises(SandboxUnavailable, match="python_allow_network 1"):
        PythonSandbox(LIMITS).run("1")
    with pytest.raises(UsageError, match=r"^--tools python: .*Operation not permitted"):
        checked_limits(DataConfig())


def test_allow_network_opts_out_of_the_network_namespace_only():
    with PythonSandbox(_limits(allow_network=True)) as box:
        applied = box.guarantees()["namespaces"]
        assert "network" not in applied and {"mount", "pid"} <= set(applied)
        assert box.run("import os\nos.getcwd()")["value"] == "'/tmp/work'"
