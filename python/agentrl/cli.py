"""The `agentrl` command line: a thin dispatcher over `agentrl.commands`.

Option names are spelled with underscores (``--max_len``), the spelling `--help` shows;
every command also accepts the same name with dashes (``--max-len``): see
:class:`CommandParser`.

Failures: a problem the user caused (:class:`agentrl.errors.UserError`, or a file that is
missing, unreadable or in the way) is one line on stderr, ``agentrl CMD: error: ...``, and
the exit code of :mod:`agentrl.errors`; anything else is a bug and prints its traceback.
``agentrl --debug CMD`` (or ``AGENTRL_DEBUG=1``) prints the traceback of every failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from agentrl.errors import (
    EXIT_BUG,
    EXIT_DATA,
    EXIT_SIGINT,
    EXIT_USAGE,
    PATH_ERRNOS,
    RUNTIME_ERRNOS,
    UserError,
    interrupt,
)

# Subcommand modules, in the order `agentrl --help` lists them. Each is imported lazily so
# that `agentrl score` does not pay for importing torch.
COMMANDS: dict[str, tuple[str, str]] = {
    "gen-data": ("agentrl.commands.gen_data", "Generate synthetic tool-use tasks or SFT demos."),
    "sft": ("agentrl.commands.sft", "Supervised warm start on tool-use demonstrations."),
    "score": (
        "agentrl.commands.score",
        "Score trajectories (JSONL) with the tool-use or function_call reward.",
    ),
    "train": ("agentrl.commands.train", "RL training of tool use (no arguments: built-in run)."),
    "eval": ("agentrl.commands.eval", "Held-out evaluation of a policy (greedy, tool loop)."),
    "serve": (
        "agentrl.commands.serve",
        "Serve a policy on an OpenAI-compatible endpoint (chat with tool calls, completions).",
    ),
    "view": ("agentrl.commands.view", "HTML browser of a run's episodes, curves and evals."),
}


DEBUG_FLAG = "--debug"
DEBUG_ENV = "AGENTRL_DEBUG"
EXIT_CODES_HELP = (
    "Exit codes: 0 done; 1 a model, data or checkpoint file that cannot be used, a run "
    "that failed on the way, or your own code that failed (named with its line; score, "
    "view: lines or dumps were skipped); 2 wrong command line or "
    "configuration, or a path that cannot be used as given (missing, not a directory, no "
    "permission); 70 internal error, a bug (traceback printed); 130/143 stopped by "
    "SIGINT/SIGTERM"
)


def normalize_option_spelling(argv: Sequence[str]) -> list[str]:
    """``--a-b[=v]`` becomes ``--a_b[=v]``; values, short flags and all after ``--`` stay."""
    out: list[str] = []
    for index, token in enumerate(argv):
        if token == "--":
            return out + list(argv[index:])
        if token.startswith("--") and len(token) > 2:
            name, sep, value = token[2:].partition("=")
            token = "--" + name.replace("-", "_") + sep + value
        out.append(token)
    return out


class CommandParser(argparse.ArgumentParser):
    """An argument parser that accepts ``--a-b`` for every option declared as ``--a_b``."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = sys.argv[1:] if args is None else args
        return super().parse_known_args(normalize_option_spelling(argv), namespace)

    def error(self, message: str) -> NoReturn:
        """One line, not the usage of every option (`agentrl train` has over a hundred)."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def command_parser(name: str) -> tuple[CommandParser, ModuleType]:
    """The parser of one subcommand, with its options, and the module that runs it."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = CommandParser(
        prog=f"agentrl {name}", description=COMMANDS[name][1], epilog=EXIT_CODES_HELP
    )
    module.add_arguments(parser)
    return parser, module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrl",
        description="Reinforcement learning that teaches language models to use tools.",
        epilog=EXIT_CODES_HELP,
    )
    from agentrl import __version__

    parser.add_argument("--version", action="version", version=f"agentrl {__version__}")
    parser.add_argument(
        DEBUG_FLAG,
        action="store_true",
        help=f"print the traceback of every failure (also after the command; or {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
        del module_name
    return parser


def user_failure(exc: BaseException) -> tuple[int, str] | None:
    """(exit code, one-line message) for a failure the user caused; None for a bug."""
    if isinstance(exc, UserError):
        return exc.exit_code, str(exc)
    if isinstance(exc, OSError) and exc.errno in PATH_ERRNOS | RUNTIME_ERRNOS:
        paths = [p for p in (exc.filename, exc.filename2) if p is not None]
        where = " -> ".join(os.fsdecode(p) for p in paths)
        reason = exc.strerror or str(exc)
        code = EXIT_USAGE if exc.errno in PATH_ERRNOS else EXIT_DATA
        return code, f"{where}: {reason}" if where else reason
    return None


def debug_requested() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def run_command(name: str, argv: Sequence[str], debug: bool = False) -> int:
    """Run one subcommand; every failure becomes one line and an exit code (see module doc)."""
    prog = f"agentrl {name}"
    # Ctrl-C raises `Interrupted`: a KeyboardInterrupt that user code raises is its error.
    # (Only in place of Python's own handler: an ignored SIGINT, a background job's, stays.)
    main_thread = threading.current_thread() is threading.main_thread()
    own = main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    previous = signal.signal(signal.SIGINT, interrupt) if own else None
    try:
        parser, module = command_parser(name)
        args = parser.parse_args(argv)  # --help and usage errors exit here
        try:
            return int(module.run(args) or 0)
        except (SystemExit, GeneratorExit) as exc:  # user code's is a UserCodeError by now
            raise RuntimeError(f"{type(exc).__name__} escaped {prog}: never a success") from exc
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except Exception as exc:
        failure = user_failure(exc)
        if failure is None:
            traceback.print_exc()
            print(
                f"{prog}: internal error ({type(exc).__name__}): this is a bug in agentrl; "
                "please report it with the traceback above",
                file=sys.stderr,
            )
            return EXIT_BUG
        if debug:
            traceback.print_exc()
        code, message = failure
        print(f"{prog}: error: {message}", file=sys.stderr)
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def take_debug_flag(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """Whether ``--debug`` is among the options (before or after the command), and the
    arguments without it; what follows ``--`` is left alone."""
    end = list(argv).index("--") if "--" in argv else len(argv)
    options = [token for token in argv[:end] if token != DEBUG_FLAG]
    return len(options) < end, options + list(argv[end:])


def main(argv: Sequence[str] | None = None) -> int:
    given, args = take_debug_flag(sys.argv[1:] if argv is None else argv)
    debug = given or debug_requested()
    if not args or args[0] not in COMMANDS:
        parser = build_parser()
        if not args:
            parser.print_help()
            return 0
        parser.parse_args(args)  # prints usage and exits for unknown commands and --help
        return 0
    return run_command(args[0], args[1:], debug)


if __name__ == "__main__":
    raise SystemExit(main())
