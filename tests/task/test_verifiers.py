"""verifiers environments (the real verifiers 0.4.0, in its own virtual environment) train in
`agentrl train` as written: their tasks are the prompts, their harness plays each episode
through the run's endpoint, their tool servers' tools reach the policy and their rubric
scores the episodes."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pytest
from agentrl.cli import main as cli_main
from agentrl.config import resolve
from agentrl.data import PromptPool
from agentrl.data.verifiers_env import PYTHON_VARIABLE, bridge_arguments
from agentrl.errors import UsageError, UserError
from agentrl.observability import read_metrics
from transformers import AutoTokenizer

from tests.fakes.repo import REPO
from tests.fakes.runs import example_train_args

VERIFIERS_PYTHON = REPO / ".venv-verifiers" / "bin" / "python"
needs_venv = pytest.mark.skipif(
    not VERIFIERS_PYTHON.is_file(), reason="no .venv-verifiers: make verifiers-venv"
)

# An environment as `vf-init -T` scaffolds one: a tool server, a task with a reward, a taskset.
SUM_TOOLS = '''
import verifiers.v1 as vf


class AddToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"

    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b


if __name__ == "__main__":
    AddToolset.run()
'''

SUM_ENV = """
import verifiers.v1 as vf

from sum_tools import AddToolset


class SumData(vf.TaskData):
    answer: str = ""


class SumTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class SumTask(vf.Task[SumData, vf.State, SumTaskConfig]):
    @classmethod
    def toolsets(cls, config: SumTaskConfig) -> list[vf.Toolset]:
        return [AddToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(self.data.answer in (trace.last_reply or ""))


class SumConfig(vf.TasksetConfig):
    num_tasks: int = 2
    task: SumTaskConfig = SumTaskConfig()


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        tasks = []
        for i in range(self.config.num_tasks):
            data = SumData(prompt=f"Use the add tool: {i}+{i}?", answer=str(2 * i))
            tasks.append(SumTask(data, self.config.task))
        return tasks


__all__ = ["SumTaskset"]
"""

BROKEN_ENV = """
import verifiers.v1 as vf


class BrokenTaskset(vf.Taskset):
    def load(self):
        return [1 / 0]


__all__ = ["BrokenTaskset"]
"""


@pytest.fixture
def env_dir(tmp_path, monkeypatch) -> Path:
    """The environments' modules in the working directory, as a user keeps them."""
    for name, text in (("sum_tools", SUM_TOOLS), ("sum_env", SUM_ENV), ("broken_env", BROKEN_ENV)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PYTHON_VARIABLE, str(VERIFIERS_PYTHON))
    return tmp_path


def test_the_environment_is_the_agent_and_its_tasks_the_prompts() -> None:
    config = resolve(overrides={"environment": "verifiers:sum_env?num_tasks=3"})
    assert config.agent == "verifiers:sum_env?num_tasks=3" and config.environment == ""
    assert config.data_path == config.agent and not config.require_gt
    assert bridge_arguments(config.agent) == ["sum_env", "--env.taskset.num_tasks", "3"]
    with pytest.raises(UsageError, match="plays its own harness: it takes no --agent"):
        resolve(overrides={"environment": "verifiers:sum_env", "agent": "a.b:c"})


def test_a_rollouts_error_is_one_line_at_the_environments_own_line() -> None:
    import sysconfig
    from types import SimpleNamespace

    from agentrl.envs.verifiers_bridge import _error_line

    library = sysconfig.get_paths()["purelib"]
    trace = (
        "Traceback (most recent call last):\n"
        f'  File "{library}/verifiers/v1/task.py", line 240, in score\n'
        '  File "/home/me/my_env.py", line 12, in correct\n'
        f'  File "{library}/verifiers/v1/utils/x.py", line 3, in helper\n'
        "KeyError: 'answer'\n"
    )
    error = SimpleNamespace(type="TaskError", message="scoring failed\nmore", traceback=trace)
    assert _error_line(error) == "TaskError at /home/me/my_env.py:12: scoring failed"
    assert bridge_arguments("verifiers:m?env.agent.runtime.type=docker") == [
        "m",
        "--env.agent.runtime.type",
        "docker",
    ]


def test_without_its_environment_the_line_says_how_to_make_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(PYTHON_VARIABLE, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(UserError) as caught:
        PromptPool("verifiers:sum_env", require_gt=False)
    message = str(caught.value)
    assert message.startswith("--environment verifiers:sum_env needs verifiers in an environment")
    assert "make verifiers-venv" in message and "\n" not in message


@needs_venv
@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "words"),
    [
        (
            "broken_env",
            ["verifiers environment broken_env raised ZeroDivisionError at ", "broken_env.py:7"],
        ),
        ("nowhere_env", ["verifiers environment nowhere_env raised", "nowhere_env"]),
    ],
)
def test_an_environment_that_is_missing_or_raises_is_one_line_naming_it(
    env_dir, module, words
) -> None:
    with pytest.raises(UserError) as caught:
        PromptPool(f"verifiers:{module}", require_gt=False)
    message = str(caught.value)
    assert all(word in message for word in words), message
    assert "\n" not in message


@needs_venv
@pytest.mark.slow
def test_the_examples_tasks_are_the_prompts(monkeypatch) -> None:
    """examples/verifiers_letters.py, a top-level module as verifiers imports one."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PYTHONPATH", "examples")
    monkeypatch.setenv(PYTHON_VARIABLE, str(VERIFIERS_PYTHON))
    pool = PromptPool("verifiers:verifiers_letters?num_tasks=3", require_gt=False)
    assert [s.columns["verifiers_task"] for s in pool] == [0, 1, 2]
    assert all(s.messages[-1]["content"].startswith("How many times") for s in pool)


@needs_venv
@pytest.mark.slow
def test_a_verifiers_environment_trains_from_the_command_line(
    env_dir, run_files, tmp_path, capsys
) -> None:
    args = example_train_args(run_files / "model", tmp_path / "unused", tmp_path / "out")
    del args[args.index("--data") : args.index("--data") + 2]  # the tasks are the prompts
    spec = "verifiers:sum_env?num_tasks=4"
    extra = ["--batch_size", "1", "--eval_ratio", "0", "--dump_rollouts", "1"]
    code = cli_main([*args, "--environment", spec, *extra])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "train prompts: kept 4 of 4" in out and "reward: agent x 1" in out
    assert f"agent {spec}: each episode calls the endpoint" in out
    assert "finished: 2/2 steps" in out
    run = tmp_path / "out" / "run"
    train = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2 and all(r["agent/raised"] == 0 for r in train)
    assert all(0.0 <= r["agent/correct"] <= 1.0 for r in train)  # the rubric's own score
    with gzip.open(run / "rollouts" / "step-000001.jsonl.gz", "rt") as handle:
        record = json.loads(handle.readline())
    assert record["agent"]["values"] == {"correct": record["reward"]}
    # What trained is what the model saw: the task's prompt and the tool server's tool,
    # rendered by the model's chat template at the endpoint.
    ids = [int(i) for i in record["token_view"]["ids"].split(",")][: record["tokens"]["prompt"]]
    prompt = AutoTokenizer.from_pretrained(run_files / "model").decode(ids)
    assert '"name": "calc_add"' in prompt and "Use the add tool:" in prompt
