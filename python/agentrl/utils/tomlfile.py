"""The one TOML reader: a file's table, or a ValueError naming the file and the cause."""

from __future__ import annotations

import os
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

__all__ = ["load_toml"]


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML document at ``path``."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from exc
