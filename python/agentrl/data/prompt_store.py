"""Where the prompt pool keeps its prompts: each kept line as its UTF-8 bytes in one buffer,
turned into a :class:`PromptSample` when it is asked for, by the pool that checked it.

Splits and shards share one store (their own index into it), so they cost their index,
not their prompts.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Sequence
from typing import Any, Protocol

from agentrl.data.samples import PromptSample


class RecordDecoder(Protocol):
    """What turns a stored record back into its sample: the pool that checked it."""

    def decode_record(self, record: Any, source: str) -> PromptSample: ...


class PromptStore:
    """Kept prompts: stored lines (their bytes, file and number) decoded on demand by the
    pool that checked them, and samples held whole (dataset tables, ready-made samples)."""

    def __init__(self, decoder: RecordDecoder | None) -> None:
        self.decoder = decoder
        self.blob = bytearray()
        self.starts = array("q", [0])
        self.lines = array("q")
        self.files = array("H")
        self.paths: list[str] = []
        self.whole: dict[int, PromptSample] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def add_line(self, path: str, number: int, text: str) -> None:
        if not self.paths or self.paths[-1] != path:
            self.paths.append(path)
        self.blob += text.encode("utf-8")
        self.starts.append(len(self.blob))
        self.lines.append(number)
        self.files.append(len(self.paths) - 1)

    def add_sample(self, sample: PromptSample) -> None:
        self.whole[len(self.lines)] = sample
        self.starts.append(len(self.blob))
        self.lines.append(sample.line)
        self.files.append(0)

    def get(self, key: int) -> PromptSample:
        sample = self.whole.get(key)
        if sample is not None:
            return sample
        assert self.decoder is not None
        text = self.blob[self.starts[key] : self.starts[key + 1]].decode("utf-8")
        source = self.paths[self.files[key]]
        sample = self.decoder.decode_record(json.loads(text), source)
        sample.source, sample.line = source, self.lines[key]
        return sample


class StoredSamples(Sequence[PromptSample]):
    """A pool's prompts in order, decoded as they are read (see the module doc)."""

    def __init__(self, store: PromptStore, keys: array | range) -> None:
        self.store = store
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self.store.get(k) for k in self.keys[index]]
        return self.store.get(self.keys[index])

    def __eq__(self, other: object) -> bool:  # like the list it stands for
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


__all__ = ["PromptStore", "RecordDecoder", "StoredSamples"]
