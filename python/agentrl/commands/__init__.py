"""Subcommands of the `agentrl` CLI, one module each.

Each module defines ``add_arguments(parser)`` and ``run(args) -> int``: it parses the
command line, calls one library function and prints the result; the work itself lives in
the library (`agentrl.sft.pipeline`, `agentrl.training.evaluation`,
`agentrl.rewards.score_file`, `agentrl.data.synthetic`, the trainer).
"""
