"""Objects that a ``with`` block closes: servers, sandboxes, served policies."""

from __future__ import annotations

import abc
from typing import TypeVar

_Self = TypeVar("_Self", bound="Closing")


class Closing(abc.ABC):
    """A base: ``with obj:`` hands back ``obj`` and calls its :meth:`close` on the way
    out, error or not. A subclass without :meth:`close` cannot be made."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the object holds (called once by ``with``; safe to call again)."""

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Closing"]
