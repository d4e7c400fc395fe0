"""The judge's backends: a local model agentrl loads, or an OpenAI-compatible server.

Both answer a batch of chats (:class:`JudgeBackend`). The local judge writes its reasoning
greedily and reads the score from its next-token distribution over the digits (so it
always gives a number); the remote one returns the reply text, a failed request as None
(an unreadable verdict, counted). torch, the model loaders and ``openai`` are imported
when a backend is made, not with this module.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from agentrl.errors import UsageError
from agentrl.rewards.judge_prompts import MAX_SCORE, cut_at_score
from agentrl.rewards.options import JudgeSettings

# Seconds one request to a judge server may take before it counts as unreadable.
REQUEST_TIMEOUT = 120.0


class JudgeBackend(Protocol):
    """Something that answers judge prompts: the reply text of each chat, in order."""

    local: bool

    def complete(
        self, chats: Sequence[list[dict[str, str]]], reads: Sequence[list[str]]
    ) -> list[Any]:
        """Each chat's reply; a local backend also reads the score after each of ``reads``
        (suffixes such as ``"\\nSCORE: "``) and returns ``(text, [scores])``."""
        ...


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
                reasoning = cut_at_score(text)
                for suffix in reads[start + k]:
                    tail = self.tokenizer(reasoning + suffix, add_special_tokens=False)["input_ids"]
                    rows.append(ids + tail)
                    owners.append(k)
            scores = self._digit_scores(rows)
            for k, text in enumerate(texts):
                mine = [s for s, owner in zip(scores, owners, strict=True) if owner == k]
                out.append((cut_at_score(text), mine))
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


__all__ = ["REQUEST_TIMEOUT", "JudgeBackend", "LocalJudge", "RemoteJudge"]
