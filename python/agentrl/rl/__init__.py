"""The RL math: packing, advantages, losses, KL control, the BC loss, optimisation.
Pure functions over tensors and masks, no file or model I/O (checkpoints and BC
demonstrations live in `agentrl.training`); the trainer loop composes them.

Each module's options live in a frozen dataclass of :func:`agentrl.utils.options.option`
fields (``OptimConfig``, ``LossConfig``, ...): the run's config is composed of them, and
``agentrl.utils.options.part`` cuts one back out of it.
"""
