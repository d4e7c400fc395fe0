"""What the trainer saw of every token of an episode, compactly, for `agentrl view`.

A dump record's ``token_view`` (see `agentrl.observability.rollout_dump`) holds, as short
strings of comma-separated integers that the page parses only for the episode it shows:

- ``ids``: the episode's token ids as trained (prompt, then generated and observation
  tokens); ``prompt``: how many of them are the prompt. Where the previous episodes of its
  group had the same prompt, ``prompt_ref`` names that episode (its index in the file) and
  ``ids`` starts after the prompt;
- ``loss``: run lengths over the tokens after the first, alternating out of the loss / in
  it (starting with out): prompt, tool results and template glue are out;
- per token in the loss, in order: ``lp`` the behaviour log-prob (the sampler's) x 10,
  ``dlp`` the trainer's log-prob minus the behaviour one x 100 (the ratio is its exp),
  ``ent`` the trainer's entropy x 10, and ``adv`` the advantage as ``value x 1000:count``
  runs (one value per episode, or one per turn).

The record also has ``logp_gap_max`` and ``logp_gap_mean``: the largest and the mean
absolute gap between trainer and behaviour log-probs, for the page's filter. One decoded
vocabulary table per dump (``vocab``: id -> text, for the ids the dump uses) rides on its
first record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCALES = {"lp": 10, "dlp": 100, "ent": 10, "adv": 1000}


def _ints(values: Iterable[float], scale: int) -> str:
    return ",".join(str(round(v * scale)) for v in values)


def _runs(values: Sequence[int]) -> list[int]:
    """Run lengths of a 0/1 sequence, the first run being of 0 (maybe empty)."""
    out: list[int] = []
    current, count = 0, 0
    for v in values:
        if v == current:
            count += 1
        else:
            out.append(count)
            current, count = v, 1
    out.append(count)
    return out


def _value_runs(values: Sequence[int]) -> str:
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        parts.append(f"{values[i]}:{j - i}")
        i = j
    return ",".join(parts)


def token_view(
    ids: Sequence[int],
    prompt: int,
    loss: Sequence[float],
    behaviour: Sequence[float],
    trained: Sequence[float] | None = None,
    entropy: Sequence[float] | None = None,
    advantages: Sequence[float] | None = None,
) -> tuple[dict[str, Any], dict[str, float | None]]:
    """(the ``token_view`` of one episode, its record-level gap fields).

    ``loss``, ``behaviour`` and the optional per-position arrays are shifted (position t
    predicts ``ids[t + 1]``) and have ``len(ids) - 1`` entries.
    """
    n = len(ids)
    mask = [1 if loss[t] > 0 else 0 for t in range(n - 1)]
    on = [t for t in range(n - 1) if mask[t]]
    view: dict[str, Any] = {
        "ids": ",".join(str(int(i)) for i in ids),
        "prompt": int(prompt),
        "loss": ",".join(str(r) for r in _runs(mask)),
        "lp": _ints((behaviour[t] for t in on), SCALES["lp"]),
    }
    gaps: dict[str, float | None] = {"logp_gap_max": None, "logp_gap_mean": None}
    if trained is not None:
        delta = [round((trained[t] - behaviour[t]) * SCALES["dlp"]) for t in on]
        view["dlp"] = ",".join(str(d) for d in delta)
        if delta:
            gaps["logp_gap_max"] = max(abs(d) for d in delta) / SCALES["dlp"]
            gaps["logp_gap_mean"] = sum(abs(d) for d in delta) / len(delta) / SCALES["dlp"]
    if entropy is not None:
        view["ent"] = _ints((entropy[t] for t in on), SCALES["ent"])
    if advantages is not None:
        view["adv"] = _value_runs([round(advantages[t] * SCALES["adv"]) for t in on])
    return view, gaps


def share_prompts(records: list[dict[str, Any]]) -> None:
    """Write each group's prompt ids once: a later episode of a group whose prompt equals
    an earlier one's refers to it (``prompt_ref``) instead of repeating the ids."""
    first: dict[tuple[Any, Any], tuple[int, str]] = {}
    for index, record in enumerate(records):
        view = record.get("token_view")
        if not view:
            continue
        ids = view["ids"].split(",")
        head = ",".join(ids[: view["prompt"]])
        key = (record.get("step"), record.get("group"))
        if key in first and first[key][1] == head:
            view["ids"] = ",".join(ids[view["prompt"] :])
            view["prompt_ref"] = first[key][0]
        elif key not in first:
            first[key] = (int(record.get("episode", index)), head)


def vocab_table(tokenizer: Any, records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """id -> decoded text for every id the records' token views use (one decode call)."""
    used: set[int] = set()
    for record in records:
        view = record.get("token_view")
        if view and view["ids"]:
            used.update(int(i) for i in view["ids"].split(","))
    order = sorted(used)
    texts = tokenizer.batch_decode([[i] for i in order], skip_special_tokens=False)
    return {str(i): text for i, text in zip(order, texts, strict=True)}


__all__ = ["SCALES", "share_prompts", "token_view", "vocab_table"]
