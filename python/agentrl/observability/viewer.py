"""`agentrl view`: one self-contained HTML file to read what the model did.

Inputs are run directories (``config.toml``, ``metrics.jsonl``, ``rollouts/*.jsonl.gz``) or
dump files (`agentrl eval --output`). Their data is embedded in the page as one JSON block;
the page's own script (inline, with its stylesheet: no network, works from ``file://``)
draws the curves and renders only what is on screen (a page of the episode list, the
selected episode or group), so ten thousand episodes stay usable.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import UsageError
from agentrl.observability.metrics_log import read_metrics
from agentrl.observability.rollout_dump import DumpError, clean_json, dump_files, read_records
from agentrl.utils.atomic import write_text_atomic

_ASSETS = Path(__file__).with_name("viewer_assets")
VIEW_FILE = "view.html"


@dataclass(frozen=True)
class ViewSource:
    """One input of the page: a run directory or a dump file."""

    name: str
    path: Path
    kind: str  # "run" | "dump"
    config: str
    metrics: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    # A run's dump files that could not be read, each as its error (file and line): left
    # out of the page, which the others still make.
    skipped: tuple[str, ...] = ()


def load_source(path: str | os.PathLike[str]) -> ViewSource:
    """A run directory's config, metrics and dumps, or one dump file's episodes. A run's
    damaged dump file is skipped and named in ``skipped``; a damaged dump given alone is
    a :class:`DumpError`."""
    p = Path(path)
    if p.is_dir():
        config_file, metrics_file = p / "config.toml", p / "metrics.jsonl"
        files = dump_files(p)
        if not files and not metrics_file.is_file():
            raise UsageError(
                f"{p}: no metrics.jsonl and no rollouts/*.jsonl.gz: not a run directory "
                "(train with --dump_rollouts N to keep episodes)"
            )
        episodes: list[dict[str, Any]] = []
        skipped: list[str] = []
        for f in files:
            try:
                episodes += read_records(f)
            except DumpError as exc:
                skipped.append(str(exc))
        config = config_file.read_text(encoding="utf-8") if config_file.is_file() else ""
        metrics = read_metrics(metrics_file)
        return ViewSource(p.name, p, "run", config, metrics, episodes, tuple(skipped))
    if p.is_file():
        return ViewSource(p.name, p, "dump", "", [], read_records(p))
    raise UsageError(f"{p}: no such run directory or dump file")


def default_output(paths: Sequence[str | os.PathLike[str]]) -> Path:
    """``RUN_DIR/view.html`` for a run (the first one given), ``FILE.html`` for a dump."""
    first = Path(paths[0])
    return first / VIEW_FILE if first.is_dir() else first.with_name(first.name + ".html")


def _embedded_json(value: Any) -> str:
    """JSON safe inside a <script> element: no ``</`` and no line separators unescaped."""
    text = json.dumps(clean_json(value), ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("</", "<\\/")
        .replace("<!--", "<\\u0021--")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# Token views ride in blocks of this many episodes beside the page's data, each parsed
# only when one of its episodes is shown: they cost little when the page opens.
TOKEN_CHUNK = 500


def split_token_views(
    runs: Sequence[Sequence[dict[str, Any]]],
) -> tuple[list[list[dict[str, Any]]], str]:
    """(the episodes without their token views and vocabularies, the HTML blocks holding
    them): episode records point at their view with ``tv`` = [block, index]; each run's
    vocabulary tables merge into one (one tokenizer per run)."""
    episodes_out: list[list[dict[str, Any]]] = []
    blocks: list[str] = []
    for r, episodes in enumerate(runs):
        chunks: list[list[Any]] = []
        vocab: dict[str, str] = {}
        kept = []
        for record in episodes:
            view, table = record.get("token_view"), record.get("vocab")
            if view is None and table is None:
                kept.append(record)
                continue
            record = {k: v for k, v in record.items() if k not in ("token_view", "vocab")}
            vocab.update(table or {})
            if view is not None:
                if not chunks or len(chunks[-1]) >= TOKEN_CHUNK:
                    chunks.append([])
                record["tv"] = [len(chunks) - 1, len(chunks[-1])]
                chunks[-1].append(view)
            kept.append(record)
        episodes_out.append(kept)
        for c, chunk in enumerate(chunks):
            blocks.append(_json_block(f"agentrl-tokens-{r}-{c}", chunk))
        if vocab:
            blocks.append(_json_block(f"agentrl-vocab-{r}", vocab))
    return episodes_out, "\n".join(blocks)


def _json_block(name: str, value: Any) -> str:
    return f'<script type="application/json" id="{name}">{_embedded_json(value)}</script>'


def render_page(sources: Sequence[ViewSource], title: str = "") -> str:
    """The whole HTML document for ``sources`` (one or two)."""
    episodes, token_blocks = split_token_views([s.episodes for s in sources])
    data = {
        "title": title or " vs ".join(s.name for s in sources),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "runs": [
            {
                "name": s.name,
                "path": str(s.path),
                "kind": s.kind,
                "config": s.config,
                "metrics": s.metrics,
                "episodes": shown,
            }
            for s, shown in zip(sources, episodes, strict=True)
        ],
    }
    page = (_ASSETS / "page.html").read_text(encoding="utf-8")
    parts = {
        "/*STYLE*/": (_ASSETS / "viewer.css").read_text(encoding="utf-8"),
        "/*SCRIPT*/": "\n".join(
            (_ASSETS / name).read_text(encoding="utf-8") for name in ("tokens.js", "viewer.js")
        ),
        "__TITLE__": _html_text(data["title"]),
        "__DATA__": _embedded_json(data),
        "__TOKENS__": token_blocks,
    }
    # One pass over the template: a marker inside a substituted text (a run named
    # `x__DATA__`, a script that spells `/*STYLE*/`) is never replaced in turn.
    markers = re.compile("|".join(re.escape(marker) for marker in parts))
    return markers.sub(lambda found: parts[found.group(0)], page)


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_view(
    paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str] | None = None
) -> tuple[Path, list[ViewSource]]:
    """Write the page for one or two inputs; returns its path and what it shows."""
    if not 1 <= len(paths) <= 2:
        raise UsageError(f"view takes one or two run directories or dump files, got {len(paths)}")
    sources = [load_source(p) for p in paths]
    out = Path(output) if output else default_output(paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, render_page(sources))
    return out, sources


__all__ = ["VIEW_FILE", "ViewSource", "default_output", "load_source", "render_page", "write_view"]
