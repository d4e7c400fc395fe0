"""The built-in `tiny` preset: a small Qwen3 decoder and a tokenizer built from our own data.

Nothing is downloaded. The tokenizer is a byte-level BPE trained with `tokenizers` on
demonstrations from the synthetic task generator (fixed seed), laid out like MiniMind's
(ids 0-2 `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`; 21-26 the tool and thinking tags;
then our `<answer>` tags) and carrying the MiniMind/Qwen chat template. Digit runs are cut
into chunks of at most three digits and every such chunk is a token, so numbers always
split the same way. Building is deterministic: same spec, same files, same weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from agentrl.utils.atomic import follow_umask

# Ids 3..20 are unused in MiniMind's layout; we keep them as reserved special tokens so
# the tool tags land on the same ids (21..26) as in MiniMind's tokenizer.
_RESERVED = tuple(f"<|reserved_{i}|>" for i in range(3, 21))
# "phrases" pre-splitting: digit runs cut left to right into chunks of up to CHUNK digits,
# every arithmetic symbol (ASCII, full-width, x and divide signs) and every function name
# before its parenthesis on its own. Expressions then tokenize the same way in a question
# and in the tool call that copies them, while the long constant prose of the prompt
# stays free to merge.
_PHRASE_PATTERN = (
    r"\p{N}{1,CHUNK}|[+\-*/%^()×÷＋－＊／％＾（）]|(?:sqrt|abs|round|log|exp|sin|cos|tan)(?=[(（])"
)
# Repeats of the digit corpus: enough that digit merges outrank rare phrase merges.
_DIGIT_REPEATS = 16
# "words": GPT-4/Llama-3 style pre-splitting (letters, digits, punctuation, spaces apart).
_WORDS_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,CHUNK}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class TinySpec:
    """Size of the tiny preset and of the corpus its tokenizer is trained on."""

    vocab_size: int = 3072
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    head_dim: int = 32
    intermediate_size: int = 384
    max_positions: int = 2048
    rope_theta: float = 1e4
    # Longest digit chunk that is one token (numbers split left to right into such chunks).
    digit_chunk: int = 3
    # "phrases": only digit chunks, arithmetic symbols and function names are split off
    # before BPE, so the long constant parts of our prompts (instruction, tool specs)
    # compress into few tokens; "words": conventional whitespace/punctuation pre-splitting.
    pretokenizer: str = "phrases"
    corpus_tasks: int = 3000
    corpus_seed: int = 424242
    seed: int = 0


def token_layout() -> tuple[list[str], list[str]]:
    """(special tokens in id order from 0, non-special markup tokens that follow them)."""
    from agentrl.chat import MARKUP_TOKENS, SPECIAL_TOKENS

    return [*SPECIAL_TOKENS, *_RESERVED], list(MARKUP_TOKENS)


def digit_corpus(chunk: int = 3) -> Iterator[str]:
    """Every digit string of up to `chunk` digits (leading zeros too), repeated often
    enough that BPE learns each as a token before rarer merges."""
    chunks = [f"{i:0{width}d}" for width in range(1, chunk + 1) for i in range(10**width)]
    chunks += [str(i) for i in range(10, 10**chunk)]
    for _ in range(_DIGIT_REPEATS):
        yield " ".join(chunks)


def demo_corpus(n_tasks: int, seed: int) -> Iterator[str]:
    """Rendered demonstrations of generated tasks, as the tiny model will see them."""
    from agentrl.chat import render_chat
    from agentrl.data.synthetic import TaskGenerator

    generator = TaskGenerator(seed=seed)
    tools = generator.tools()
    for task in generator.tasks(n_tasks):
        yield render_chat(task.demo_messages(), tools, add_generation_prompt=False)


def build_tokenizer(spec: TinySpec, corpus: Iterable[str]) -> Any:
    """Train the byte-level BPE on `corpus` (plus the digit chunks) and wrap it for HF."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from agentrl.chat import CHAT_TEMPLATE

    specials, markup = token_layout()
    tok = Tokenizer(models.BPE())
    if spec.pretokenizer == "phrases":
        pattern = _PHRASE_PATTERN.replace("CHUNK", str(spec.digit_chunk))
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    elif spec.pretokenizer == "words":
        pattern = _WORDS_PATTERN.replace("CHUNK", str(spec.digit_chunk))
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    else:
        raise ValueError(f"unknown pretokenizer {spec.pretokenizer!r}; use phrases or words")
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=2,
        special_tokens=[*specials, *markup],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Markup tags must be cut out of the training text, exactly as at encoding time.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in markup])
    tok.train_from_iterator(_chain(digit_corpus(spec.digit_chunk), corpus), trainer=trainer)
    # Training re-registers every trainer token as special; the markup tags must not be
    # (MiniMind keeps them through skip_special_tokens). A JSON round trip makes the
    # decoder see the corrected flags.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in markup])
    tok = Tokenizer.from_str(tok.to_str())
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=specials[1],
        eos_token=specials[2],
        pad_token=specials[0],
        unk_token=specials[0],
        model_max_length=spec.max_positions,
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _chain(*parts: Iterable[str]) -> Iterator[str]:
    for part in parts:
        yield from part


def model_config(spec: TinySpec, vocab_size: int) -> Any:
    """The Qwen3 config of the preset (tied embeddings, MiniMind's special ids)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": spec.rope_theta},
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )


def build_model(spec: TinySpec, vocab_size: int) -> torch.nn.Module:
    """Randomly initialised preset model; the caller's RNG state is left untouched."""
    from transformers import Qwen3ForCausalLM

    config = model_config(spec, vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen3ForCausalLM(config)
    model.config.agentrl_origin = "tiny"
    model.config.agentrl_tiny_spec = asdict(spec)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 2
    return model.eval()


def build_tiny_preset(spec: TinySpec | None = None) -> tuple[torch.nn.Module, Any]:
    """Tokenizer and fresh model of the preset, built in memory from the task generator."""
    spec = spec or TinySpec()
    tokenizer = build_tokenizer(spec, demo_corpus(spec.corpus_tasks, spec.corpus_seed))
    return build_model(spec, len(tokenizer)), tokenizer


def save_preset(model: torch.nn.Module, tokenizer: Any, directory: str | Path) -> Path:
    """Write the preset as an ordinary HF directory (loadable with `load_policy(dir)`)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    spec = getattr(model.config, "agentrl_tiny_spec", None)
    if spec is not None:
        (out / "tiny_spec.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
    follow_umask(out)  # safetensors writes its file 0600
    return out
