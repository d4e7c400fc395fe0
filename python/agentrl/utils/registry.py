"""Named registries: options that pick a function by name (``--loss_reduction dapo``).

A registry is a plain dict from name to function. Registering with a decorator keeps
each function next to its name, and the config takes its list of valid choices from the
dict, so adding a function is the only change needed to offer a new option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["lookup", "registrar"]

F = TypeVar("F")


def registrar(table: dict[str, F]) -> Callable[[str], Callable[[F], F]]:
    """A decorator factory: ``@register("name")`` files the function under ``name``."""

    def register(name: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            table[name] = fn
            return fn

        return add

    return register


def lookup(table: Mapping[str, F], name: str, option: str) -> F:
    """``table[name]``, or a ValueError naming the option and listing its valid values."""
    try:
        return table[name]
    except KeyError:
        known = ", ".join(table)
        raise ValueError(f"unknown {option} {name!r} ({known})") from None
