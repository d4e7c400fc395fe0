"""The verifiers side of ``--environment verifiers:MODULE``: a program run by verifiers' own
interpreter (its environment, ``.venv-verifiers``), never imported by agentrl.

verifiers 0.4.0 pins ``mcp==2.0.0`` and ``openai<3``, which agentrl's own environment does not
hold (it has newer ones), so the environment runs here, in a process of its own, and talks
to agentrl in JSON lines: each request on stdin, each reply on stdout (one line each).

* ``{"op": "tasks"}`` -> ``{"tasks": [{"idx", "prompt", "system_prompt"}, ...]}``: the
  taskset's tasks, in ``load()`` order;
* ``{"op": "rollout", "id", "idx", "base_url", "api_key", "model"}`` -> ``{"id",
  "rewards": {name: weighted score}, "reward", "error"}``: one episode of task ``idx``
  played by verifiers' own harness (its chat loop, tools and multi-turn protocol) against
  the model endpoint at ``base_url`` (agentrl's), scored by the task's
  rubric (its ``@vf.reward`` functions and judges). Rollouts run concurrently.

It reads the environment as ``vf-eval`` does: ``python verifiers_bridge.py MODULE [--env.*
options]``, with the harness ``null`` (verifiers' plain chat loop with the task's tools)
and the ``subprocess`` runtime unless the options say otherwise. It uses only the
standard library and verifiers.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import sysconfig
import threading
import traceback
from typing import Any

KEY_VARIABLE = "AGENTRL_ENDPOINT_KEY"
DEFAULTS = (("--env.agent.harness.id", "null"), ("--env.agent.runtime.type", "subprocess"))


def _config(argv: list[str]) -> Any:
    from pydantic_config import cli
    from verifiers.v1.cli.resolve import narrow_config, with_positional_taskset
    from verifiers.v1.configs.cli.eval import EvalConfig

    args = with_positional_taskset(list(argv))
    for flag, value in DEFAULTS:
        if flag not in args:
            args += [flag, value]
    sys.argv = [sys.argv[0], *args, "--no-push"]
    return cli(narrow_config(EvalConfig, args))


def _user_line(frames: list[tuple[str, int]]) -> str:
    """`` at file:line`` of the last frame outside installed packages and the standard
    library (the environment's own code), or ''."""
    skip = (*{sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}, __file__)
    mine = [(f, n) for f, n in frames if not f.startswith(skip) and not f.startswith("<")]
    return f" at {mine[-1][0]}:{mine[-1][1]}" if mine else ""


def _error_line(error: Any) -> str:
    """A verifiers ``Error`` on one line, at the environment's line that raised."""
    frames = [
        (f, int(n)) for f, n in re.findall(r'File "([^"]+)", line (\d+)', error.traceback or "")
    ]
    message = (error.message or "").strip().splitlines()
    return f"{error.type}{_user_line(frames)}: {message[0] if message else ''}"


def _exception_line(exc: BaseException) -> str:
    frames = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)]
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}{_user_line(frames)}: {message[0] if message else ''}"


def _prompt(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return [m.model_dump(mode="json", exclude_none=True) for m in value]


class Bridge:
    def __init__(self, argv: list[str], out: Any) -> None:
        from verifiers.v1.utils.loaders import load_environment

        self.out = out
        self.config = _config(argv)
        self.env = load_environment(self.config.env)
        self.tasks = list(self.env.taskset)
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()

    def task_list(self) -> list[dict[str, Any]]:
        return [
            {
                "idx": i,
                "prompt": _prompt(task.data.prompt),
                "system_prompt": task.data.system_prompt,
            }
            for i, task in enumerate(self.tasks)
        ]

    async def rollout(self, request: dict[str, Any]) -> dict[str, Any]:
        from verifiers.v1.clients import ModelContext
        from verifiers.v1.configs.client import EvalClientConfig

        os.environ[KEY_VARIABLE] = request["api_key"]  # the run's key, the same for all
        client = EvalClientConfig(base_url=request["base_url"], api_key_var=KEY_VARIABLE)
        ctx = ModelContext(model=request["model"], client=client, sampling=self.config.sampling)
        episode = await self.env.run_episode(self.tasks[int(request["idx"])], ctx)
        errors = [_error_line(e) for e in episode.errors]
        rewards: dict[str, float] = {}
        for trace in episode.traces:
            errors += [_error_line(e) for e in trace.errors]
            for name, reward in trace.rewards.items():
                if reward is not None:
                    rewards[name] = rewards.get(name, 0.0) + reward.value
        scored = bool(rewards) and not errors
        return {
            "id": request["id"],
            "rewards": rewards,
            "reward": sum(rewards.values()) if scored else None,
            "error": "; ".join(errors)[:2000] or None,
        }

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def read() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=read, daemon=True).start()
        running: set[asyncio.Task[None]] = set()
        async with self.env.serving():
            self.send({"ready": len(self.tasks)})
            while (line := await queue.get()) is not None:
                request = json.loads(line)
                if request.get("op") == "tasks":
                    self.send({"tasks": self.task_list()})
                    continue
                task = asyncio.create_task(self._answer(request))
                running.add(task)
                task.add_done_callback(running.discard)
            for task in list(running):
                task.cancel()

    async def _answer(self, request: dict[str, Any]) -> None:
        try:
            reply = await self.rollout(request)
        except Exception as exc:  # the episode's failure, told to agentrl
            error = _exception_line(exc)
            reply = {"id": request.get("id"), "rewards": {}, "reward": None, "error": error}
        self.send(reply)


def main(argv: list[str]) -> int:
    # The replies keep stdout to themselves: whatever else writes there (verifiers' logs,
    # its harness's processes) goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        bridge = Bridge(argv, out)
    except BaseException as exc:  # a taskset that does not load: one line, then exit 1
        out.write(json.dumps({"fatal": _exception_line(exc)}) + "\n")
        out.flush()
        return 1
    asyncio.run(bridge.serve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
