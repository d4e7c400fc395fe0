"""Remote rollout engines against a loopback server that speaks SGLang's native HTTP API.

The real SGLang server needs a GPU; `FakeSGLang` (tests/fakes/rollout_server_fakes.py) implements
the documented request and response formats (``/generate`` with ``input_ids`` + per-row
``sampling_params`` + ``return_logprob`` answering ``meta_info.output_token_logprobs``;
``/update_weights_from_disk``; ``/flush_cache``; ``/health``) and can be told to fail, stall
or answer garbage. Weight sync over a process group is in test_rollout_servers.py. The
in-process vLLM engine is checked against a stand-in ``vllm`` module with the same call
surface.
"""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from agentrl.rollout.engine import FINISH_EOS, FINISH_LENGTH, FINISH_STOP
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.remote import RemoteEngineError, RetryPolicy, create_rollout_engine
from agentrl.rollout.remote.http import JsonHttpClient
from agentrl.rollout.remote.sglang import SGLangEngine
from agentrl.rollout.remote.weights import (
    LATEST_FILE,
    WEIGHTS_FILE,
    latest_published,
    published_versions,
)
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.rollout_server_fakes import EOS, FakeSGLang


class FakeTokenizer:
    eos_token_id = EOS
    pad_token_id = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(f"t{i}" for i in ids if not (skip_special_tokens and i in (0, EOS)))


FAST = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02)


@pytest.fixture
def server():
    fake = FakeSGLang()
    yield fake
    fake.close()


def _engine(server: FakeSGLang, tmp_path: Path, **kwargs: Any) -> SGLangEngine:
    options: dict[str, Any] = {
        "shared_dir": tmp_path / "shared",
        "retry": FAST,
        "timeout_s": 5.0,
        "weight_sync": "disk",
    }
    options.update(kwargs)
    return SGLangEngine(server.url, FakeTokenizer(), **options)


def test_generate_sends_token_ids_per_row_params_and_asks_for_logprobs(server, tmp_path):
    engine = _engine(server, tmp_path)
    params = SamplingParams(temperature=0.7, top_k=0, top_p=0.9, max_new_tokens=4, stop=("X",))
    outs = engine.generate([[5, 6], [7]], params, num_samples=2, max_new_tokens=[3, 3, 2, 0])
    (_path, body), *_ = [r for r in server.requests if r[0] == "/generate"]
    assert body["input_ids"] == [[5, 6], [5, 6], [7]]  # the zero-budget row is not sent
    assert body["return_logprob"] is True
    sp = body["sampling_params"]
    assert [p["max_new_tokens"] for p in sp] == [3, 3, 2]
    assert sp[0]["temperature"] == 0.7 and sp[0]["top_p"] == 0.9
    assert sp[0]["top_k"] == -1  # SGLang spells "no top-k" as -1
    assert sp[0]["stop"] == ["X"] and set(sp[0]["stop_token_ids"]) == {0, EOS}
    assert len(outs) == 4  # prompt-major, one per row
    first = outs[0]
    assert first.token_ids == [3 + (11 + k) % 47 for k in range(3)]
    assert first.logps == pytest.approx([-0.1, -0.2, -0.3])
    assert first.finish_reason == FINISH_LENGTH and first.prompt_tokens == 2
    assert first.text == " ".join(f"t{i}" for i in first.token_ids)
    assert outs[3].token_ids == [] and outs[3].finish_reason == FINISH_LENGTH


def test_greedy_is_temperature_zero(server, tmp_path):
    engine = _engine(server, tmp_path)
    engine.generate([[1]], SamplingParams(greedy=True, top_k=5, max_new_tokens=2))
    sp = server.requests[-1][1]["sampling_params"][0]
    assert sp["temperature"] == 0.0 and sp["top_k"] == 5


def test_end_token_leaves_the_response_like_the_torch_engine(server, tmp_path):
    server.eos_after = 2
    engine = _engine(server, tmp_path)
    (out,) = engine.generate([[4]], SamplingParams(max_new_tokens=6))
    assert len(out.token_ids) == 2 and EOS not in out.token_ids
    assert out.end_token_id == EOS and out.end_logp == pytest.approx(-0.3)
    assert out.finish_reason == FINISH_EOS and out.logps == pytest.approx([-0.1, -0.2])


def test_stop_string_keeps_its_tokens(server, tmp_path):
    server.stop_string_after = 3
    engine = _engine(server, tmp_path)
    (out,) = engine.generate([[4]], SamplingParams(max_new_tokens=6, stop=("</tool_call>",)))
    assert len(out.token_ids) == 3 and out.end_token_id is None
    assert out.finish_reason == FINISH_STOP


def test_episodes_over_the_server_keep_the_alignment_invariants(server, tmp_path):
    from agentrl.rollout.episodes import EpisodeConfig, run_episodes
    from agentrl.tools import builtin_registry

    from tests.fakes.models import tiny_tokenizer

    tok = tiny_tokenizer()
    server.eos_after = 5
    engine = SGLangEngine(server.url, tok, retry=FAST, version=3)
    sample = {"messages": [{"role": "user", "content": "2+3?"}], "gt": ["5"]}
    config = EpisodeConfig(max_turns=2, max_new_tokens=8, max_context_len=256)
    (group,) = run_episodes(engine, [sample], builtin_registry(), num_generations=2, config=config)
    assert len(group.trajectories) == 2 and group.policy_version == 3
    for traj in group.trajectories:
        traj.check_alignment()
        generated = [
            v for v, m in zip(traj.response_versions, traj.response_mask, strict=True) if m == 1
        ]
        assert generated and set(generated) == {3}


def test_transient_failures_are_retried_with_backoff(server, tmp_path):
    server.fail_next["/generate"] = 2
    sleeps: list[float] = []
    client = JsonHttpClient(server.url, timeout_s=5.0, retry=FAST, sleep=sleeps.append)
    engine = SGLangEngine(server.url, FakeTokenizer(), client=client)
    (out,) = engine.generate([[1, 2]], SamplingParams(max_new_tokens=2))
    assert len(out.token_ids) == 2
    assert server.paths().count("/generate") == 3 and client.retries_done == 2
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0]  # exponential backoff


def test_a_server_that_keeps_failing_gives_a_clear_error(server, tmp_path):
    server.fail_next["/generate"] = 100
    engine = _engine(server, tmp_path)
    with pytest.raises(RemoteEngineError, match=r"/generate failed after 3 attempt\(s\): HTTP 503"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    assert server.paths().count("/generate") == 3


def test_a_stalled_server_times_out_in_bounded_time(server, tmp_path):
    server.delay_s = 1.5
    engine = _engine(server, tmp_path, timeout_s=0.2, retry=RetryPolicy(attempts=2, backoff_s=0.01))
    began = time.monotonic()
    with pytest.raises(RemoteEngineError, match="no answer within"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    assert time.monotonic() - began < 1.2


def test_no_server_at_all_is_reported_not_hung(tmp_path):
    fake = FakeSGLang()
    url = fake.url
    fake.close()  # the port is now closed: connection refused
    engine = SGLangEngine(url, FakeTokenizer(), retry=FAST, timeout_s=2.0)
    assert engine.health() is False
    with pytest.raises(RemoteEngineError, match="attempt"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))


def test_a_rejected_request_is_not_retried(server, tmp_path):
    engine = _engine(server, tmp_path)
    with pytest.raises(RemoteEngineError, match=r"HTTP 400.*input_ids and sampling_params"):
        engine.client.post_json("/generate", {"text": "hi"})
    assert server.paths().count("/generate") == 1


def test_malformed_and_aborted_answers_raise(server, tmp_path):
    engine = _engine(server, tmp_path)
    server.garbage = True
    with pytest.raises(RemoteEngineError, match="output_token_logprobs"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    server.garbage, server.abort = False, True
    with pytest.raises(RemoteEngineError, match="aborted"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))


def test_wait_until_healthy_polls_a_loading_server(server, tmp_path):
    server.unhealthy_polls = 2
    engine = _engine(server, tmp_path)
    engine.wait_until_healthy(timeout_s=5.0, poll_s=0.01)
    assert server.paths().count("GET /health") == 3
    server.unhealthy_polls = 10**6
    with pytest.raises(RemoteEngineError, match="not healthy"):
        engine.wait_until_healthy(timeout_s=0.05, poll_s=0.01)


def _weights(scale: float = 1.0) -> dict[str, torch.Tensor]:
    return {"embed.weight": torch.full((4, 3), scale), "head.weight": torch.arange(6.0).view(2, 3)}


def test_weight_sync_publishes_atomically_then_loads_and_flushes(server, tmp_path):
    shared = tmp_path / "shared"
    engine = _engine(server, tmp_path, keep_published=2)
    for v in (1, 2, 3):
        assert engine.update_weights(_weights(float(v)), version=v)
    assert engine.version == 3 and server.weight_version == "3"
    loads = [b for p, b in server.requests if p == "/update_weights_from_disk"]
    assert [Path(b["model_path"]).name for b in loads] == ["v00000001", "v00000002", "v00000003"]
    # Each load is followed by a cache flush.
    order = [p for p in server.paths() if p in ("/update_weights_from_disk", "/flush_cache")]
    assert order == ["/update_weights_from_disk", "/flush_cache"] * 3
    assert [v for v, _ in published_versions(shared)] == [2, 3]  # older ones pruned
    assert latest_published(shared) == shared / "v00000003"
    assert json.loads((shared / LATEST_FILE).read_text())["version"] == 3
    assert not list(shared.glob(".tmp-*"))
    assert torch.equal(engine.model.state_dict()["embed.weight"], torch.full((4, 3), 3.0))


def test_weights_of_a_model_are_published_with_its_config(server, tmp_path):
    from tests.fakes.models import tiny_model

    engine = _engine(server, tmp_path)
    model = tiny_model()
    assert engine.update_weights(model)
    path = latest_published(tmp_path / "shared")
    assert (path / "config.json").is_file()
    from safetensors.torch import load_file

    saved = load_file(str(path / WEIGHTS_FILE))
    own = model.state_dict()
    assert set(saved) == set(own)
    assert all(torch.equal(saved[k], own[k]) for k in own)


def test_nonfinite_weights_are_refused_before_reaching_the_server(server, tmp_path):
    engine = _engine(server, tmp_path)
    bad = _weights()
    bad["head.weight"][0, 0] = float("nan")
    assert engine.update_weights(bad, version=1) is False
    assert engine.version == 0 and "/update_weights_from_disk" not in server.paths()
    assert engine.stats["weight_updates_skipped"] == 1


def test_a_server_that_cannot_load_the_weights_fails_loudly(server, tmp_path):
    server.load_ok = False
    engine = _engine(server, tmp_path)
    with pytest.raises(RemoteEngineError, match=r"HTTP 400.*Failed to load"):
        engine.update_weights(_weights(), version=1)
    assert engine.version == 0


def test_factory_builds_the_selected_engine(server, tmp_path):
    engine = create_rollout_engine(
        "sglang",
        RolloutConfig(
            sglang_base_url=server.url, sglang_shared_path=str(tmp_path), sglang_wait_sec=2.0
        ),
        tokenizer=FakeTokenizer(),
        version=4,
    )
    assert isinstance(engine, SGLangEngine) and engine.version == 4
    assert engine.weight_sync == "nccl" and engine.shared_dir is None  # disk only when chosen
    on_disk = create_rollout_engine(
        "sglang",
        RolloutConfig(
            sglang_base_url=server.url, sglang_shared_path=str(tmp_path), weight_sync="disk"
        ),
        tokenizer=FakeTokenizer(),
    )
    assert on_disk.weight_sync == "disk" and str(on_disk.shared_dir) == str(tmp_path)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        create_rollout_engine("tgi", tokenizer=FakeTokenizer())


# ---------------------------------------------------------------- vLLM (stand-in module)


class _Logprob:
    def __init__(self, logprob: float) -> None:
        self.logprob = logprob


def _fake_vllm(monkeypatch) -> types.SimpleNamespace:
    record = types.SimpleNamespace(
        llm_kwargs=None, prompts=None, params=None, loaded=None, resets=0
    )

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            if kwargs.get("top_k") == 0:
                raise ValueError("top_k must be -1 (disable), or at least 1")  # an older vLLM
            self.kwargs = kwargs

    class Model:
        def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
            record.loaded = dict(weights)

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            record.llm_kwargs = kwargs
            runner = types.SimpleNamespace(model=Model())
            worker = types.SimpleNamespace(model_runner=runner)
            executor = types.SimpleNamespace(driver_worker=worker)
            self.llm_engine = types.SimpleNamespace(model_executor=executor)

        def generate(self, prompts, sampling_params, use_tqdm=True):
            record.prompts, record.params = prompts, sampling_params
            outs = []
            for prompt, sp in zip(prompts, sampling_params, strict=True):
                n = sp.kwargs["max_tokens"]
                ids = [5 + len(prompt["prompt_token_ids"]) + k for k in range(n - 1)] + [EOS]
                logprobs = [{t: _Logprob(-0.5 * (k + 1))} for k, t in enumerate(ids)]
                done = types.SimpleNamespace(
                    token_ids=ids, logprobs=logprobs, finish_reason="stop", stop_reason=None
                )
                outs.append(types.SimpleNamespace(outputs=[done]))
            return outs

        def reset_prefix_cache(self) -> None:
            record.resets += 1

    module = types.ModuleType("vllm")
    module.LLM = LLM
    module.SamplingParams = SamplingParams
    module.inputs = types.SimpleNamespace(
        TokensPrompt=lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    )
    monkeypatch.setitem(sys.modules, "vllm", module)
    return record


def test_vllm_engine_uses_token_prompts_logprobs_and_pushes_weights(monkeypatch):
    from agentrl.rollout.remote.vllm_engine import VLLMEngine

    record = _fake_vllm(monkeypatch)
    engine = VLLMEngine("/models/policy", FakeTokenizer(), gpu_memory_utilization=0.25, seed=3)
    assert record.llm_kwargs["model"] == "/models/policy"
    assert record.llm_kwargs["gpu_memory_utilization"] == 0.25
    outs = engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=3, top_k=0), num_samples=2)
    assert record.prompts == [{"prompt_token_ids": [1, 2, 3]}] * 2
    sp = record.params[0].kwargs
    assert sp["logprobs"] == 0 and sp["max_tokens"] == 3 and record.params[0].kwargs["top_k"] == -1
    assert set(sp["stop_token_ids"]) == {0, EOS}
    assert outs[0].token_ids == [8, 9] and outs[0].end_token_id == EOS
    assert outs[0].logps == pytest.approx([-0.5, -1.0]) and outs[0].finish_reason == FINISH_EOS

    assert engine.update_weights(_weights(2.0), version=7)
    assert set(record.loaded) == {"embed.weight", "head.weight"} and record.resets == 1
    assert engine.version == 7
    bad = _weights()
    bad["embed.weight"][0, 0] = float("inf")
    assert engine.update_weights(bad) is False and engine.version == 7


def test_missing_vllm_says_how_to_install_it(monkeypatch):
    from agentrl.rollout.remote.vllm_engine import VLLMEngine, VLLMUnavailableError

    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    with pytest.raises(VLLMUnavailableError, match=r"pip install 'agentrl\[vllm\]'"):
        VLLMEngine("/models/policy", FakeTokenizer())


def test_a_training_run_rolls_out_on_the_server_and_syncs_it(server, run_files, tmp_path):
    from agentrl.trainer import Trainer

    from tests.fakes.runs import short_run_config

    config = short_run_config(
        run_files,
        tmp_path,
        "remote",
        total_steps=2,
        max_gen_len=6,
        bc_coef=0.0,
        rollout_engine="sglang",
        hard_kl_stop_mult=0.0,
        sglang_wait_sec=5.0,
        sglang_base_url=server.url,
        weight_sync="disk",
        sglang_shared_path=str(tmp_path / "shared"),
    )
    trainer = Trainer(config)
    result = trainer.run()
    assert result.steps_done == 2
    assert isinstance(trainer.source.engine, SGLangEngine)
    loads = [
        Path(b["model_path"]).name for p, b in server.requests if p == "/update_weights_from_disk"
    ]
    assert loads == ["v00000000", "v00000001", "v00000002"]  # the start, then each sync
    generates = [b for p, b in server.requests if p == "/generate"]
    assert len(generates) == 2 and all(len(b["input_ids"]) == 4 for b in generates)
    assert trainer.source.version.get() == 2 and server.weight_version == "2"
