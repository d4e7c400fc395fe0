"""Prompts from a reasoning-gym task generator: ``--data reasoning_gym:NAME[?size=..&seed=..]``.

reasoning-gym (PyPI ``reasoning-gym``) is a library of procedural task generators, each
with its own scorer. ``reasoning_gym:NAME`` makes ``size`` tasks of generator ``NAME``
(``reasoning_gym.create_dataset(NAME, size=.., seed=.., **config)``: every other query
key is a field of the generator's config, its value read as JSON where it parses, e.g.
``reasoning_gym:basic_arithmetic?size=200&seed=1&min_terms=2``) and turns each into a
prompt record: reasoning-gym's own system prompt (the answer goes in ``<answer>`` tags),
the question as the user turn, its ``answer`` as the ground truth (some generators have
none: their scorer checks any answer) and its ``metadata`` as a column, which the
``reasoning_gym`` reward (`agentrl.rewards.reasoning_gym`) hands to the generator's scorer.
``seed`` is 0 unless given, so every run (and every rank of one) sees the same tasks;
``size`` is reasoning-gym's default, 500.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from agentrl.errors import UsageError, UserError, call_user_code

SCHEME = "reasoning_gym:"
# reasoning-gym's own instruction: think, then the final answer alone in <answer> tags.
SYSTEM_PROMPT = "default"
INSTALL = "pip install 'agentrl[reasoning-gym]'"


def is_reasoning_gym(path: object) -> bool:
    """Whether a ``--data`` value names a reasoning-gym generator rather than a file."""
    return isinstance(path, str) and path.startswith(SCHEME)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """(generator name, ``create_dataset`` keyword arguments) of ``reasoning_gym:NAME?..``."""
    parts = urlsplit(spec[len(SCHEME) :])
    name = parts.path.strip()
    if not name:
        raise UsageError(f"--data {spec!r}: name a reasoning-gym task, reasoning_gym:NAME")
    options: dict[str, Any] = {"seed": 0}
    for key, text in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        options[key] = _value(text)
    return name, options


def reasoning_gym_module(what: str) -> Any:
    """The ``reasoning_gym`` package; a one-line error naming ``what`` when it is missing."""
    try:
        import reasoning_gym
    except ImportError:
        raise UserError(f"{what} needs the reasoning-gym package: {INSTALL}") from None
    return reasoning_gym


def reasoning_gym_records(spec: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(number, prompt record) of each task the generator ``spec`` names, from 1."""
    name, options = parse_spec(spec)
    rg = reasoning_gym_module(f"--data {spec}")
    from reasoning_gym.factory import DATASETS
    from reasoning_gym.utils import SYSTEM_PROMPTS

    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f" ({len(DATASETS)} exist)"
        raise UsageError(f"--data {spec!r}: reasoning-gym has no task {name!r}{hint}")
    _, config_cls = DATASETS[name]
    fields = set(getattr(config_cls, "__dataclass_fields__", {}))
    unknown = sorted(set(options) - fields)
    if unknown:
        raise UsageError(
            f"--data {spec!r}: the {name} config has no field {', '.join(unknown)}; its "
            f"fields: {', '.join(sorted(fields))}"
        )
    what = f"reasoning-gym task {name!r}"
    dataset = call_user_code(f"{what} (create_dataset)", rg.create_dataset, name, **options)
    system = SYSTEM_PROMPTS[SYSTEM_PROMPT]
    for index in range(len(dataset)):
        entry = call_user_code(what, dataset.__getitem__, index)
        yield (
            index + 1,
            {
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": entry["question"]},
                ],
                "answer": entry["answer"],  # None where the scorer checks the answer itself
                "metadata": entry["metadata"],
                "id": f"{name}-{index}",
            },
        )


__all__ = [
    "SCHEME",
    "is_reasoning_gym",
    "parse_spec",
    "reasoning_gym_module",
    "reasoning_gym_records",
]
