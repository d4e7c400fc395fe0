"""The ``judge`` reward: prompts, score parsing, batching and caching, the OpenAI-compatible
client against a local fake server, and a tiny local judge model."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from agentrl.errors import UsageError
from agentrl.rewards.judge import JudgeReward, JudgeSettings, parse_scores

from tests.fakes.browser import needs_browser

TASK = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Name a prime."}]


def test_a_single_score_is_read_from_the_last_score_line():
    assert parse_scores("good start\nSCORE: 3\non second thought\n**Score:** 9", None) == [1.0]
    assert parse_scores("SCORE = 4.5", None) == [0.5]


@pytest.mark.parametrize("reply", ["no verdict here", "SCORE: 12", "SCORE: -1", "SCORE: seven", ""])
def test_an_unreadable_reply_gives_no_score(reply):
    assert parse_scores(reply, None) is None


def test_rank_scores_need_every_episode():
    assert parse_scores("SCORE 1: 9\nSCORE 2: 0\nSCORE 3: 3", 3) == [1.0, 0.0, 1 / 3]
    assert parse_scores("SCORE 1: 9\nSCORE 3: 3", 3) is None


def test_parsing_a_huge_reply_is_linear():
    reply = ("SCORE" * 40 + " : " + "9" * 50 + "\n") * 20000 + "x" * 2_000_000
    start = time.perf_counter()
    parse_scores(reply, 4)
    assert time.perf_counter() - start < 2.0


class FakeBackend:
    """Replies from a table keyed by the judged response; counts the chats it got."""

    local = False

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.chats: list[list[dict[str, str]]] = []

    def complete(self, chats, reads):
        self.chats.extend(chats)
        out = []
        for chat in chats:
            text = chat[-1]["content"]
            out.append(next((r for key, r in self.replies.items() if key in text), "no idea"))
        return out


def _episodes(n: int, index: int = 0) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(data_index=index, notes={}, messages=TASK, conversation=[])
        for _ in range(n)
    ]


def test_single_mode_scores_each_episode_and_keeps_the_reasoning():
    backend = FakeBackend({"seven": "7 is prime.\nSCORE: 9", "nine": "9 = 3 x 3.\nSCORE: 0"})
    judge = JudgeReward(JudgeSettings(), backend)
    episodes = _episodes(3)
    values = judge(prompts=[TASK] * 3, completions=["seven", "nine", "hmm"], trajectories=episodes)
    assert values == [1.0, 0.0, None]
    assert episodes[0].notes["judge"]["reasoning"].startswith("7 is prime")
    assert episodes[2].notes["judge"]["score"] is None
    assert judge.stats["unreadable"] == 1
    assert "be brief" not in backend.chats[0][-1]["content"]  # the task leaves system text out


def test_verdicts_are_cached_by_the_judged_text_and_unreadable_ones_asked_again():
    backend = FakeBackend({"seven": "SCORE: 9"})
    judge = JudgeReward(JudgeSettings(), backend)
    judge(prompts=[TASK] * 2, completions=["seven", "hmm"])
    judge(prompts=[TASK] * 3, completions=["seven", "seven", "hmm"])
    assert len(backend.chats) == 3  # seven once; hmm twice (unreadable is not cached)
    assert judge.stats["cached"] == 2


def test_rank_mode_judges_each_group_together():
    backend = FakeBackend({"Response 2:\nb": "a is worse.\nSCORE 1: 2\nSCORE 2: 8"})
    judge = JudgeReward(JudgeSettings(mode="rank"), backend)
    episodes = _episodes(2, index=0) + _episodes(2, index=1)
    values = judge(prompts=[TASK] * 4, completions=["a", "b", "c", "d"], trajectories=episodes)
    assert len(backend.chats) == 2  # one chat per group
    assert values[:2] == [2 / 9, 8 / 9] and values[2:] == [None, None]
    assert episodes[1].notes["judge"]["position"] == 2


def test_settings_are_checked():
    with pytest.raises(UsageError, match="not both"):
        JudgeSettings(model="tiny", url="http://x")
    with pytest.raises(UsageError, match="judge_mode"):
        JudgeSettings(mode="pairs")
    with pytest.raises(UsageError, match=r"judge_model .* or judge_url"):
        JudgeReward()(prompts=[TASK], completions=["x"])
    with pytest.raises(UsageError, match="judge_rubric"):
        JudgeSettings(rubric="@/nonexistent/rubric.txt").rubric_text()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(
            {
                "object": "list",
                "data": [{"id": "fake-judge", "object": "model", "created": 0, "owned_by": "me"}],
            }
        )

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = request["messages"][-1]["content"]
        content = "Looks right.\nSCORE: 6" if "good" in text else "I refuse to score."
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": request["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
            }
        )


@pytest.fixture
def judge_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_an_openai_compatible_judge_scores_and_an_odd_reply_is_none(judge_server):
    pytest.importorskip("openai")
    judge = JudgeReward(JudgeSettings(url=judge_server, batch_size=4))
    values = judge(prompts=[TASK] * 3, completions=["good", "bad", "good too"])
    assert values == [6 / 9, None, 6 / 9]
    assert judge.backend.model == "fake-judge"  # the first model the server lists
    assert judge.stats == {"judged": 3, "cached": 0, "unreadable": 1, "requests": 3}


def test_a_judge_server_that_is_down_gives_none_rewards_not_a_crash():
    pytest.importorskip("openai")
    judge = JudgeReward(JudgeSettings(url="http://127.0.0.1:9/v1", api_model="m"))
    assert judge(prompts=[TASK], completions=["good"]) == [None]
    assert judge.backend.errors and judge.stats["unreadable"] == 1


@pytest.mark.slow
def test_a_tiny_local_judge_always_gives_a_score(tmp_path):
    import torch
    from agentrl.models.tiny import TinySpec, build_tiny_preset, save_preset

    torch.set_num_threads(1)
    spec = TinySpec(
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        corpus_tasks=40,
    )
    save_preset(*build_tiny_preset(spec), tmp_path / "judge")
    for mode in ("single", "rank"):
        judge = JudgeReward(JudgeSettings(model=str(tmp_path / "judge"), max_tokens=4, mode=mode))
        episodes = _episodes(3)
        values = judge(prompts=[TASK] * 3, completions=["2", "3", "x"], trajectories=episodes)
        assert all(v is not None and 0.0 <= v <= 1.0 for v in values), values
        assert episodes[0].notes["judge"]["mode"] == mode


def test_reward_funcs_judge_is_configured_from_the_run_options():
    from agentrl.config import TrainConfig
    from agentrl.envs import task_parts

    config = TrainConfig.from_mapping(
        {"reward_funcs": "judge", "judge_url": "http://judge:8000/v1", "judge_mode": "rank"}
    )
    parts = task_parts(config_reward_funcs=config.reward_funcs, options=config)
    (judge,) = parts.reward_funcs
    assert isinstance(judge, JudgeReward) and judge.__name__ == "judge"
    assert judge.settings.url == "http://judge:8000/v1" and judge.settings.mode == "rank"
    with pytest.raises(ValueError, match="judge_mode"):
        TrainConfig.from_mapping({"judge_mode": "pairs"})
    with pytest.raises(UsageError, match="needs a judge: --judge_model"):
        task_parts(config_reward_funcs="judge", options=TrainConfig.from_mapping({}))


def test_the_dump_keeps_the_judges_note():
    from agentrl.observability.rollout_dump import episode_record
    from agentrl.trajectory import Trajectory

    traj = Trajectory("p", [{"role": "user", "content": "q"}], None, [], "a", "", [1])
    traj.notes["judge"] = {"mode": "single", "score": 0.5, "reasoning": "fine"}
    record = episode_record(
        traj, kind="train", step=1, episode=0, group=0, reward=0.5, terms={}, max_turns=1
    )
    assert record["notes"]["judge"]["reasoning"] == "fine"


@pytest.mark.slow
@needs_browser
def test_agentrl_view_shows_the_judges_reasoning(tmp_path):
    from agentrl.cli import main as cli_main
    from agentrl.observability.metrics_log import MetricsLog
    from agentrl.observability.rollout_dump import dump_path, episode_record, write_records
    from agentrl.trajectory import Trajectory

    from tests.fakes.browser import dom

    run = tmp_path / "judged"
    run.mkdir()
    (run / "config.toml").write_text('[run]\nsave_weight = "judged"\n')
    log = MetricsLog(run / "metrics.jsonl")
    log.write(1, "train", {"reward/mean": 0.5})
    log.close()
    traj = Trajectory("p", TASK, None, [], "7", "", [1])
    traj.notes["judge"] = {"mode": "single", "score": 0.75, "reasoning": "Seven is prime: good."}
    record = episode_record(
        traj,
        kind="train",
        step=1,
        episode=0,
        group=0,
        reward=0.75,
        terms={"reward": 0.75},
        max_turns=1,
    )
    write_records(dump_path(run, "train", 1), [record])
    assert cli_main(["view", str(run)]) == 0
    html = dom(run / "view.html", "tab=episodes&episode=0", tmp_path)
    assert "Notes of the reward functions" in html and "Seven is prime: good." in html
    assert "judge · score 0.750" in html
