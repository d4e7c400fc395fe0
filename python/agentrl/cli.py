"""The `agentrl` command line: a thin dispatcher over `agentrl.commands`.

Option names are spelled with underscores (``--max_len``), the spelling `--help` shows;
every command also accepts the same name with dashes (``--max-len``): see
:class:`CommandParser`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

# Subcommand modules, in the order `agentrl --help` lists them. Each is imported lazily so
# that `agentrl score` does not pay for importing torch.
COMMANDS: dict[str, tuple[str, str]] = {
    "gen-data": ("agentrl.commands.gen_data", "Generate synthetic tool-use tasks or SFT demos."),
    "sft": ("agentrl.commands.sft", "Supervised warm start on tool-use demonstrations."),
    "score": ("agentrl.commands.score", "Score trajectories (JSONL) with the tool-use reward."),
    "train": ("agentrl.commands.train", "RL training of tool use (no arguments: built-in run)."),
    "eval": ("agentrl.commands.eval", "Held-out evaluation of a policy (greedy, tool loop)."),
    "view": ("agentrl.commands.view", "HTML browser of a run's episodes, curves and evals."),
}


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


def command_parser(name: str) -> tuple[CommandParser, ModuleType]:
    """The parser of one subcommand, with its options, and the module that runs it."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = CommandParser(prog=f"agentrl {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    return parser, module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrl",
        description="Reinforcement learning that teaches language models to use tools.",
    )
    from agentrl import __version__

    parser.add_argument("--version", action="version", version=f"agentrl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
        del module_name
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        parser = build_parser()
        if not args:
            parser.print_help()
            return 0
        parser.parse_args(args)  # prints usage and exits for unknown commands and --help
        return 0
    parser, module = command_parser(args[0])
    return int(module.run(parser.parse_args(args[1:])) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
