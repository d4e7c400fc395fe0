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
stops the run only when no other reward function scores that episode (a completion
without any reward is the reward functions' error: `agentrl.rewards.combine`). A
user's backend that raises, or replies with something else than the text (or None) of
each chat, is a :class:`agentrl.errors.UserCodeError` naming it.

Requests go out in batches (``judge_batch_size`` rows per forward, or concurrent
requests), and verdicts are cached by the judged text, so a completion seen again is not
judged again. The judge's reasoning goes into each episode's ``notes``
(``notes["judge"]``), which the rollout dumps keep and ``agentrl view`` shows.

The chats and score parsing are `agentrl.rewards.judge_prompts`; the local and remote
judges are `agentrl.rewards.judge_backends`; the settings are declared with the options in
`agentrl.rewards.options`; this module holds the reward.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.errors import UsageError, UserCodeError, call_user_code
from agentrl.rewards.judge_backends import JudgeBackend, LocalJudge, RemoteJudge
from agentrl.rewards.judge_prompts import (
    parse_scores,
    rank_chat,
    response_text,
    score_reads,
    single_chat,
    task_text,
)
from agentrl.rewards.options import DEFAULT_RUBRIC, JUDGE_MODES, JudgeSettings

JUDGE = "judge"
CACHE_ENTRIES = 4096


def judge_settings(options: Any) -> JudgeSettings:
    """The judge a run's config names (its ``judge_*`` options, its device and dtype; what
    it does not hold keeps the declared default); a config that names neither a judge
    model nor a URL is a :class:`UsageError` now, not at the first step's scoring."""
    d = JudgeSettings  # the declared defaults, as class attributes
    if options is not None and not (
        getattr(options, "judge_model", d.model) or getattr(options, "judge_url", d.url)
    ):
        raise UsageError(
            "--reward_funcs judge needs a judge: --judge_model (a model agentrl loads, e.g. "
            "Qwen/Qwen2.5-0.5B-Instruct) or --judge_url (an OpenAI-compatible server)"
        )
    return JudgeSettings(
        model=str(getattr(options, "judge_model", d.model)),
        url=str(getattr(options, "judge_url", d.url)),
        api_model=str(getattr(options, "judge_api_model", d.api_model)),
        rubric=str(getattr(options, "judge_rubric", "")) or DEFAULT_RUBRIC,
        mode=str(getattr(options, "judge_mode", d.mode)),
        max_tokens=int(getattr(options, "judge_max_tokens", d.max_tokens)),
        batch_size=int(getattr(options, "judge_batch_size", d.batch_size)),
        device=str(getattr(options, "device", d.device)),
        dtype=str(getattr(options, "dtype", d.dtype)),
    )


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
            reads = [score_reads(self.settings.mode, len(members)) for _, (members, _) in unique]
            what = f"judge backend {type(backend).__name__}.complete()"
            replies = call_user_code(what, backend.complete, chats, reads)
            for (key, (members, _)), reply in zip(
                unique, _replies(what, replies, chats), strict=True
            ):
                fresh[key] = self._read(
                    _reply(what, reply, backend.local), len(members), backend.local
                )
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


def _replies(what: str, replies: Any, chats: Sequence[Any]) -> list[Any]:
    """A backend's replies, one per chat; anything else is the backend's error."""
    if not isinstance(replies, list | tuple) or len(replies) != len(chats):
        shown = f"{len(replies)} replies" if isinstance(replies, list | tuple) else repr(replies)
        raise UserCodeError(
            f"{what} returned {shown[:60]}: one reply per chat ({len(chats)}) is due"
        )
    return list(replies)


def _reply(what: str, reply: Any, local: bool) -> Any:
    """One reply as its backend's kind promises: a text or None (a request that failed);
    a local judge's ``(text, [scores])``. Anything else is the backend's error."""
    if local:
        ok = isinstance(reply, tuple | list) and len(reply) == 2 and isinstance(reply[0], str)
        scores = reply[1] if ok else None
        ok = isinstance(scores, list | tuple) and all(
            isinstance(x, numbers.Real) and math.isfinite(x) for x in scores
        )
    else:
        ok = reply is None or isinstance(reply, str)
    if not ok:
        due = "(text, [scores])" if local else "a text or None"
        raise UserCodeError(f"{what} returned {reply!r:.60} for a chat: {due} is due")
    return reply


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
    "JudgeBackend",
    "JudgeReward",
    "JudgeSettings",
    "LocalJudge",
    "RemoteJudge",
    "judge_settings",
    "parse_scores",
    "rank_chat",
    "single_chat",
]
