"""Objects named on a command line as ``pkg.module:attribute``.

Users hand their own tools, reward functions and environments to `agentrl train` by
import path; a path that does not resolve must say which part failed (the module, or
the attribute inside it), not surface as a bare ``ImportError`` deep in a run.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any


class ImportPathError(ValueError):
    """An import path that is malformed, names a missing module or a missing attribute."""


def load_object(path: str) -> Any:
    """The object at ``pkg.module:attribute`` (the attribute may be dotted: ``mod:Cls.fn``).

    Modules are found on ``sys.path`` and in the current directory, as for ``python -m``:
    ``agentrl train --environment examples.shop:ShopEnv`` works from the repository root.
    """
    module_name, sep, attribute = path.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise ImportPathError(f"{path!r}: expected 'package.module:attribute'")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportPathError(
            f"{path!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from exc
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ImportPathError(
                f"{path!r}: module {module_name!r} has no attribute {attribute!r}"
            )
        value = getattr(value, part)
    return value


def require_module(name: str, error: Callable[[str], Exception], message: str) -> Any:
    """The optional package ``name``, imported; when it is missing, ``error(message)`` is
    raised from the ImportError (``{exc}`` in ``message`` stands for that error's text), so
    that the user reads which extra to install instead of a bare ``ModuleNotFoundError``."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise error(message.format(exc=exc)) from exc


def split_list(text: str, separator: str = ",") -> list[str]:
    """The non-empty, stripped items of a separated list (``"a, b,"`` -> ``["a", "b"]``)."""
    return [item.strip() for item in text.split(separator) if item.strip()]


def lazy_attributes(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that imports ``exports[name]``'s module on first
    use: a package can list its whole API while importing only what a command needs."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


__all__ = ["ImportPathError", "lazy_attributes", "load_object", "require_module", "split_list"]
