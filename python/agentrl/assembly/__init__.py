"""The floor that assembles a run: the one place below the trainer that reads the whole run
config.

It builds, each from its own part of the config, what the training loop then runs over:
the models and the warm start (`models`), the task's tools, rewards and episode limits
(`task`), the prompts (`prompts`), the rollout engine (`engines`) and source (`sources`),
the step's settings (`settings`), the evaluation (`evaluation`) and the run's log
(`run_log`); :func:`agentrl.assembly.parts.build_run_parts` puts them together in the
order they depend on each other. The pieces it builds (`agentrl.training`, `agentrl.sft`,
`agentrl.rollout`, ...) never read the run config themselves, and nothing below this floor
imports it.
"""
