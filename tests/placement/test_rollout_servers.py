"""Rollout servers: a ``vllm serve`` over HTTP, and weights pushed to servers over a group.

Against the loopback fakes of tests/fakes/rollout_server_fakes.py, which answer with the real
servers' request and response schemas and receive weights as the real servers do, over a
process group the trainer hosts, joined from another process over gloo (the real servers
use NCCL on GPUs: nothing here has run against one).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
import torch
from agentrl.config import resolve
from agentrl.errors import UsageError
from agentrl.rollout.engine import FINISH_EOS, FINISH_LENGTH, FINISH_STOP
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.remote import RemoteEngineError, RetryPolicy, create_rollout_engine
from agentrl.rollout.remote.collective import (
    TorchGroupFactory,
    VLLMNcclGroup,
    address_seen_by,
    beside_server_call,
    dtype_name,
    free_port,
    preflight,
    tensor_specs,
    vllm_nccl_group,
)
from agentrl.rollout.remote.sglang import SGLangEngine
from agentrl.rollout.remote.vllm_server import VLLMServerEngine
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.rollout_server_fakes import EOS, FakeSGLang, FakeVLLM, vllm_gloo_group

FAST = RetryPolicy(attempts=2, backoff_s=0.01, max_backoff_s=0.02)


class FakeTokenizer:
    eos_token_id = EOS
    pad_token_id = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(f"t{i}" for i in ids if not (skip_special_tokens and i in (0, EOS)))


def _weights(scale: float) -> dict[str, torch.Tensor]:
    """Mixed dtypes and shapes, values that depend on ``scale``."""
    return {
        "model.embed_tokens.weight": torch.arange(12.0).view(4, 3) * scale,
        "model.norm.weight": torch.full((3,), scale, dtype=torch.bfloat16),
        "lm_head.bias": torch.tensor([scale, -scale], dtype=torch.float64),
        "model.layers.0.mlp.gate_proj.weight": torch.linspace(-1, 1, 24).view(2, 3, 4) * scale,
    }


def _same(got: dict[str, torch.Tensor], sent: dict[str, torch.Tensor]) -> None:
    assert list(got) == list(sent)
    for name, tensor in sent.items():
        assert got[name].dtype == tensor.dtype and got[name].shape == tensor.shape, name
        assert torch.equal(got[name], tensor), name


@pytest.fixture
def sglang():
    fake = FakeSGLang()
    yield fake
    fake.close()


@pytest.fixture
def vllm():
    fake = FakeVLLM()
    yield fake
    fake.close()


# ---------------------------------------------------------------- the shared pieces


def test_specs_name_dtypes_as_both_servers_resolve_them():
    specs = tensor_specs(_weights(1.0))
    assert specs.dtypes == ["float32", "bfloat16", "float64", "float32"]
    assert specs.shapes == [[4, 3], [3], [2], [2, 3, 4]]
    assert all(
        getattr(torch, d) is t
        for d, t in zip(
            specs.dtypes, (torch.float32, torch.bfloat16, torch.float64, torch.float32), strict=True
        )
    )
    assert dtype_name(torch.float16) == "float16"
    assert address_seen_by("http://localhost:8000") == "127.0.0.1"
    assert address_seen_by("http://127.0.0.1:8998/") == "127.0.0.1"


def test_a_failing_side_is_reported_at_once_not_after_the_timeout():
    began = time.monotonic()

    def server() -> None:
        raise RemoteEngineError("HTTP 400: bad group")

    with pytest.raises(RemoteEngineError, match="joining failed: HTTP 400: bad group"):
        beside_server_call(server, lambda: time.sleep(30), what="joining", timeout_s=60)
    with pytest.raises(RemoteEngineError, match="sending failed on this side: RuntimeError: gloo"):
        beside_server_call(lambda: time.sleep(0.05), _raise_gloo, what="sending", timeout_s=60)
    with pytest.raises(RemoteEngineError, match="still waiting for the server's answer"):
        beside_server_call(lambda: time.sleep(30), lambda: None, what="x", timeout_s=0.2)
    assert time.monotonic() - began < 5


def _raise_gloo() -> None:
    raise RuntimeError("gloo timed out")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without GPU")
def test_nccl_without_a_gpu_says_what_to_use_instead(sglang):
    engine = SGLangEngine(sglang.url, FakeTokenizer(), weight_sync="nccl", retry=FAST)
    with pytest.raises(RemoteEngineError, match="has none: use --weight_sync gloo or disk"):
        engine.update_weights(_weights(1.0), version=1)
    assert engine.version == 0 and sglang.paths() == []  # the server was never asked to wait


def test_vllm_group_without_vllm_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # past the GPU check
    with pytest.raises(RemoteEngineError, match=r"pip install 'agentrl\[vllm\]'"):
        VLLMNcclGroup("127.0.0.1", 1, 2)
    with pytest.raises(RemoteEngineError, match=r"pip install 'agentrl\[vllm\]'"):
        preflight(vllm_nccl_group)


# ---------------------------------------------------------------- SGLang over a group


def _sglang_engine(fake: FakeSGLang, **kwargs: Any) -> SGLangEngine:
    options: dict[str, Any] = {
        "weight_sync": "gloo",
        "retry": FAST,
        "timeout_s": 10.0,
        "weight_sync_timeout_s": 60.0,
    }
    return SGLangEngine(fake.url, FakeTokenizer(), **{**options, **kwargs})


def test_sglang_weights_travel_over_the_group_not_the_disk(sglang, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = _sglang_engine(sglang)
    first = _weights(1.0)
    assert engine.update_weights(first, version=1)
    (init,) = sglang.bodies("/init_weights_update_group")
    assert init["master_address"] == "127.0.0.1" and isinstance(init["master_port"], int)
    assert (init["rank_offset"], init["world_size"], init["backend"]) == (1, 2, "gloo")
    assert init["group_name"].startswith("agentrl-weights-")
    (update,) = sglang.bodies("/update_weights_from_distributed")
    assert update["names"] == list(first) and update["shapes"] == [[4, 3], [3], [2], [2, 3, 4]]
    assert update["dtypes"] == ["float32", "bfloat16", "float64", "float32"]
    assert update["group_name"] == init["group_name"] and update["flush_cache"] is True
    _same(sglang.weights, first)
    assert sglang.weight_version == "1" and engine.version == 1

    second = _weights(-3.0)
    assert engine.update_weights(second, version=2)
    _same(sglang.weights, second)
    assert sglang.paths().count("/init_weights_update_group") == 1  # the group is kept
    assert "/update_weights_from_disk" not in sglang.paths() and not list(tmp_path.iterdir())
    _same(engine.model.state_dict(), second)  # what a checkpoint saves as the rollout weights
    assert engine.stats["weight_bytes_sent"] == 2 * sum(
        t.numel() * t.element_size() for t in first.values()
    )
    engine.close()
    assert sglang.bodies("/destroy_weights_update_group") == [{"group_name": init["group_name"]}]


def test_sglang_weights_of_a_model_arrive_whole(sglang):
    from tests.fakes.models import tiny_model

    model = tiny_model()
    engine = _sglang_engine(sglang)
    assert engine.update_weights(model, version=0)
    _same(sglang.weights, dict(model.state_dict()))
    engine.close()


def test_sglang_refusing_the_group_is_a_clear_error_not_a_hang(sglang):
    sglang.init_refuses = True
    engine = _sglang_engine(sglang)
    began = time.monotonic()
    with pytest.raises(RemoteEngineError, match=r"reported failure.*NCCL unavailable"):
        engine.update_weights(_weights(1.0), version=1)
    assert time.monotonic() - began < 10 and engine.version == 0
    assert "/update_weights_from_distributed" not in sglang.paths()
    # This side's wait for the server was called off, not left blocked in native code (a
    # thread still blocked there when the interpreter exits aborts the process).
    joins = [t for t in threading.enumerate() if t.name.startswith("joining the SGLang")]
    assert [t.name for t in joins if t.is_alive()] == []


def _join_in_thread(factory: TorchGroupFactory, port: int, name: str) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def join() -> None:
        try:
            outcome["group"] = factory("127.0.0.1", port, 3, name)
        except Exception as exc:
            outcome["error"] = exc

    outcome["thread"] = threading.Thread(target=join, daemon=True)
    outcome["thread"].start()
    return outcome


def test_a_join_waiting_for_the_server_is_called_off_promptly():
    factory = TorchGroupFactory("gloo", timeout_s=60.0)
    port = free_port("127.0.0.1")
    outcome = _join_in_thread(factory, port, "waits")
    time.sleep(0.5)  # the rendezvous store now waits for the server's two ranks
    began = time.monotonic()
    factory.call_off("127.0.0.1", port, 3, "waits")
    outcome["thread"].join(10)
    assert not outcome["thread"].is_alive() and time.monotonic() - began < 5
    assert "called off" in str(outcome["error"]) and "group" not in outcome


def test_a_join_called_off_before_it_starts_never_waits():
    factory = TorchGroupFactory("gloo", timeout_s=60.0)
    port = free_port("127.0.0.1")
    factory.call_off("127.0.0.1", port, 3, "early")
    outcome = _join_in_thread(factory, port, "early")
    outcome["thread"].join(5)
    assert not outcome["thread"].is_alive()
    assert "called off" in str(outcome["error"])


def test_sglang_failing_an_update_stops_the_sync(sglang):
    engine = _sglang_engine(sglang, weight_sync_timeout_s=60.0)
    assert engine.update_weights(_weights(1.0), version=1)
    sglang.status_next["/update_weights_from_distributed"] = 500
    with pytest.raises(RemoteEngineError, match=r"failed after 1 attempt\(s\): HTTP 500"):
        engine.update_weights(_weights(2.0), version=2)
    assert engine.version == 1  # never counted as loaded
    assert sglang.paths().count("/update_weights_from_distributed") == 2  # not retried
    third = _weights(3.0)  # the broken group is dropped: the next sync sets up a new one
    assert engine.update_weights(third, version=3)
    _same(sglang.weights, third)
    first_name, second_name = (b["group_name"] for b in sglang.bodies("/init_weights_update_group"))
    assert first_name != second_name
    engine.close()


def test_sglang_replicas_the_group_cannot_serve_are_refused(sglang):
    sglang.dp_size = 2
    with pytest.raises(RemoteEngineError, match="dp_size=2"):
        _sglang_engine(sglang).update_weights(_weights(1.0), version=1)
    assert "/init_weights_update_group" not in sglang.paths()


def test_sglang_refuses_a_path_unless_disk_sync_was_chosen(sglang, tmp_path):
    with pytest.raises(ValueError, match="not a path"):
        _sglang_engine(sglang).update_weights(tmp_path, version=1)
    with pytest.raises(ValueError, match="needs shared_dir"):
        SGLangEngine(sglang.url, FakeTokenizer(), weight_sync="disk")


# ---------------------------------------------------------------- vLLM: generation


def _vllm_engine(fake: FakeVLLM, **kwargs: Any) -> VLLMServerEngine:
    options: dict[str, Any] = {
        "retry": FAST,
        "timeout_s": 10.0,
        "group_factory": vllm_gloo_group,
        "weight_sync_timeout_s": 60.0,
    }
    return VLLMServerEngine(fake.url, FakeTokenizer(), **{**options, **kwargs})


def test_vllm_completions_carry_token_ids_and_logprob_fields(vllm):
    engine = _vllm_engine(vllm)
    engine.reseed(5)
    params = SamplingParams(temperature=0.7, top_k=0, top_p=0.9, max_new_tokens=4, stop=("X",))
    outs = engine.generate([[5, 6], [7]], params, num_samples=2, max_new_tokens=[3, 3, 2, 0])
    calls = vllm.bodies("/v1/completions")
    assert [c["prompt"] for c in calls] == [[[5, 6], [5, 6]], [[7]]]  # one request per budget
    assert [c["max_tokens"] for c in calls] == [3, 2]
    body = calls[0]
    assert body["model"] == FakeVLLM.MODEL and body["n"] == 1 and body["stream"] is False
    assert body["logprobs"] == 0 and body["return_tokens_as_token_ids"] is True
    assert body["return_token_ids"] is True and body["include_stop_str_in_output"] is True
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["top_k"] == -1
    assert body["stop"] == ["X"] and set(body["stop_token_ids"]) == {0, EOS}
    assert isinstance(body["seed"], int) and calls[1]["seed"] == body["seed"]
    assert len(outs) == 4
    first = outs[0]
    assert first.token_ids == [3 + (11 + k) % 47 for k in range(3)]
    assert first.logps == pytest.approx([-0.1, -0.2, -0.3])
    assert first.finish_reason == FINISH_LENGTH and first.prompt_tokens == 2
    assert outs[2].token_ids == [3 + (7 + k) % 47 for k in range(2)]
    assert outs[3].token_ids == [] and outs[3].finish_reason == FINISH_LENGTH
    assert vllm.paths().count("GET /v1/models") == 1  # asked once
    assert engine.stats["http_requests"] == 2 and engine.stats["generated_tokens"] == 3 + 3 + 2


def test_vllm_end_tokens_and_stop_strings_finish_like_the_torch_engine(vllm):
    engine = _vllm_engine(vllm, served_model=FakeVLLM.MODEL)
    vllm.eos_after = 2
    (out,) = engine.generate([[4]], SamplingParams(max_new_tokens=6))
    assert len(out.token_ids) == 2 and out.end_token_id == EOS and out.finish_reason == FINISH_EOS
    assert out.end_logp == pytest.approx(-0.3) and out.logps == pytest.approx([-0.1, -0.2])
    vllm.eos_after, vllm.stop_token_after = None, 3
    (out,) = engine.generate([[4]], SamplingParams(max_new_tokens=6, stop_token_ids=(44,)))
    assert out.token_ids == [3 + (4 + k) % 47 for k in range(3)] and out.end_token_id == 44
    assert out.finish_reason == FINISH_EOS
    vllm.stop_token_after, vllm.stop_string_after = None, 3
    (out,) = engine.generate([[4]], SamplingParams(max_new_tokens=6, stop=("</tool_call>",)))
    assert len(out.token_ids) == 3 and out.end_token_id is None and out.finish_reason == FINISH_STOP
    assert "GET /v1/models" not in vllm.paths()


def test_vllm_episodes_keep_the_alignment_invariants(vllm):
    from agentrl.rollout.episodes import EpisodeConfig, run_episodes
    from agentrl.tools import builtin_registry

    from tests.fakes.models import tiny_tokenizer

    vllm.eos_after = 5
    engine = VLLMServerEngine(vllm.url, tiny_tokenizer(), retry=FAST, version=3)
    sample = {"messages": [{"role": "user", "content": "2+3?"}], "gt": ["5"]}
    config = EpisodeConfig(max_turns=2, max_new_tokens=8, max_context_len=256)
    (group,) = run_episodes(engine, [sample], builtin_registry(), num_generations=2, config=config)
    assert len(group.trajectories) == 2 and group.policy_version == 3
    for traj in group.trajectories:
        traj.check_alignment()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"{not json", "invalid JSON"),
        (b'{"choices": []}', "0 choices for 1 prompts"),
        (
            b'{"choices": [{"index": 0, "finish_reason": "length", "logprobs": null}]}',
            "without logprobs.tokens",
        ),
        (
            b'{"choices": [{"index": 0, "finish_reason": "length", "logprobs": {"tokens": ["t5"], '
            b'"token_logprobs": [-0.5]}}]}',
            "not 'token_id:<id>'",
        ),
        (b'{"choices": [{"index": 3, "finish_reason": "length"}]}', "bad index"),
        (
            b'{"choices": [{"index": 0, "finish_reason": "length", "token_ids": [9], "logprobs": '
            b'{"tokens": ["token_id:5"], "token_logprobs": [-0.5]}}]}',
            "disagree",
        ),
    ],
)
def test_vllm_malformed_answers_are_clear_errors(vllm, answer, message):
    engine = _vllm_engine(vllm, served_model=FakeVLLM.MODEL)
    vllm.raw_next["/v1/completions"] = answer
    with pytest.raises(RemoteEngineError, match=message):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))


def test_vllm_failures_are_errors_never_silent(vllm):
    engine = _vllm_engine(vllm, served_model=FakeVLLM.MODEL)
    vllm.fail_next["/v1/completions"] = 1  # one 503: retried, then fine
    (out,) = engine.generate([[1]], SamplingParams(max_new_tokens=2))
    assert len(out.token_ids) == 2 and engine.client.retries_done == 1
    vllm.fail_next["/v1/completions"] = 10
    with pytest.raises(RemoteEngineError, match=r"failed after 2 attempt\(s\): HTTP 503"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    vllm.fail_next.clear()
    vllm.status_next["/v1/completions"] = 500
    vllm.fail_next["/v1/completions"] = 1  # 503 then 500: out of attempts
    with pytest.raises(RemoteEngineError, match="HTTP 500"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    vllm.abort = True
    with pytest.raises(RemoteEngineError, match="aborted"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))
    unknown = _vllm_engine(vllm, served_model="other")
    with pytest.raises(RemoteEngineError, match=r"HTTP 404.*does not exist"):
        unknown.generate([[1]], SamplingParams(max_new_tokens=2))


def test_vllm_server_down_is_reported_not_hung():
    fake = FakeVLLM()
    url = fake.url
    fake.close()
    engine = VLLMServerEngine(url, FakeTokenizer(), retry=FAST, timeout_s=2.0)
    assert engine.health() is False
    with pytest.raises(RemoteEngineError, match=r"not healthy.*vllm serve"):
        engine.wait_until_healthy(timeout_s=0.05, poll_s=0.01)
    with pytest.raises(RemoteEngineError, match="attempt"):
        engine.generate([[1]], SamplingParams(max_new_tokens=2))


# ---------------------------------------------------------------- vLLM: weights


def test_vllm_weights_follow_the_weight_transfer_protocol(vllm):
    engine = _vllm_engine(vllm)
    first = _weights(2.0)
    assert engine.update_weights(first, version=1)
    sync = [p for p in vllm.paths() if p != "GET /v1/models"]
    assert sync == [
        "GET /get_world_size",
        "/init_weight_transfer_engine",
        "/start_weight_update",
        "/update_weights",
        "/finish_weight_update",
        "/reset_prefix_cache",
    ]
    (init,) = vllm.bodies("/init_weight_transfer_engine")
    assert set(init) == {"init_info"}
    info = init["init_info"]
    assert (info["master_address"], info["rank_offset"], info["world_size"]) == ("127.0.0.1", 1, 2)
    (update,) = vllm.bodies("/update_weights")
    dtypes = ["float32", "bfloat16", "float64", "float32"]
    shapes = [[4, 3], [3], [2], [2, 3, 4]]
    assert update == {
        "update_info": {"names": list(first), "dtype_names": dtypes, "shapes": shapes}
    }
    assert vllm.bodies("/finish_weight_update") == [{"weight_version": "1"}]
    _same(vllm.weights, first)
    second = _weights(0.5)
    assert engine.update_weights(second, version=2)
    _same(vllm.weights, second)
    assert vllm.paths().count("/init_weight_transfer_engine") == 1
    assert vllm.weight_version == "2" and vllm.cache_resets == 2 and engine.version == 2
    bad = _weights(1.0)
    bad["model.norm.weight"][0] = float("nan")
    assert engine.update_weights(bad, version=3) is False and engine.version == 2
    assert vllm.paths().count("/start_weight_update") == 2  # nothing sent
    engine.close()


def test_vllm_refusing_an_update_is_an_error(vllm):
    engine = _vllm_engine(vllm, weight_sync_timeout_s=60.0)
    vllm.status_next["/start_weight_update"] = 500
    with pytest.raises(RemoteEngineError, match=r"start_weight_update.*HTTP 500"):
        engine.update_weights(_weights(1.0), version=1)
    assert engine.version == 0 and "/update_weights" not in vllm.paths()


# ---------------------------------------------------------------- selection and runs


def test_options_allow_only_what_a_server_can_honour(vllm):
    with pytest.raises(UsageError, match="NCCL only"):
        resolve(preset="tiny", overrides={"rollout_engine": "vllm-server", "weight_sync": "gloo"})
    with pytest.raises(UsageError, match="weight_sync='disk' needs rollout_engine='sglang'"):
        resolve(preset="tiny", overrides={"rollout_engine": "vllm-server", "weight_sync": "disk"})
    with pytest.raises(UsageError, match="no server receives weights"):
        resolve(preset="tiny", overrides={"weight_sync": "gloo"})
    with pytest.raises(ValueError, match="weight_sync_timeout_sec"):
        resolve(preset="tiny", overrides={"weight_sync_timeout_sec": 0.0})
    with pytest.raises(ValueError, match="NCCL weight-transfer engine only"):
        create_rollout_engine(
            "vllm-server", RolloutConfig(weight_sync="gloo"), tokenizer=FakeTokenizer()
        )
    engine = create_rollout_engine(
        "vllm-server",
        RolloutConfig(rollout_url=vllm.url, sglang_wait_sec=2.0),
        tokenizer=FakeTokenizer(),
        version=4,
    )
    assert isinstance(engine, VLLMServerEngine) and engine.version == 4
    assert engine.client.base_url == vllm.url


def test_torchrun_is_refused_for_a_single_server():
    from agentrl.placement import DistContext, placement_for

    config = resolve(
        preset="tiny", overrides={"multi_gpu_mode": "ddp", "rollout_engine": "vllm-server"}
    )
    ctx = DistContext(0, 2, 0, "gloo", 30.0, torch.device("cpu"))
    with pytest.raises(UsageError, match="vLLM server engine is one server"):
        placement_for(config, ctx)


def _run(run_files, tmp_path, name: str, **overrides: Any) -> Any:
    from agentrl.trainer import Trainer

    from tests.fakes.runs import short_run_config

    config = short_run_config(
        run_files,
        tmp_path,
        name,
        total_steps=2,
        max_gen_len=6,
        bc_coef=0.0,
        hard_kl_stop_mult=0.0,
        sglang_wait_sec=5.0,
        weight_sync_timeout_sec=120.0,
        **overrides,
    )
    trainer = Trainer(config)
    return trainer, trainer.run()


def _policy_state(trainer: Any) -> dict[str, torch.Tensor]:
    from agentrl.rollout.remote.weights import policy_state_dict

    return policy_state_dict(trainer.models.policy)


def test_a_training_run_on_the_sglang_server_syncs_over_the_group(sglang, run_files, tmp_path):
    trainer, result = _run(
        run_files,
        tmp_path,
        "sglang-group",
        rollout_engine="sglang",
        weight_sync="gloo",
        sglang_base_url=sglang.url,
    )
    assert result.steps_done == 2 and isinstance(trainer.source.engine, SGLangEngine)
    versions = [b["weight_version"] for b in sglang.bodies("/update_weights_from_distributed")]
    assert versions == ["0", "1", "2"]  # the start, then each sync
    assert sglang.paths().count("/init_weights_update_group") == 1
    assert len(sglang.bodies("/generate")) == 2
    _same(sglang.weights, _policy_state(trainer))  # the server holds the trained policy
    trainer.source.engine.close()


def test_a_training_run_on_the_vllm_server_syncs_over_the_group(
    vllm, run_files, tmp_path, monkeypatch
):
    # The real server's workers join vLLM's NCCL communicator (GPUs only); this fake's join
    # a gloo group, so the trainer's end is swapped for the matching one.
    monkeypatch.setattr("agentrl.rollout.remote.vllm_server.vllm_nccl_group", vllm_gloo_group)
    trainer, result = _run(
        run_files, tmp_path, "vllm-group", rollout_engine="vllm-server", rollout_url=vllm.url
    )
    assert result.steps_done == 2 and isinstance(trainer.source.engine, VLLMServerEngine)
    assert [b["weight_version"] for b in vllm.bodies("/finish_weight_update")] == ["0", "1", "2"]
    generates = vllm.bodies("/v1/completions")
    assert generates and all(b["return_tokens_as_token_ids"] for b in generates)
    assert sum(len(b["prompt"]) for b in generates) == 2 * 4  # 2 steps x the group's rows
    _same(vllm.weights, _policy_state(trainer))
    trainer.source.engine.close()
