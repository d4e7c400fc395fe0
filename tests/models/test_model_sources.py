"""Where a policy comes from: Hub ids through the Hugging Face cache, GGUF files, the run's
name, and what `agentrl eval --show_prompt` shows of a template without tool support."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from agentrl.cli import main as cli_main
from agentrl.config import resolve, run_name_for
from agentrl.models import load_policy
from agentrl.models.errors import CheckpointNotFoundError
from agentrl.models.loading import is_hub_id

from tests.fakes.models import tiny_tokenizer
from tests.fakes.runs import eval_args

REPO = Path(__file__).resolve().parents[2]
CHATML_NO_TOOLS = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _tiny_qwen2(vocab: int) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).eval()


def test_hub_ids_are_told_apart_from_paths() -> None:
    assert is_hub_id("Qwen/Qwen3-0.6B") and is_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not is_hub_id("tiny") and not is_hub_id("./a/b") and not is_hub_id("a/b/c")
    assert not is_hub_id("/abs/dir")


@pytest.mark.slow
def test_hub_id_resolves_offline_from_a_local_hub_cache(tmp_path: Path, run_files: Path) -> None:
    cache = tmp_path / "hf" / "hub"
    repo = cache / "models--tiny-org--tiny-chat"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    for file in (run_files / "model").iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    script = (
        "from agentrl.models import load_policy\n"
        "model, tok = load_policy('tiny-org/tiny-chat', 'bfloat16', 'cpu')\n"
        "print(type(model).__name__, next(model.parameters()).dtype, len(tok))\n"
        "try:\n    load_policy('tiny-org/not-cached', None, 'cpu')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == f"Qwen3ForCausalLM torch.bfloat16 {len(tiny_tokenizer_for(run_files))}"
    assert lines[1].startswith("CheckpointNotFoundError tiny-org/not-cached: not in the Hugging")


def tiny_tokenizer_for(run_files: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(run_files / "model"))


def _write_gguf(path: Path, model: Any, tok: Any) -> None:
    """A float32 GGUF file of a Qwen2 model and a byte-level BPE tokenizer."""
    gguf = pytest.importorskip("gguf")
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    state = json.loads(tok.backend_tokenizer.to_str())
    added = {a["content"]: a for a in state["added_tokens"]}
    ids = {**state["model"]["vocab"], **{t: a["id"] for t, a in added.items()}}
    tokens = [""] * len(tok)
    for text, index in ids.items():
        tokens[index] = text
    kinds = [3 if t in added and added[t]["special"] else 4 if t in added else 1 for t in tokens]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(kinds)
    merges = state["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(tok.bos_token_id)
    writer.add_eos_token_id(tok.eos_token_id)
    writer.add_pad_token_id(tok.pad_token_id)
    writer.add_chat_template(tok.chat_template)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, cfg.num_hidden_layers)
    for key, value in model.state_dict().items():
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        assert name, key
        writer.add_tensor(name, value.numpy().astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.slow
def test_gguf_file_loads_with_weights_tokenizer_and_chat_template(tmp_path: Path) -> None:
    tok = tiny_tokenizer()
    source = _tiny_qwen2(len(tok))
    path = tmp_path / "tiny-chat.gguf"
    _write_gguf(path, source, tok)
    model, loaded = load_policy(path, "float32", "cpu")
    text = '<|im_start|>user\n12+30?<|im_end|>\n<|im_start|>assistant\n<tool_call>{"a": 1}'
    ids = loaded(text, add_special_tokens=False)["input_ids"]
    assert loaded.decode(ids) == text
    assert loaded.convert_tokens_to_ids("<tool_call>") == tok.convert_tokens_to_ids("<tool_call>")
    batch = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(model(batch).logits, source(batch).logits)
    assert loaded.chat_template == tok.chat_template
    assert loaded.eos_token == "<|im_end|>"
    assert all(p.requires_grad and p.dtype == torch.float32 for p in model.parameters())
    half, _ = load_policy(path, "bfloat16", "cpu")
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    with pytest.raises(CheckpointNotFoundError, match="no such GGUF file"):
        load_policy(tmp_path / "missing.gguf", None, "cpu")


def test_run_directory_is_named_after_the_model() -> None:
    assert run_name_for("Qwen/Qwen3-0.6B") == "Qwen3-0.6B-rl"
    assert (
        run_name_for("/models/SmolLM2-135M-Instruct.Q4_1.gguf") == "SmolLM2-135M-Instruct.Q4_1-rl"
    )
    assert run_name_for("out/full_sft_768.pth") == "full_sft_768-rl"
    assert run_name_for("models/my.model.v2/") == "my.model.v2-rl"
    assert resolve().run_name == "tiny-rl"  # the built-in run keeps runs/tiny-rl
    assert resolve(overrides={"model": "Qwen/Qwen3-0.6B"}).run_dir == Path("runs/Qwen3-0.6B-rl")
    named = resolve(overrides={"model": "Qwen/Qwen3-0.6B", "run_name": "mine"})
    assert named.run_name == "mine"


def test_run_name_flag_sets_the_run_directory(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["train", "--print_config", "--model", "a/b", "--run_name", "exp1"])
    assert code == 0
    assert 'run_name = "exp1"' in capsys.readouterr().out


@pytest.mark.slow
def test_eval_show_prompt_prints_the_tools_in_the_model_own_markup(
    run_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML_NO_TOOLS)
    code = cli_main(
        [
            *eval_args(run_files / "model", run_files / "prompts.jsonl", samples=1, max_gen_len=4),
            "--chat_template",
            str(template),
            "--show_prompt",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    prompt = out.split("---- rendered prompt")[1].split("---- end of prompt ----")[0]
    system = prompt.split("<|im_start|>user")[0]
    assert "<|im_start|>system\n" in system and "# Tools" in system
    assert '"name": "calculate_math"' in system and "<|im_end|>" in system
    assert "tools are not rendered by the template: agentrl writes a tools block" in out
    assert "on 1 prompts" in out
    broken = tmp_path / "broken.jinja"
    broken.write_text("{{ raise_exception('needs a date') }}")
    code = cli_main(
        [
            "eval",
            "--model",
            str(run_files / "model"),
            "--eval_samples",
            "1",
            "--chat_template",
            str(broken),
            "--show_prompt",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "broken.jinja" in err and "needs a date" in err
