"""Checks of the paths a command was given, done before any work that would be lost.

A run loads its model and data (minutes, sometimes) before it writes anything; a save
directory that turns out to be a file or read-only, or a data file that is not there,
must fail first, in one line naming the option, and without having created anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrl.errors import UsageError


def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its closest existing ancestor."""
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_creatable_dir(path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UsageError` unless ``path`` is, or can be made as, a writable directory.

    Creates nothing. ``what`` names the option the path comes from (e.g. ``--save_dir``).
    """
    target = Path(path).absolute()
    existing = nearest_existing(target)
    if existing == target:
        if not target.is_dir():
            raise UsageError(f"{what}: {path} exists and is not a directory")
        if not os.access(target, os.W_OK | os.X_OK):
            raise UsageError(f"{what}: directory {path} is not writable")
        return
    if not existing.is_dir():
        raise UsageError(f"{what}: cannot create {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot create {path}: directory {existing} is not writable")


def check_readable_file(path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UsageError` unless ``path`` is a readable file (``what``: its option)."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{what}: {path} is a directory, not a file")
    if not target.is_file():
        raise UsageError(f"{what}: {path}: no such file")
    if not os.access(target, os.R_OK):
        raise UsageError(f"{what}: {path} is not readable")


def check_writable_file(path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UsageError` unless a file can be written at ``path``: it is not a
    directory, and its directory exists or can be made, writable. Creates nothing."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{what}: {path} is a directory; name the file to write")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{what}: {path} is not writable")
    existing = nearest_existing(target.absolute().parent)
    if not existing.is_dir():
        raise UsageError(f"{what}: cannot write {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot write {path}: directory {existing} is not writable")


__all__ = ["check_creatable_dir", "check_readable_file", "check_writable_file", "nearest_existing"]
