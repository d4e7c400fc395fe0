"""Failures the user caused and can fix, and the exit codes the command line gives them.

Library code raises :class:`UserError` (or a subclass) for a problem in what it was given:
a bad option, a missing or unusable file, a model or data set it cannot use. The message
is the whole report: one line naming the file, line or option and what is wrong with it,
so the command line prints it as is, without a traceback. Any other exception escaping a
command is a bug in agentrl and is reported as one, traceback included.

Exit codes (`agentrl --help` and the README list them):

- ``0``: done;
- ``1``: what was given was found but cannot be used (an invalid model file, a data file
  with no usable record, a checkpoint that does not fit the model), or the work failed on
  the way through no fault in agentrl (disk full, a rollout server or another rank that
  failed, an optional package not installed), or the user's own code failed (a
  :class:`UserCodeError`: ``SystemExit`` and a ``KeyboardInterrupt`` of its own too, see
  :func:`call_user_code`); ``agentrl score`` also exits 1 when it skipped lines, and
  ``agentrl view`` when it skipped a damaged dump file;
- ``2``: the command line or the configuration is wrong: an unknown option, an invalid
  value, a bad config file, or a path that cannot be used as given (missing, a file where
  a directory is needed, no permission);
- ``70``: an unexpected error, that is a bug in agentrl (the traceback is printed);
- ``130`` / ``143``: stopped by SIGINT / SIGTERM (``agentrl train`` saves a checkpoint
  first), the shell's ``128 + signal number``.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import sysconfig
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2
EXIT_BUG = 70  # sysexits.h EX_SOFTWARE: an internal software error
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM

# OS errors that say "this path cannot be used as given": the command line is wrong.
PATH_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.EROFS,
        errno.ENAMETOOLONG,
        errno.ELOOP,
    }
)
# OS errors of a run that failed on the way, through no fault in the code.
RUNTIME_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, stripped; empty when the exception's own ``__str__`` fails (a user's
    exception class may have a broken one: reporting it must not fail too)."""
    try:
        return str(exc).strip()
    except Exception:
        return ""


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """An exception's message on one line (libraries add context lines, compilers whole
    logs), at most ``limit`` characters; the exception's type name when it has none."""
    text = exception_text(exc)
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if limit is None else line[:limit]


def signal_exit_code(signum: int) -> int:
    """The exit code of a process that stopped because of signal ``signum``."""
    return 128 + int(signum)


class UserError(Exception):
    """A problem in what the user gave (file, data, model, directory); its message says
    which and what, in one line. Exit code :data:`EXIT_DATA` unless a subclass says."""

    exit_code: int = EXIT_DATA


class RecurringError(UserError):
    """A `UserError` that the same work raises again on every retry (a model that cannot
    be compiled, say): a loop that retries failed work stops on it instead."""


class SaveError(UserError):
    """Writing a run's files failed on the way: a full disk, no permission, a read-only or
    vanished directory. The message names the path and the cause; what was saved before
    stays whole (see `agentrl.utils.atomic.saving`)."""


class UsageError(UserError, ValueError):
    """A wrong command line or configuration (option name or value, config file, a path
    that cannot be used as given); a ``ValueError`` too, as the invalid value it is.
    Exit code :data:`EXIT_USAGE`."""

    exit_code = EXIT_USAGE


class UserCodeError(RecurringError):
    """An exception raised by the user's own code (a reward function, an environment, a
    tool loaded at run time): the message names that code, its file and line, and the
    exception on one line. Exit code :data:`EXIT_DATA`. A recurring error: background
    rollout stops on it and hands it to the trainer instead of retrying the same code."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(d + os.sep for d in dirs))


def code_location(code: Any) -> str | None:
    """``file:line`` where a function (or a class, or a callable object) is defined."""
    target = getattr(code, "__func__", code)
    if not hasattr(target, "__code__") and not isinstance(target, type) and callable(target):
        target = type(target).__call__
    target = getattr(target, "__func__", target)
    function_code = getattr(target, "__code__", None)
    if function_code is not None:
        return f"{function_code.co_filename}:{function_code.co_firstlineno}"
    module = getattr(target, "__module__", None)
    return module


def raise_location(exc: BaseException) -> str | None:
    """``file:line`` of the deepest frame of ``exc``'s traceback in neither agentrl nor an
    installed library (the user's line that raised, or that called the library which
    raised); None if there is none."""
    skip = (_PACKAGE_DIR + os.sep, *_library_dirs())
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not os.path.abspath(frame.filename).startswith(skip):
            found = f"{frame.filename}:{frame.lineno}"
    return found


def user_code_error(exc: BaseException, what: str, code: Any = None) -> UserCodeError:
    """A :class:`UserCodeError` for ``exc``, raised by ``what`` (say ``"reward function
    'f'"``), located at the line that raised it (or where ``code`` is defined)."""
    where = raise_location(exc) or (code_location(code) if code is not None else None)
    at = f" at {where}" if where else ""
    return UserCodeError(f"{what} raised {type(exc).__name__}{at}: {first_line(exc)}")


class Interrupted(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` of a real Ctrl-C: what agentrl's SIGINT handlers raise
    (:func:`interrupt`, `agentrl.training.signals`), told apart from a
    ``KeyboardInterrupt`` that user code raises itself, which is an error in that code."""


def interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """A SIGINT handler raising :class:`Interrupted` (the command line installs it)."""
    raise Interrupted


def from_signal(exc: BaseException) -> bool:
    """Whether ``exc`` is a stop asked for with a signal rather than user code's own
    ``raise``: an :class:`Interrupted`, or a ``KeyboardInterrupt`` while SIGINT has
    Python's default handler (library use: its interrupts cannot be told apart)."""
    if isinstance(exc, Interrupted):
        return True
    default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    return isinstance(exc, KeyboardInterrupt) and default


def call_user_code(what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``, where ``function`` may be the user's: anything it
    raises, ``SystemExit``, ``GeneratorExit`` and a ``KeyboardInterrupt`` of its own
    included (a real Ctrl-C passes, see :func:`from_signal`), is a :class:`UserCodeError`
    naming ``what`` and the line that raised, so that no user ``exit()`` ends a command
    as a success. A function defined in agentrl is called as it is."""
    if not is_user_code(function):
        return function(*args, **kwargs)
    try:
        return function(*args, **kwargs)
    except BaseException as exc:
        if from_signal(exc):
            raise
        raise user_code_error(exc, what, function) from exc


def is_user_code(code: Any) -> bool:
    """Whether ``code`` (a function, class or callable object, a ``functools.partial`` of
    one) is defined outside agentrl."""
    target = getattr(code, "__func__", code)
    while isinstance(target, functools.partial):
        target = target.func
    module = getattr(target, "__module__", None) or type(target).__module__
    return not str(module).startswith("agentrl.") and module != "agentrl"


__all__ = [
    "EXIT_BUG",
    "EXIT_DATA",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_USAGE",
    "PATH_ERRNOS",
    "RUNTIME_ERRNOS",
    "Interrupted",
    "RecurringError",
    "SaveError",
    "UsageError",
    "UserCodeError",
    "UserError",
    "call_user_code",
    "code_location",
    "exception_text",
    "first_line",
    "from_signal",
    "interrupt",
    "is_user_code",
    "raise_location",
    "signal_exit_code",
    "user_code_error",
]
