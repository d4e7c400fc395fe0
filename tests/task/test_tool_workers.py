"""Tools that cannot take the run down: hung, exiting, flooding and slow tools."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from agentrl.tools import ToolRegistry, tool
from agentrl.tools.workers import ResultTooLarge, capped_json, import_reference, shared_workers


def sleep_forever() -> str:
    """Never returns."""
    while True:
        time.sleep(3600)


def leave() -> str:
    """Ends its process."""
    sys.exit(3)


def interrupt() -> str:
    """Raises what Ctrl-C raises."""
    raise KeyboardInterrupt


def flood() -> str:
    """A 100 MB result."""
    return "x" * 100_000_000


def nap(seconds: float) -> float:
    """Sleep a while.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return seconds


def _registry(timeout: float = 1.0) -> ToolRegistry:
    registry = ToolRegistry(timeout=timeout, max_result_chars=4096)
    for fn in (sleep_forever, leave, interrupt, flood, nap):
        registry.register(fn)
    return registry


@pytest.mark.slow
def test_a_tool_sleeping_forever_is_stopped_at_its_timeout_and_its_worker_replaced() -> None:
    registry = _registry(timeout=1.0)
    warm = registry.execute_many([{"name": "nap", "arguments": {"seconds": 0}}] * 2)
    assert all(e["ok"] for e in warm)  # two workers started before the clock runs
    threads = threading.active_count()
    for _ in range(3):
        began = time.perf_counter()
        events = registry.execute_many([{"name": "sleep_forever", "arguments": {}}] * 2)
        took = time.perf_counter() - began
        assert took < 1.0 + 1.0, took  # the timeout plus at most a second
        assert [e["result"] for e in events] == [{"error": "timed out after 1s"}] * 2
        assert shared_workers().busy() == 0  # no worker left running the hung tool
    time.sleep(0.1)
    assert threading.active_count() <= threads  # no thread left behind either
    assert registry.stats["timeouts"] == 6
    assert registry.execute({"name": "nap", "arguments": {"seconds": 0.01}})["result"] == 0.01


def test_system_exit_and_keyboard_interrupt_become_error_events() -> None:
    registry = _registry()
    events = registry.execute_many(
        [{"name": "leave", "arguments": {}}, {"name": "interrupt", "arguments": {}}]
    )
    assert [e["ok"] for e in events] == [False, False]
    assert events[0]["result"] == {"error": "SystemExit: 3"}
    assert events[1]["result"] == {"error": "KeyboardInterrupt"}

    def local_exit() -> str:  # a closure: runs in a thread, not a worker process
        raise SystemExit("bye")

    registry.register(local_exit)
    assert import_reference(local_exit) is None
    event = registry.execute({"name": "local_exit", "arguments": {}})
    assert event["result"] == {"error": "SystemExit: bye"}


def test_a_100_mb_result_is_refused_without_being_encoded() -> None:
    registry = _registry()
    event = registry.execute({"name": "flood", "arguments": {}})
    assert event["result"] == {"error": "result too large: more than 4096 characters"}
    assert registry.stats["oversize"] == 1
    with pytest.raises(ResultTooLarge):
        capped_json([list(range(100))] * 10_000_000, 1000)  # stops after the first chunks
    assert capped_json({"a": [1, "é"]}, 100) == '{"a":[1,"é"]}'


@pytest.mark.slow
def test_calls_of_different_episodes_run_at_once() -> None:
    from agentrl.rollout.episodes import run_episodes

    from tests.fakes.engines import ScriptedEngine, tool_call

    def script(turn: int, context: str) -> str:
        return tool_call("nap", '{"seconds": 0.8}') if turn == 0 else "<answer>ok</answer>"

    registry = _registry(timeout=5.0)
    samples = [
        {"messages": [{"role": "user", "content": f"task {i}"}], "gt": ["x"]} for i in range(2)
    ]
    registry.execute_many([{"name": "nap", "arguments": {"seconds": 0}}] * 4)  # warm workers
    groups = run_episodes(ScriptedEngine(script), samples, registry, num_generations=2)
    events = [e for g in groups for t in g.trajectories for e in t.tool_events]
    assert [e["result"] for e in events] == [0.8] * 4
    took = groups[0].trajectories[0].stats["tool_s"]  # the batch's tool phase, wall time
    # Four 0.8 s calls at once, not one after another (3.2 s); slack for a busy machine.
    assert 0.8 <= took < 3 * 0.8, took


COUNTER = {"calls": 0}


@tool(isolate=False)
def count_here() -> int:
    """Counts its calls in this process's memory."""
    COUNTER["calls"] += 1
    return COUNTER["calls"]


def test_isolate_false_keeps_a_tool_in_this_process() -> None:
    registry = ToolRegistry()
    registry.register(count_here)
    registry.register(nap)
    before = dict(registry.stats)
    assert registry.execute({"name": "count_here", "arguments": {}})["result"] == 1
    assert registry.execute({"name": "nap", "arguments": {"seconds": 0}})["ok"]
    assert COUNTER["calls"] == 1
    assert registry.stats["in_thread"] - before["in_thread"] == 1
    assert registry.stats["in_process"] - before["in_process"] == 1


def chatty() -> str:
    """Prints before answering."""
    print("noise on stdout")
    return "fine"


def vanish() -> str:
    """Ends its process without a word."""
    import os

    os._exit(1)


def test_printing_and_a_dying_worker_do_not_break_the_protocol() -> None:
    registry = _registry()
    registry.register(chatty)
    registry.register(vanish)
    events = registry.execute_many(
        [{"name": "chatty", "arguments": {}}, {"name": "vanish", "arguments": {}}]
    )
    assert events[0]["result"] == "fine"
    assert events[1]["result"] == {"error": "the tool's worker process died (EOFError)"}
    assert registry.execute({"name": "chatty", "arguments": {}})["result"] == "fine"


@pytest.mark.slow
def test_a_training_script_without_a_main_guard_is_not_run_again(tmp_path) -> None:
    import os
    import subprocess

    marker = tmp_path / "runs.txt"
    script = tmp_path / "train_script.py"
    script.write_text(
        "from agentrl.tools import ToolRegistry\n"
        f"from {__name__} import nap\n"
        f"open({str(marker)!r}, 'a').write('ran\\n')\n"
        "registry = ToolRegistry()\n"
        "registry.register(nap)\n"
        "print(registry.execute({'name': 'nap', 'arguments': {'seconds': 0}})['result'])\n"
        "print(registry.stats['in_process'])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # this module's, for `nap`
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["0", "1"]  # ran in a worker process
    assert marker.read_text() == "ran\n"  # the worker did not run the script again


def test_a_slow_worker_start_is_not_counted_in_the_call_timeout(monkeypatch) -> None:
    """A busy machine can take seconds to boot a worker's interpreter: a call's timeout
    measures the tool, so a 0.01 s call with a 1 s timeout still succeeds after a 1.5 s
    boot."""
    from agentrl.tools import workers

    monkeypatch.setattr(workers, "_BOOT", "import time; time.sleep(1.5); " + workers._BOOT)
    pool = workers.ToolWorkers(size=1)
    try:
        began = time.monotonic()
        assert pool.call(__name__, "nap", {"seconds": 0.01}, raw=False, cap=100, timeout=1.0)
        assert time.monotonic() - began >= 1.5  # it did wait for the boot
        with pytest.raises(workers.ToolCallTimeout, match="timed out after 1s"):
            pool.call(__name__, "nap", {"seconds": 5}, raw=False, cap=100, timeout=1.0)
    finally:
        pool.close()
