"""Reading the loosely shaped fields of datasets and requests.

One rule is shared by every list-of-objects field agentrl reads (a record's tools or
functions, an assistant's ``tool_calls``): one object stands for a list of one.
"""

from __future__ import annotations

from typing import Any


def object_list(value: Any) -> list[Any] | None:
    """``value`` as a list: a list as it is, one object (a dict) as a list of it; None for
    any other value (the caller says what was wrong)."""
    if isinstance(value, dict):
        return [value]
    return value if isinstance(value, list) else None


__all__ = ["object_list"]
