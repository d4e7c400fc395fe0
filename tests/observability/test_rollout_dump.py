"""Rollout dumps: the record schema, the files a run writes, and `agentrl eval --output`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from agentrl.cli import main as cli_main
from agentrl.config import resolve
from agentrl.observability.rollout_dump import (
    FINISH_REASONS,
    SCHEMA_VERSION,
    RolloutDumper,
    dump_files,
    episode_record,
    episode_records,
    read_records,
    write_records,
)
from agentrl.trainer import Trainer
from agentrl.trajectory import Trajectory

from tests.fakes.runs import eval_args

# Every key of a record, with its JSON type(s).
SCHEMA: dict[str, tuple[type, ...]] = {
    "schema": (int,),
    "kind": (str,),
    "step": (int,),
    "episode": (int,),
    "group": (int,),
    "prompt_index": (int,),
    "messages": (list,),
    "tool_calls": (list,),
    "tokens": (dict,),
    "reward": (float, int),
    "reward_terms": (dict,),
    "advantage": (float, int, type(None)),
    "policy_version": (int,),
    "trainer_version": (int, type(None)),
    "staleness": (int, type(None)),
    "finish_reason": (str,),
    "turns": (int,),
    "seconds": (float, int),
    "gt": (list,),
}
TOOL_CALL_KEYS = {"turn", "name", "arguments", "ok", "seconds"}


# Keys a record may have: the token view (train and eval), its vocabulary (a dump's first
# record), the trainer/behaviour gaps (train), per-turn rewards and advantages.
OPTIONAL: dict[str, tuple[type, ...]] = {
    "token_view": (dict,),
    "vocab": (dict,),
    "logp_gap_max": (float, int, type(None)),
    "logp_gap_mean": (float, int, type(None)),
    "turn_rewards": (list,),
    "turn_advantages": (list,),
}


def check_schema(record: dict) -> None:
    """Every schema key present with its type, and nothing else (eval: plus ``passed``)."""
    extra = {"passed"} if record["kind"] == "eval" else set()
    assert set(record) - set(OPTIONAL) == set(SCHEMA) | extra
    for key in set(record) & set(OPTIONAL):
        assert isinstance(record[key], OPTIONAL[key]), (key, record[key])
    for key, types in SCHEMA.items():
        assert isinstance(record[key], types), (key, record[key])
    assert record["schema"] == SCHEMA_VERSION
    assert record["finish_reason"] in FINISH_REASONS
    assert set(record["tokens"]) == {"prompt", "generated", "observation"}
    for call in record["tool_calls"]:
        assert set(call) >= TOOL_CALL_KEYS and (("result" in call) != ("error" in call))
    roles = [m["role"] for m in record["messages"]]
    assert roles.count("assistant") == record["turns"]
    assert roles.count("tool") == len(record["tool_calls"])


def _trajectory(**changes) -> Trajectory:
    values = dict(
        prompt="<prompt>",
        messages=[{"role": "user", "content": "What is 2+3, then 4*5?"}],
        tools=None,
        gt=["5", "20"],
        completion="",
        context="",
        prompt_ids=[1, 2, 3, 4],
        response_ids=[10, 11, 12, 13, 14, 15],
        response_mask=[1, 1, 0, 0, 1, 1],
        response_logps=[-0.1, -0.2, 0.0, 0.0, -0.3, -0.4],
        response_versions=[2, 2, -1, -1, 2, 2],
        turn_outputs=['<tool_call>{"name": "calc"}</tool_call>', "<answer>5, 21</answer>"],
        tool_events=[
            {
                "ok": True,
                "name": "calc",
                "args": {"expression": "2+3"},
                "result": {"result": "5"},
                "canonical": True,
            },
            {
                "ok": False,
                "name": "calc",
                "args": {"expression": "4*"},
                "result": {"error": "bad expression"},
                "canonical": True,
            },
        ],
        tool_turns=[0, 0],
        tool_seconds=[0.004, 0.004],
        policy_version=2,
        data_index=17,
        rollout_time=0.25,
    )
    values.update(changes)
    return Trajectory(**values)


def test_an_episode_record_holds_the_conversation_calls_tokens_and_reward_terms() -> None:
    record = episode_record(
        _trajectory(),
        kind="train",
        step=10,
        episode=3,
        group=1,
        reward=4.5,
        terms={"exact_match": 0.0, "answer_cov": 0.5, "odd": float("nan")},
        max_turns=3,
        advantage=-0.75,
        trainer_version=4,
    )
    check_schema(record)
    assert record["staleness"] == 2 and record["policy_version"] == 2
    assert record["tokens"] == {"prompt": 4, "generated": 4, "observation": 2}
    assert record["reward_terms"] == {"exact_match": 0.0, "answer_cov": 0.5, "odd": None}
    assert record["finish_reason"] == "answered" and record["advantage"] == -0.75
    assert [m["role"] for m in record["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    ok, failed = record["tool_calls"]
    assert ok == {
        "turn": 0,
        "name": "calc",
        "arguments": {"expression": "2+3"},
        "ok": True,
        "seconds": 0.004,
        "result": {"result": "5"},
    }
    assert failed["error"] == "bad expression" and "result" not in failed
    assert record["messages"][3] == {
        "role": "tool",
        "name": "calc",
        "ok": False,
        "content": '{"error":"bad expression"}',
    }
    json.dumps(record, allow_nan=False)  # valid JSON: no NaN left


def test_finish_reason_tells_the_turn_limit_from_the_token_budget() -> None:
    cut = _trajectory(unfinished=True)
    assert (
        episode_record(
            cut, kind="eval", step=0, episode=0, group=0, reward=0.0, terms={}, max_turns=2
        )["finish_reason"]
        == "turn_limit"
    )
    assert (
        episode_record(
            cut, kind="eval", step=0, episode=0, group=0, reward=0.0, terms={}, max_turns=5
        )["finish_reason"]
        == "token_limit"
    )


def test_eval_records_say_pass_or_fail_and_lengths_must_agree() -> None:
    trajs = [_trajectory(), _trajectory()]
    records = episode_records(
        trajs,
        kind="eval",
        step=5,
        groups=[0, 1],
        rewards=[1.0, 0.0],
        details=[{"exact_match": 1.0}, {"exact_match": 0.0}],
        max_turns=3,
    )
    assert [r["passed"] for r in records] == [True, False]
    assert [r["episode"] for r in records] == [0, 1]
    with pytest.raises(ValueError, match="1 rewards for 2 episodes"):
        episode_records(
            trajs, kind="eval", step=5, groups=[0, 1], rewards=[1.0], details=[{}, {}], max_turns=3
        )


def test_dump_files_round_trip_gzip_and_plain(tmp_path: Path) -> None:
    records = [{"a": 1, "b": float("inf")}, {"c": "é"}]
    gz = write_records(tmp_path / "d.jsonl.gz", records)
    assert gzip.decompress(gz.read_bytes()).decode().count("\n") == 2
    assert read_records(gz) == [{"a": 1, "b": None}, {"c": "é"}]
    plain = write_records(tmp_path / "d.jsonl", records)
    assert read_records(plain)[1] == {"c": "é"}
    plain.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"d\.jsonl:2: not JSON"):
        read_records(plain)


def test_a_resumed_run_drops_the_dumps_after_its_step(tmp_path: Path) -> None:
    dumper = RolloutDumper(tmp_path, interval=5, max_turns=2)
    for kind, step in (("train", 5), ("train", 10), ("eval", 5), ("eval", 10), ("train", 15)):
        dumper.write(kind, step, [{"step": step}])
    assert [p.name for p in dumper.drop_after(5)] == [
        "step-000010.jsonl.gz",
        "step-000015.jsonl.gz",
        "eval-000010.jsonl.gz",
    ]
    assert [p.name for p in dump_files(tmp_path)] == [
        "step-000005.jsonl.gz",
        "eval-000005.jsonl.gz",
    ]
    assert dumper.due(10) and not dumper.due(7)
    assert not RolloutDumper(tmp_path, interval=0, max_turns=2).due(10)


@pytest.fixture(scope="module")
def assets(run_files: Path) -> tuple[Path, Path]:
    return run_files / "model", run_files / "prompts.jsonl"


def test_a_run_dumps_every_nth_step_and_each_evaluation(assets, tmp_path: Path) -> None:
    model, prompts = assets
    config = resolve(
        preset="tiny",
        overrides=dict(
            model=str(model),
            data_path=str(prompts),
            filter_mode="all",
            save_dir=str(tmp_path),
            run_name="run",
            total_steps=4,
            batch_size=2,
            num_generations=3,
            max_turns=2,
            max_gen_len=10,
            max_context_len=384,
            max_total_len=448,
            async_workers=0,
            eval_before_train=0,
            eval_interval=4,
            eval_ratio=0.2,
            eval_samples=2,
            eval_max_gen_len=8,
            progress=0,
            report=0,
            save_interval=0,
            accumulation_steps=1,
            bc_coef=0.0,
            dump_rollouts=2,
            seed=7,
        ),
    )
    Trainer(config).run()
    run_dir = tmp_path / "run"
    names = [p.name for p in dump_files(run_dir)]
    assert names == ["step-000002.jsonl.gz", "step-000004.jsonl.gz", "eval-000004.jsonl.gz"]
    train = read_records(run_dir / "rollouts" / "step-000002.jsonl.gz")
    assert len(train) == 2 * 3
    for record in train:
        check_schema(record)
        assert record["kind"] == "train" and record["step"] == 2
        assert record["advantage"] is not None and record["staleness"] >= 0
        assert "exact_match" in record["reward_terms"]
        assert record["reward"] == pytest.approx(record["reward_terms"]["reward"])
    assert sorted(r["group"] for r in train) == [0, 0, 0, 1, 1, 1]
    evals = read_records(run_dir / "rollouts" / "eval-000004.jsonl.gz")
    assert len(evals) == 2 and all(r["kind"] == "eval" and "passed" in r for r in evals)
    assert cli_main(["view", str(run_dir)]) == 0  # the run directory as training left it
    assert (run_dir / "view.html").stat().st_size > 10_000


def test_eval_output_writes_one_record_per_sample(assets, tmp_path: Path, capsys) -> None:
    model, prompts = assets
    out = tmp_path / "eval.jsonl.gz"
    code = cli_main(
        [
            *eval_args(model, prompts, samples=3, max_gen_len=8),
            "--output",
            str(out),
            "--metrics_output",
            str(tmp_path / "m.json"),
        ]
    )
    assert code == 0, capsys.readouterr()
    records = read_records(out)
    assert len(records) == 3
    for record in records:
        check_schema(record)
        assert record["kind"] == "eval" and record["advantage"] is None
    assert json.loads((tmp_path / "m.json").read_text())["eval/tasks"] == 3.0
