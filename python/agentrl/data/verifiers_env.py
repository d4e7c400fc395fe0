"""A verifiers environment in an interpreter of its own: its tasks as prompts, its rollouts on
request (``--environment verifiers:MODULE[?key=value&...]``).

verifiers 0.4.0 (PyPI ``verifiers``) pins ``mcp==2.0.0`` and ``openai>=2.54,<3``; agentrl's
environment has newer ones (the MCP tests and the ``--agent`` examples use them), so
verifiers lives in a virtual environment of its own (``make verifiers-venv`` makes
``.venv-verifiers``; ``AGENTRL_VERIFIERS_PYTHON`` names another interpreter) and runs
`agentrl/envs/verifiers_bridge.py` there, one process per run, spoken to in JSON lines.

``MODULE`` is what ``vf-eval MODULE`` takes (a top-level module exporting its ``Taskset``
subclass in ``__all__``, found on ``PYTHONPATH`` and in the working directory); each query key is an
option of it: ``num_tasks=4`` is ``--env.taskset.num_tasks 4``, a dotted key
(``env.agent.harness.id=null``) is passed as ``--env.agent.harness.id``.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from agentrl.errors import UsageError, UserError

SCHEME = "verifiers:"
PYTHON_VARIABLE = "AGENTRL_VERIFIERS_PYTHON"
VENV = ".venv-verifiers"
BRIDGE = Path(__file__).resolve().parent.parent / "envs" / "verifiers_bridge.py"
# How long loading the taskset may take (verifiers imports, the taskset's load()).
START_TIMEOUT = 300.0


def is_verifiers(spec: object) -> bool:
    """Whether an ``--environment`` (or ``--data``) value names a verifiers environment."""
    return isinstance(spec, str) and spec.startswith(SCHEME)


def bridge_arguments(spec: str) -> list[str]:
    """``vf-eval``'s arguments for ``verifiers:MODULE?key=value``."""
    parts = urlsplit(spec[len(SCHEME) :])
    module = parts.path.strip()
    if not module:
        raise UsageError(f"--environment {spec!r}: name a verifiers environment, verifiers:MODULE")
    args = [module]
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        flag = key if "." in key else f"env.taskset.{key}"
        args += [f"--{flag}", value]
    return args


def verifiers_python(spec: str) -> str:
    """The interpreter verifiers runs in: ``$AGENTRL_VERIFIERS_PYTHON``, else
    ``.venv-verifiers/bin/python`` in the working directory."""
    chosen = os.environ.get(PYTHON_VARIABLE) or str(Path.cwd() / VENV / "bin" / "python")
    if not Path(chosen).is_file():
        raise UserError(
            f"--environment {spec} needs verifiers in an environment of its own (verifiers "
            f"0.4.0 pins mcp==2.0.0 and openai<3, agentrl's are newer): no {chosen}; make it "
            f"with `make verifiers-venv` or name its python in ${PYTHON_VARIABLE}"
        )
    return chosen


class VerifiersProcess:
    """The bridge process of one verifiers environment: requests out, replies matched by id."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        python = verifiers_python(spec)
        env = dict(os.environ)
        here = os.getcwd()
        # Absolute, so verifiers' own processes (tool servers) find the modules from anywhere.
        paths = [here, *env.get("PYTHONPATH", "").split(os.pathsep)]
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in paths if p)
        self.process = subprocess.Popen(
            [python, str(BRIDGE), *bridge_arguments(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # its log joins agentrl's on the console
            text=True,
            env=env,
            cwd=here,
        )
        self.lock = threading.Lock()
        self.waiting: dict[Any, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.next_id = 0
        first = self._read_line(START_TIMEOUT)
        if "fatal" in first:
            self.process.wait(10)
            module = bridge_arguments(spec)[0]
            raise UserError(f"verifiers environment {module} raised {first['fatal']}")
        self.size = int(first["ready"])
        self.task_list = self._request({"op": "tasks"}, "tasks", START_TIMEOUT)["tasks"]
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_line(self, timeout: float) -> dict[str, Any]:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.process.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            self.close()
            why = "did not answer in time" if not box else "exited"
            raise UserError(
                f"verifiers environment {self.spec[len(SCHEME) :]}: its process {why} "
                "(its log is above)"
            )
        return json.loads(box[0])

    def _request(self, message: dict[str, Any], key: str, timeout: float) -> dict[str, Any]:
        self._send(message)
        reply = self._read_line(timeout)
        if key not in reply:
            raise UserError(f"verifiers environment {self.spec}: unexpected reply {reply!r}")
        return reply

    def _send(self, message: dict[str, Any]) -> None:
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()

    def _read_replies(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            reply = json.loads(line)
            with self.lock:
                waiter = self.waiting.pop(reply.get("id"), None)
            if waiter is not None:
                waiter[1].append(reply)
                waiter[0].set()
        with self.lock:  # the process ended: nobody waits for a reply that cannot come
            for event, _ in self.waiting.values():
                event.set()

    def rollout(
        self, idx: int, base_url: str, api_key: str, model: str, timeout: float | None = None
    ) -> dict[str, Any]:
        """One episode of task ``idx`` against the model endpoint; its reply (a
        ``TimeoutError`` after ``timeout`` seconds, the episode left to finish unheard)."""
        event, box = threading.Event(), []
        with self.lock:
            self.next_id += 1
            number = self.next_id
            self.waiting[number] = (event, box)
        request = {"op": "rollout", "id": number, "idx": idx, "base_url": base_url}
        self._send({**request, "api_key": api_key, "model": model})
        if not event.wait(timeout):
            with self.lock:
                self.waiting.pop(number, None)
            raise TimeoutError(f"verifiers rollout of task {idx} took more than {timeout:g}s")
        if not box:
            raise RuntimeError(f"verifiers environment {self.spec}: its process exited")
        return box[0]

    def close(self) -> None:
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_PROCESSES: dict[str, VerifiersProcess] = {}
_STARTING = threading.Lock()


def verifiers_process(spec: str) -> VerifiersProcess:
    """The run's bridge process of ``spec``: started once, shared by its prompts and its
    episodes, ended when the interpreter exits."""
    with _STARTING:
        process = _PROCESSES.get(spec)
        if process is None or process.process.poll() is not None:
            process = _PROCESSES[spec] = VerifiersProcess(spec)
        return process


@atexit.register
def _close_all() -> None:
    for process in _PROCESSES.values():
        process.close()


def verifiers_records(spec: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(number, prompt record) of each task of the environment, from 1: its prompt (and
    system prompt) as messages and its index as the ``verifiers_task`` column."""
    module = bridge_arguments(spec)[0]
    for task in verifiers_process(spec).task_list:
        prompt = task["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        if task.get("system_prompt"):
            messages = [{"role": "system", "content": task["system_prompt"]}, *messages]
        record = {"messages": messages, "verifiers_task": task["idx"]}
        yield task["idx"] + 1, {**record, "id": f"{module}-{task['idx']}"}


def as_agent_run(values: dict[str, Any]) -> dict[str, Any]:
    """A run's options with ``environment = "verifiers:..."`` read as what it is: the
    environment's harness is the agent (``agent``), its tasks the prompts (``data_path``,
    unless given), and its rubric the reward (no prompt needs a ground truth)."""
    spec = values.get("environment")
    if not is_verifiers(spec):
        return values
    if values.get("agent"):
        raise UsageError(f"--environment {spec} plays its own harness: it takes no --agent")
    # Its rubric scores the episodes: the prompts carry no ground truth of their own.
    out = {**values, "environment": "", "agent": spec, "require_gt": False}
    out["data_path"] = values.get("data_path") or spec
    return out


__all__ = [
    "SCHEME",
    "VerifiersProcess",
    "as_agent_run",
    "bridge_arguments",
    "is_verifiers",
    "verifiers_process",
    "verifiers_records",
]
