"""One owner per run directory: an exclusive lock taken before a run writes anything there.

Two runs writing one directory interleave `metrics.jsonl`, share checkpoints and delete
each other's temporary files. `agentrl train` and `agentrl sft` therefore hold
``<run dir>/.agentrl.lock`` for their whole life: an ``flock`` on the file (the kernel
drops it when the process dies, however it dies) and the holder's PID and host written in
it, so a refused second run can say who holds the directory.

A lock file whose ``flock`` is free but that still names a process was left by a process
that died without cleaning up (SIGKILL, a crash, a lost node): it is taken over, and the
caller is told whose it was. A clean exit removes the file, and the run directory too when
the lock was all that was in it (a run that stopped before writing anything leaves nothing).

The lock is advisory and local: filesystems without ``flock`` (some network mounts) make
it ineffective across hosts, never a failure.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from collections.abc import Callable
from pathlib import Path

from agentrl.errors import UserError
from agentrl.utils.atomic import saving

LOCK_NAME = ".agentrl.lock"

# Paths this process holds (a process may nest runs: the RL run trains its warm start).
_HELD: dict[Path, int] = {}


class RunDirLocked(UserError):
    """Another live process holds the run directory."""


def _describe(text: str) -> str:
    """``PID 123 on host``, from the lock file's contents (``pid host``)."""
    pid, _, host = text.strip().partition(" ")
    if not pid:
        return "an unknown process"
    return f"PID {pid} on {host or 'an unknown host'}"


class RunLock:
    """Hold ``directory``'s lock while the ``with`` block runs (re-entrant in one process).

    ``log`` hears of a stale lock taken over. Raises :class:`RunDirLocked` when another
    live process holds it, naming that process.
    """

    def __init__(self, directory: str | os.PathLike[str], log: Callable[[str], None] = print):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self.log = log
        self.fd: int | None = None
        self.created: list[Path] = []  # directories made for the lock, deepest first
        self.nested = False

    def acquire(self) -> RunLock:
        key = self.path.absolute()
        if key in _HELD:
            self.nested = True
            return self
        missing = [p for p in (self.directory, *self.directory.parents) if not p.exists()]
        self.directory.mkdir(parents=True, exist_ok=True)
        self.created = missing
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _describe(os.pread(fd, 256, 0).decode("utf-8", "replace"))
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                self._undo_dir()
                raise RunDirLocked(
                    f"{self.directory} is in use by another run ({holder}; lock {self.path}): "
                    "wait for it to finish, stop it, or choose another run directory"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # its holder removed the file as we opened it: lock the new one
                os.close(fd)
                continue
            break
        previous = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
        if previous:
            self.log(
                f"{self.directory}: taking over the lock left by {_describe(previous)}, "
                "which is no longer running"
            )
        try:
            with saving(self.path):  # a full disk: one line naming the lock file, exit 1
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
            self._undo_dir()
            raise
        self.fd = fd
        _HELD[key] = fd
        return self

    def release(self) -> None:
        if self.nested or self.fd is None:
            return
        _HELD.pop(self.path.absolute(), None)
        with contextlib.suppress(OSError):  # unlinked while locked: an opener retries
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None
        self._undo_dir()

    def _undo_dir(self) -> None:
        """Remove the directories made for the lock while they hold no file: a run that
        could not start (a full disk) leaves no empty ``run/`` or ``run/data/`` behind."""
        for directory in self.created:
            if any(p.is_file() or p.is_symlink() for p in directory.rglob("*")):
                break
            for parent, _, _ in os.walk(directory, topdown=False):  # rmdir: a file written
                with contextlib.suppress(OSError):  # meanwhile stays, with its directories
                    os.rmdir(parent)
            if directory.exists():
                break
        self.created = []

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["LOCK_NAME", "RunDirLocked", "RunLock"]
