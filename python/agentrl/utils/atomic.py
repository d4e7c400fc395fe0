"""Directories that appear whole or not at all: written under a temporary name, then renamed.

Checkpoints, published rollout weights and exported policies are all read by something
that must never see a half-written directory (a resume, an inference server, a person).
Each is filled under ``.tmp-<name>-<pid>`` beside its final place and renamed into place
when complete. A directory already at the final name is moved aside first and removed
afterwards, so the final name always holds one complete version. Temporary names start
with ``.tmp-`` so listings of complete versions never match them.

A write that fails on the way (a full disk, no permission, a directory that vanished) is
a :class:`agentrl.errors.SaveError` naming the final path and the cause (:func:`saving`),
the exit-1 one-line failure of the command line, not the bug that torch's own wording
(``[enforce fail at inline_container.cc]``) would make of it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentrl.errors import SaveError

# What torch's writer says when the file under it failed (the OSError is lost or only
# chained): `[enforce fail at inline_container.cc:...] . unexpected pos ...`.
_TORCH_WRITE_FAILED = ("inline_container.cc", "PytorchStreamWriter", "iostream error")
# Rust writers (safetensors): `... I/O error: No space left on device (os error 28)`, or
# `IoError(Os { code: 28, kind: StorageFull, ...`.
_RUST_IO_ERROR = re.compile(r"\(os error (\d+)\)|IoError\(Os \{ code: (\d+)")


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError an exception is, or was raised while handling (torch wraps them)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _free_bytes(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        try:
            stats = os.statvfs(candidate)
        except OSError:
            continue
        return stats.f_bavail * stats.f_frsize
    return None


def save_failure(path: str | os.PathLike[str], exc: BaseException) -> SaveError | None:
    """The one-line :class:`SaveError` for an I/O failure while writing ``path``; None when
    ``exc`` is not one (a bug stays a bug)."""
    if isinstance(exc, SaveError):
        return exc
    error = _os_error(exc)
    if error is not None:
        cause = error.strerror or str(error) or type(error).__name__
        if error.filename is not None and os.fsdecode(error.filename) != os.fspath(path):
            cause = f"{cause} ({os.fsdecode(error.filename)})"
    elif (code := _RUST_IO_ERROR.search(str(exc))) is not None:  # safetensors' IoError
        cause = os.strerror(int(code.group(1) or code.group(2)))
    elif isinstance(exc, RuntimeError) and any(m in str(exc) for m in _TORCH_WRITE_FAILED):
        free = _free_bytes(Path(path))
        cause = "write failed" + ("" if free is None else f" ({free} bytes free on its disk)")
        if free is not None and free < (1 << 20):
            cause = "No space left on device"
    else:
        return None
    return SaveError(f"cannot save {os.fspath(path)}: {cause}")


@contextmanager
def saving(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an I/O failure inside the block into a :class:`SaveError` naming ``path``."""
    try:
        yield
    except Exception as exc:
        failure = save_failure(path, exc)
        if failure is None or failure is exc:
            raise
        raise failure from exc


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


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc``; elsewhere set and put
    back at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(root: Path) -> None:
    """Give every file at or below ``root`` the mode ``open()`` would (``0o666`` less the
    umask): writers such as safetensors' create their files 0600, which would leave a
    saved model unreadable to the group and others that can read its config beside it."""
    mode = 0o666 & ~current_umask()
    for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


def replace_dir(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` is moved aside, then removed."""
    if final.exists():
        old = final.with_name(f".tmp-old-{final.name}-{os.getpid()}")
        os.rename(final, old)
        try:
            os.rename(tmp, final)
        except BaseException:
            os.rename(old, final)  # the complete version stays under its name
            raise
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
    with saving(final):
        tmp.mkdir()
    try:
        with saving(final):
            yield tmp
            follow_umask(tmp)
            if sync:
                fsync_tree(tmp)
            replace_dir(tmp, final)
            if sync:
                fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def atomic_file(final: str | os.PathLike[str], *, sync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; on success it replaces ``final``.

    Every file agentrl writes that a reader may open at any moment (metrics, reports,
    dumps, viewer pages, exported weights, generated data) goes through here: a reader
    sees the old file or the new one, never half of one. A failure on the way removes the
    temporary file, leaves ``final`` as it was and is a :class:`SaveError` naming it.
    """
    out = Path(final)
    tmp = out.with_name(f".tmp-{out.name}-{os.getpid()}")
    try:
        with saving(out):
            yield tmp
            follow_umask(tmp)
            if sync:
                with open(tmp, "rb") as handle:
                    os.fsync(handle.fileno())
            os.replace(tmp, out)
            if sync:
                fsync_dir(out.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """``path`` holds ``text`` (UTF-8), written through :func:`atomic_file`."""
    out = Path(path)
    with atomic_file(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out


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
    "atomic_file",
    "complete_numbered_dirs",
    "current_umask",
    "follow_umask",
    "fsync_dir",
    "fsync_tree",
    "remove_stale_temps",
    "replace_dir",
    "save_failure",
    "saving",
    "write_text_atomic",
]
