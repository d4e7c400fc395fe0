"""Objects that a ``with`` block closes: servers, sandboxes, served policies."""

from __future__ import annotations

from typing import TypeVar

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    """A mixin: ``with obj:`` hands back ``obj`` and calls its :meth:`close` on the way
    out, error or not. Subclasses define :meth:`close`."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Closing"]
