"""How a component declares its options: once, next to the code that reads them.

Each part of agentrl that reads options owns a small frozen dataclass (``OptimConfig`` in
``agentrl.rl.optim``, ``RolloutConfig`` in ``agentrl.rollout.options``, ...) whose fields
are :func:`option` declarations: the default, the help text, the allowed values and the
range the value must lie in. ``agentrl.config.TrainConfig`` is composed of those
dataclasses, and the command-line flags, the TOML sections and ``--help`` are generated
from the same fields, so a default is written in exactly one place.

A component receives the run's config as itself (``TrainConfig`` is a subclass of each
component dataclass) or, when it wants a small object of its own type, as
``part(OptimConfig, config)``.

``common=True`` puts an option on the front page of ``--help`` (the options people change
most); every option is listed by ``--help SECTION`` and ``--help_all``. One checker
(:func:`check_value`) and one text parser (:func:`text_type`) serve every option, the
command line, TOML files and ``agentrl score --set`` alike.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator
from dataclasses import Field, field, fields, is_dataclass
from typing import Any, TypeVar

__all__ = [
    "CHECKS",
    "check_value",
    "is_option",
    "option",
    "option_fields",
    "parse_text",
    "part",
    "str2bool",
    "str2flag",
    "text_type",
]

T = TypeVar("T")

# Range checks an option may declare, with the words the error uses.
CHECKS: dict[str, tuple[Any, str]] = {
    ">=1": (lambda v: v >= 1, "at least 1"),
    ">=0": (lambda v: v >= 0, "0 or more"),
    ">0": (lambda v: v > 0, "a positive number"),
    "[0,1]": (lambda v: 0.0 <= v <= 1.0, "a value in [0, 1]"),
    "(0,1]": (lambda v: 0.0 < v <= 1.0, "a value in (0, 1]"),
    ">=-1": (lambda v: v >= -1, "-1 (derived) or 0 or more"),
    ">=2": (lambda v: v >= 2, "at least 2"),
}


# The choices of an integer option that is a switch (the reward's 0/1 settings): it takes
# true/false too, and keeps the value an integer (what the Rust scorer reads).
FLAG = (0, 1)


def option(
    default: Any,
    doc: str,
    choices: tuple[Any, ...] = (),
    *,
    check: str = "",
    flags: tuple[str, ...] = (),
    common: bool = False,
) -> Any:
    """A dataclass field that is a user-facing option.

    ``choices``: the accepted values (a registry's names, usually; :data:`FLAG` for a 0/1
    switch); ``check``: one of :data:`CHECKS`; ``flags``: extra command-line spellings
    (``--data`` for ``data_path``); ``common``: on the front page of ``--help``.
    """
    if check and check not in CHECKS:
        raise ValueError(f"unknown option check {check!r}; checks: {', '.join(CHECKS)}")
    metadata = {
        "option": True,
        "doc": doc,
        "choices": choices,
        "check": check,
        "flags": flags,
        "common": common,
    }
    return field(default=default, metadata=metadata)


def is_option(f: Field[Any]) -> bool:
    return bool(f.metadata.get("option"))


def option_fields(cls: type) -> Iterator[Field[Any]]:
    """The option fields a component dataclass declares itself (not inherited ones)."""
    own = vars(cls).get("__annotations__", {})
    for f in fields(cls):
        if f.name in own and is_option(f):
            yield f


def part(cls: type[T], source: Any, **changes: Any) -> T:
    """A ``cls`` instance holding ``source``'s values of ``cls``'s fields (``changes`` win).

    ``source`` is the run's config (or any object or mapping with those names); this is the
    one way the composed config is cut back into a component's own options.
    """
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    values: dict[str, Any] = {}
    for f in fields(cls):
        if not f.init:
            continue
        if isinstance(source, dict):
            if f.name in source:
                values[f.name] = source[f.name]
        elif hasattr(source, f.name):
            values[f.name] = getattr(source, f.name)
    values.update(changes)
    return cls(**values)


def check_value(name: str, f: Field[Any], value: Any) -> Any:
    """``value`` normalised to the option's type (0/1 accepted for a boolean, an int for a
    float), or a ValueError naming the option and what it expects."""

    def fail(expected: str) -> ValueError:
        return ValueError(f"option {name}={value!r}: expected {expected}")

    kind = type(f.default)
    if kind is bool:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int) and value in (0, 1):
            value = bool(value)
        else:
            raise fail("true or false (or 1 / 0)")
    elif kind is int:
        if isinstance(value, bool) and _is_flag(f):
            value = int(value)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise fail("an integer")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail("a number")
        if not math.isfinite(value):
            raise fail("a finite number")
        value = float(value)
    elif kind is str and not isinstance(value, str):
        raise fail("a string")
    choices = f.metadata.get("choices") or ()
    if choices and value not in choices:
        raise fail("one of " + ", ".join(map(str, choices)))
    check = f.metadata.get("check")
    if check:
        ok, words = CHECKS[check]
        if not ok(value):
            raise fail(words)
    return value


def _is_flag(f: Field[Any]) -> bool:
    return type(f.default) is int and tuple(f.metadata.get("choices") or ()) == FLAG


def text_type(f: Field[Any]) -> Callable[[str], Any]:
    """How a written value (a command-line flag, ``--set name=value``) becomes the option's
    type; :func:`check_value` then checks it."""
    kind = type(f.default)
    if kind is bool:
        return str2bool
    if _is_flag(f):
        return str2flag
    return kind if kind in (int, float) else str


def parse_text(name: str, f: Field[Any], text: str) -> Any:
    """``text`` as option ``name``'s value, checked; a ValueError names the option."""
    try:
        value = text_type(f)(text)
    except (ValueError, argparse.ArgumentTypeError):
        kind = type(f.default)
        expected = (
            "true or false (or 1 / 0)"
            if kind is bool or _is_flag(f)
            else {int: "an integer", float: "a number"}.get(kind, "a string")
        )
        raise ValueError(f"option {name}={text!r}: expected {expected}") from None
    return check_value(name, f, value)


def str2flag(text: str) -> int:
    """A command-line 0/1 switch: what :func:`str2bool` takes, as 1 or 0."""
    return int(str2bool(text))


def str2bool(text: str) -> bool:
    """A command-line boolean: true/false, yes/no, on/off, 1/0."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on", "y", "t"):
        return True
    if lowered in ("0", "false", "no", "off", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {text!r}")
