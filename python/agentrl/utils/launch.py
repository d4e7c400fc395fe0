"""How this process was started: alone, or as one rank of ``torchrun``.

Read from the environment ``torchrun`` sets, so that any layer can ask before (or without)
joining a process group.
"""

from __future__ import annotations

import os


def launched_by_torchrun(one_rank_too: bool = False) -> bool:
    """Started by ``torchrun`` with several ranks (or, with ``one_rank_too``, with one:
    FSDP on one GPU still needs the process group)."""
    if "RANK" not in os.environ:
        return False
    return one_rank_too or int(os.environ.get("WORLD_SIZE", "1")) > 1


__all__ = ["launched_by_torchrun"]
