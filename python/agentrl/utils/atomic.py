"""Directories that appear whole or not at all: written under a temporary name, then renamed.

Checkpoints, published rollout weights and exported policies are all read by something
that must never see a half-written directory (a resume, an inference server, a person).
Each is filled under ``.tmp-<name>-<pid>`` beside its final place and renamed into place
when complete. A directory already at the final name is moved aside first and removed
afterwards, so the final name always holds one complete version. Temporary names start
with ``.tmp-`` so listings of complete versions never match them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """Flush every file below ``root``, then ``root`` itself."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    fsync_dir(root)


def remove_stale_temps(root: Path, prefix: str) -> None:
    """Remove temporary directories named ``prefix*`` that a crash mid-write left in ``root``."""
    for stale in [*root.glob(f".tmp-{prefix}*"), *root.glob(f".tmp-old-{prefix}*")]:
        shutil.rmtree(stale, ignore_errors=True)


def replace_dir(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` is moved aside, then removed."""
    if final.exists():
        old = final.with_name(f".tmp-old-{final.name}-{os.getpid()}")
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)


@contextmanager
def atomic_dir(final: Path, *, sync: bool = False) -> Iterator[Path]:
    """Yield an empty temporary directory; on success it becomes ``final``.

    ``sync``: fsync the written files and the directories before and after the rename,
    for writers whose output must survive a power loss. On an exception the temporary
    directory is removed and ``final`` is left as it was.
    """
    tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if sync:
            fsync_tree(tmp)
        replace_dir(tmp, final)
        if sync:
            fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def complete_numbered_dirs(
    root: str | os.PathLike[str], pattern: re.Pattern[str], required: Iterable[str]
) -> list[tuple[int, Path]]:
    """``(number, path)`` of the subdirectories of ``root`` named by ``pattern``, oldest first.

    ``pattern``'s first group is the number; a directory counts only when every file in
    ``required`` is in it (a missing root has none).
    """
    root = Path(root)
    if not root.is_dir():
        return []
    needed = list(required)
    found = []
    for child in root.iterdir():
        m = pattern.match(child.name)
        if m and all((child / name).is_file() for name in needed):
            found.append((int(m.group(1)), child))
    return sorted(found)


__all__ = [
    "atomic_dir",
    "complete_numbered_dirs",
    "fsync_dir",
    "fsync_tree",
    "remove_stale_temps",
    "replace_dir",
]
