"""``judge``: a reward given by a model that reads each episode against a rubric.

Where no rule can score an answer (a summary, a plan, a search result) a judge model does:
alone (``single``: each episode scored on its own) or, RULER-style, relative to its peers
(``rank``: the episodes of one group shown together and scored against each other, which
is what a group-relative advantage needs). The judge is

* a **local model**, any ``--model`` spec agentrl loads (``tiny``, an HF directory or Hub
  id, ``.gguf``, MiniMind ``.pth``), run on the run's device: it writes its reasoning
  (greedy), then the score is read from its next-token distribution over the digits 0-9
  after ``SCORE:`` (the expected value), so a local judge always gives a number; or
* an **OpenAI-compatible URL** (``judge_url``, e.g. a vLLM or SGLang server, or the
  OpenAI API with ``OPENAI_API_KEY``), through the ``openai`` client: the reply's last
  ``SCORE: n`` line (``SCORE i: n`` per episode in ``rank`` mode) is the score.

Scores 0-9 become rewards in [0, 1]. A reply that cannot be read (no score line, a value
out of range, a failed request) is a ``None`` reward for that episode (its group, in rank
mode), counted in :attr:`JudgeReward.stats` and in the run's ``judge/none_frac``; it
never stops the run. Requests go out in batches (``judge_batch_size`` rows per forward,
or concurrent requests), and verdicts are cached by the judged text, so a completion seen
again is not judged again. The judge's reasoning goes into each episode's ``notes``
(``notes["judge"]``), which the rollout dumps keep and ``agentrl view`` shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentrl.errors import UsageError

JUDGE = "judge"
JUDGE_MODES = ("single", "rank")
MAX_SCORE = 9
# Longest text of one judged response (characters; its start and end are kept).
MAX_RESPONSE_CHARS = 6000
CACHE_ENTRIES = 4096
# Seconds one request to a judge server may take before it counts as unreadable.
REQUEST_TIMEOUT = 120.0

DEFAULT_RUBRIC = (
    "A good response does what the task asks, is correct, and is clear and concise. "
    "Tool calls count only when they help. Penalise wrong facts, made-up results and "
    "answers that do not address the task."
)

_SCORE_LINE = re.compile(
    r"^[\s*#>_`-]*score(?:\s*#?\s*(\d{1,3}))?\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.I
)


class JudgeBackend(Protocol):
    """Something that answers judge prompts: the reply text of each chat, in order."""

    local: bool

    def complete(
        self, chats: Sequence[list[dict[str, str]]], reads: Sequence[list[str]]
    ) -> list[Any]:
        """Each chat's reply; a local backend also reads the score after each of ``reads``
        (suffixes such as ``"\\nSCORE: "``) and returns ``(text, [scores])``."""
        ...


@dataclass(frozen=True)
class JudgeSettings:
    """How the judge is reached and asked (the ``judge_*`` options)."""

    model: str = ""  # a model spec agentrl loads, run locally
    url: str = ""  # an OpenAI-compatible base URL (http://host:port/v1)
    api_model: str = ""  # the model name sent to the URL ('': the first the server lists)
    rubric: str = DEFAULT_RUBRIC  # the rubric text, or @path of a file holding it
    mode: str = "single"
    max_tokens: int = 256  # reasoning tokens of the judge's reply
    batch_size: int = 8
    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.mode not in JUDGE_MODES:
            raise UsageError(
                f"judge_mode must be one of {', '.join(JUDGE_MODES)}, got {self.mode!r}"
            )
        if self.model and self.url:
            raise UsageError("give the judge as judge_model or as judge_url, not both")
        if self.max_tokens < 0 or self.batch_size < 1:
            raise UsageError("judge_max_tokens must be >= 0 and judge_batch_size >= 1")

    def rubric_text(self) -> str:
        if not self.rubric.startswith("@"):
            return self.rubric
        path = Path(self.rubric[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"judge_rubric {self.rubric!r}: {exc.strerror or exc}") from None


def judge_settings(options: Any) -> JudgeSettings:
    """The judge a run's config names (its ``judge_*`` options, its device and dtype);
    a config that names neither a judge model nor a URL is a :class:`UsageError` now,
    not at the first step's scoring."""
    dtype = str(getattr(options, "dtype", "float32"))
    if options is not None and not (
        getattr(options, "judge_model", "") or getattr(options, "judge_url", "")
    ):
        raise UsageError(
            "--reward_funcs judge needs a judge: --judge_model (a model agentrl loads, e.g. "
            "Qwen/Qwen2.5-0.5B-Instruct) or --judge_url (an OpenAI-compatible server)"
        )
    return JudgeSettings(
        model=str(getattr(options, "judge_model", "")),
        url=str(getattr(options, "judge_url", "")),
        api_model=str(getattr(options, "judge_api_model", "")),
        rubric=str(getattr(options, "judge_rubric", "")) or DEFAULT_RUBRIC,
        mode=str(getattr(options, "judge_mode", "single")),
        max_tokens=int(getattr(options, "judge_max_tokens", 256)),
        batch_size=int(getattr(options, "judge_batch_size", 8)),
        device=str(getattr(options, "device", "auto")),
        dtype=dtype,
    )


# ---------------------------------------------------------------- prompts and parsing


def _clip(text: str, limit: int = MAX_RESPONSE_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, ensure_ascii=False, default=str)
    calls = message.get("tool_calls")
    if calls:
        text += "\n[tool calls] " + json.dumps(calls, ensure_ascii=False, default=str)
    return text


def task_text(prompt: Any) -> str:
    """The task as the judge reads it: the prompt's messages (system ones left out)."""
    if isinstance(prompt, str):
        return _clip(prompt)
    lines = [
        f"{m.get('role', 'user')}: {_content(m)}"
        for m in prompt or []
        if isinstance(m, Mapping) and m.get("role") != "system"
    ]
    return _clip("\n".join(lines))


def response_text(completion: str, trajectory: Any = None) -> str:
    """The episode as the judge reads it: every turn after the prompt (tool results
    included) when the whole episode is known, else the final completion."""
    conversation = getattr(trajectory, "conversation", None) or []
    prompt = getattr(trajectory, "messages", None) or []
    turns = conversation[len(prompt) :]
    if not turns:
        return _clip(completion)
    return _clip("\n".join(f"{m.get('role', '?')}: {_content(m)}" for m in turns))


def single_chat(rubric: str, task: str, response: str) -> list[dict[str, str]]:
    system = (
        "You are a strict, fair judge. Read the task and the response, judge the response "
        f"by the rubric, reason briefly, then end with one line `SCORE: n`, n an integer "
        f"from 0 (worst) to {MAX_SCORE} (best).\n\nRubric:\n{rubric}"
    )
    user = f"Task:\n{task}\n\nResponse:\n{response}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def rank_chat(rubric: str, task: str, responses: Sequence[str]) -> list[dict[str, str]]:
    n = len(responses)
    system = (
        f"You are a strict, fair judge. Read the task and the {n} responses to it, compare "
        "them by the rubric (a better response scores higher than a worse one), reason "
        f"briefly, then end with one line per response, `SCORE i: n` for i from 1 to {n}, "
        f"n an integer from 0 (worst) to {MAX_SCORE} (best).\n\nRubric:\n{rubric}"
    )
    body = "\n\n".join(f"Response {i}:\n{r}" for i, r in enumerate(responses, 1))
    user = f"Task:\n{task}\n\n{body}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_scores(reply: str, n: int | None) -> list[float] | None:
    """The scores a reply gives, in [0, 1]; None when it cannot be read.

    ``n=None``: one score, from the last ``SCORE: x`` line. ``n`` episodes: the last
    ``SCORE i: x`` line of each i in 1..n, all present. A value outside 0..9 is unreadable.
    Each line is matched once by an anchored pattern, so this is linear in the reply.
    """
    found: dict[int, float] = {}
    for line in reply.splitlines():
        match = _SCORE_LINE.match(line[:200])
        if match is None:
            continue
        index = int(match.group(1)) if match.group(1) else 0
        found[index] = float(match.group(2))
    wanted = [0] if n is None else list(range(1, n + 1))
    if n == 1 and 1 not in found and 0 in found:
        found[1] = found[0]
    values = [found.get(i) for i in wanted]
    if any(v is None or not 0.0 <= v <= MAX_SCORE for v in values):
        return None
    return [float(v) / MAX_SCORE for v in values]  # type: ignore[arg-type]


def _cut_at_score(text: str) -> str:
    """The reasoning before a score line the judge wrote itself (its score is read after)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _SCORE_LINE.match(line[:200]):
            return "\n".join(lines[:i]).rstrip()
    return text.rstrip()


# ---------------------------------------------------------------- backends


class LocalJudge:
    """A judge model loaded as agentrl loads ``--model``, run greedily on one device."""

    local = True

    def __init__(self, settings: JudgeSettings) -> None:
        from agentrl.models.loading import load_policy, resolve_device

        device = None if settings.device in ("", "auto") else settings.device
        self.device = resolve_device(device)
        self.model, self.tokenizer = load_policy(settings.model, settings.dtype, self.device)
        self.model.eval()
        self.max_tokens = settings.max_tokens
        self.batch_size = settings.batch_size
        self.digits = []
        for digit in range(MAX_SCORE + 1):
            ids = self.tokenizer(str(digit), add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise UsageError(
                    f"judge_model {settings.model!r}: its tokenizer splits the digit {digit} "
                    "into several tokens, so the score cannot be read from it; serve it and "
                    "use judge_url instead"
                )
            self.digits.append(ids[0])
        pad = self.tokenizer.pad_token_id
        self.pad = int(pad if pad is not None else self.tokenizer.eos_token_id or 0)
        self.end = self.tokenizer.eos_token_id

    def complete(
        self, chats: Sequence[list[dict[str, str]]], reads: Sequence[list[str]]
    ) -> list[tuple[str, list[float]]]:
        from agentrl.chat import encode_chat

        out: list[tuple[str, list[float]]] = []
        for start in range(0, len(chats), self.batch_size):
            prompts = [
                encode_chat(self.tokenizer, c) for c in chats[start : start + self.batch_size]
            ]
            texts = self._generate(prompts)
            rows, owners = [], []
            for k, (ids, text) in enumerate(zip(prompts, texts, strict=True)):
                reasoning = _cut_at_score(text)
                for suffix in reads[start + k]:
                    tail = self.tokenizer(reasoning + suffix, add_special_tokens=False)["input_ids"]
                    rows.append(ids + tail)
                    owners.append(k)
            scores = self._digit_scores(rows)
            for k, text in enumerate(texts):
                mine = [s for s, owner in zip(scores, owners, strict=True) if owner == k]
                out.append((_cut_at_score(text), mine))
        return out

    def _batch(self, rows: Sequence[list[int]]) -> tuple[Any, Any]:
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):  # left padding: every row ends at the last column
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _generate(self, prompts: Sequence[list[int]]) -> list[str]:
        import torch

        if self.max_tokens == 0:
            return [""] * len(prompts)
        ids, mask = self._batch(prompts)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=self.max_tokens,
                do_sample=False,
                pad_token_id=self.pad,
                eos_token_id=self.end,
            )
        new = out[:, ids.shape[1] :].tolist()
        texts = []
        for row in new:
            if self.end is not None and self.end in row:
                row = row[: row.index(self.end)]
            texts.append(self.tokenizer.decode(row, skip_special_tokens=True))
        return texts

    def _digit_scores(self, rows: Sequence[list[int]]) -> list[float]:
        """The expected digit after each row, over the digits' probabilities, in [0, 1]."""
        import torch

        scores: list[float] = []
        for start in range(0, len(rows), self.batch_size):
            ids, mask = self._batch(rows[start : start + self.batch_size])
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, -1, :]
            probs = torch.softmax(logits[:, self.digits].float(), dim=-1)
            values = torch.arange(MAX_SCORE + 1, dtype=torch.float32, device=probs.device)
            scores.extend(((probs * values).sum(-1) / MAX_SCORE).tolist())
        return scores


class RemoteJudge:
    """A judge behind an OpenAI-compatible chat completions endpoint."""

    local = False

    def __init__(self, settings: JudgeSettings, client: Any = None) -> None:
        if client is None:
            try:
                from openai import OpenAI
            except ImportError:
                raise UsageError(
                    "judge_url needs the openai package: pip install 'agentrl[judge]'"
                ) from None
            key = os.environ.get("AGENTRL_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY")
            client = OpenAI(
                base_url=settings.url,
                api_key=key or "EMPTY",
                max_retries=1,
                timeout=REQUEST_TIMEOUT,
            )
        self.client = client
        self.model = settings.api_model
        self.max_tokens = settings.max_tokens
        self.batch_size = settings.batch_size
        self.errors: list[str] = []

    def _model_name(self) -> str:
        if not self.model:
            listed = list(self.client.models.list())
            if not listed:
                raise UsageError("judge_url: the server lists no models; set judge_api_model")
            self.model = listed[0].id
        return self.model

    def _one(self, chat: list[dict[str, str]]) -> str | None:
        try:
            reply = self.client.chat.completions.create(
                model=self._model_name(),
                messages=chat,
                max_tokens=self.max_tokens + 32,
                temperature=0.0,
            )
            return reply.choices[0].message.content or ""
        except UsageError:
            raise
        except Exception as exc:  # a failed request is an unreadable verdict, counted
            self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            return None

    def complete(
        self, chats: Sequence[list[dict[str, str]]], reads: Sequence[list[str]]
    ) -> list[str | None]:
        del reads
        if len(chats) <= 1:
            return [self._one(c) for c in chats]
        with ThreadPoolExecutor(max_workers=min(self.batch_size, len(chats))) as pool:
            return list(pool.map(self._one, chats))


# ---------------------------------------------------------------- the reward


@dataclass
class _Verdict:
    scores: list[float] | None
    reasoning: str


class JudgeReward:
    """The ``judge`` reward function (TRL convention: one value per completion or None).

    ``backend`` (a :class:`JudgeBackend`) defaults to the one ``settings`` name, made on
    the first call, so naming the reward costs nothing until it scores.
    """

    def __init__(self, settings: JudgeSettings | None = None, backend: Any = None) -> None:
        self.__name__ = JUDGE  # metrics name it as --reward_funcs does
        self.settings = settings or JudgeSettings()
        self.backend = backend
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Verdict] = OrderedDict()
        self.stats = {"judged": 0, "cached": 0, "unreadable": 0, "requests": 0}

    def _backend(self) -> Any:
        if self.backend is None:
            if self.settings.url:
                self.backend = RemoteJudge(self.settings)
            elif self.settings.model:
                self.backend = LocalJudge(self.settings)
            else:
                raise UsageError(
                    "the judge reward needs a judge: set judge_model (a model agentrl loads) "
                    "or judge_url (an OpenAI-compatible server)"
                )
        return self.backend

    def __call__(
        self,
        *,
        prompts: Sequence[Any],
        completions: Sequence[str],
        trajectories: Sequence[Any] | None = None,
        **extra: Any,
    ) -> list[float | None]:
        del extra
        n = len(completions)
        trajs = list(trajectories) if trajectories is not None else [None] * n
        rubric = self.settings.rubric_text()
        tasks = [task_text(p) for p in prompts]
        responses = [response_text(c, t) for c, t in zip(completions, trajs, strict=True)]
        if self.settings.mode == "single":
            jobs = [([i], single_chat(rubric, tasks[i], responses[i])) for i in range(n)]
        else:
            jobs = [
                (members, rank_chat(rubric, tasks[members[0]], [responses[i] for i in members]))
                for members in _groups(prompts, trajs)
            ]
        verdicts = self._verdicts(jobs)
        out: list[float | None] = [None] * n
        for (members, _), verdict in zip(jobs, verdicts, strict=True):
            for k, i in enumerate(members):
                score = None if verdict.scores is None else verdict.scores[k]
                out[i] = score
                note = {"mode": self.settings.mode, "score": score, "reasoning": verdict.reasoning}
                if len(members) > 1:
                    note["position"] = k + 1
                    note["group_size"] = len(members)
                notes = getattr(trajs[i], "notes", None)
                if isinstance(notes, dict):
                    notes[JUDGE] = note
        return out

    def _verdicts(self, jobs: list[tuple[list[int], list[dict[str, str]]]]) -> list[_Verdict]:
        keys = [_key(chat) for _, chat in jobs]
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
            for k in known:
                self._cache.move_to_end(k)
        todo = [(key, job) for key, job in zip(keys, jobs, strict=True) if key not in known]
        unique = list({key: job for key, job in todo}.items())
        fresh: dict[str, _Verdict] = {}
        if unique:
            backend = self._backend()
            chats = [chat for _, (_, chat) in unique]
            reads = [_reads(self.settings.mode, len(members)) for _, (members, _) in unique]
            replies = backend.complete(chats, reads)
            for (key, (members, _)), reply in zip(unique, replies, strict=True):
                fresh[key] = self._read(reply, len(members), backend.local)
        with self._lock:
            self.stats["requests"] += len(unique)
            self.stats["cached"] += len(jobs) - len(todo)
            for key, verdict in fresh.items():
                self.stats["judged"] += 1
                self.stats["unreadable"] += verdict.scores is None
                if verdict.scores is not None:  # an unreadable verdict is asked again
                    self._cache[key] = verdict
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return [known.get(key) or fresh[key] for key in keys]

    def _read(self, reply: Any, n: int, local: bool) -> _Verdict:
        if local:
            text, scores = reply
            return _Verdict(list(scores), text)
        if reply is None:
            return _Verdict(None, "(the judge's request failed)")
        scores = parse_scores(reply, None if self.settings.mode == "single" else n)
        return _Verdict(scores, reply)


def _reads(mode: str, n: int) -> list[str]:
    if mode == "single":
        return ["\nSCORE: "]
    return [f"\nSCORE {i}: " for i in range(1, n + 1)]


def _key(chat: list[dict[str, str]]) -> str:
    text = json.dumps(chat, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _groups(prompts: Sequence[Any], trajectories: Sequence[Any]) -> list[list[int]]:
    """Indices of the episodes of one prompt together (a rollout group), in order."""
    groups: dict[str, list[int]] = {}
    for i, (prompt, traj) in enumerate(zip(prompts, trajectories, strict=True)):
        index = getattr(traj, "data_index", -1)
        text = json.dumps(prompt, ensure_ascii=False, sort_keys=True, default=str)
        groups.setdefault(f"{index}|{text}", []).append(i)
    return list(groups.values())


__all__ = [
    "DEFAULT_RUBRIC",
    "JUDGE",
    "JUDGE_MODES",
    "JudgeReward",
    "JudgeSettings",
    "LocalJudge",
    "RemoteJudge",
    "judge_settings",
    "parse_scores",
    "rank_chat",
    "single_chat",
]
