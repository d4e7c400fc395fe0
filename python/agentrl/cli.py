"""The `agentrl` command line: a thin dispatcher over `agentrl.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Subcommand modules, in the order `agentrl --help` lists them. Each is imported lazily so
# that `agentrl score` does not pay for importing torch.
COMMANDS: dict[str, tuple[str, str]] = {
    "gen-data": ("agentrl.commands.gen_data", "Generate synthetic tool-use tasks or SFT demos."),
    "sft": ("agentrl.commands.sft", "Supervised warm start on tool-use demonstrations."),
    "score": ("agentrl.commands.score", "Score trajectories (JSONL) with the tool-use reward."),
    "train": ("agentrl.commands.train", "RL training of tool use (no arguments: built-in run)."),
    "eval": ("agentrl.commands.eval", "Held-out evaluation of a policy (greedy, tool loop)."),
}


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
    name, rest = args[0], args[1:]
    module = importlib.import_module(COMMANDS[name][0])
    sub = argparse.ArgumentParser(prog=f"agentrl {name}", description=COMMANDS[name][1])
    module.add_arguments(sub)
    return int(module.run(sub.parse_args(rest)) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
