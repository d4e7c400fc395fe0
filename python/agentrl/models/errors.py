"""Errors raised while loading or exporting policies.

All derive from `ModelLoadError` (a `ValueError`, and a :class:`agentrl.errors.UserError`
so the command line reports it in one line) so callers can catch one type, while tests and
users can tell the three common failures apart by class and by message.
"""

from __future__ import annotations

from agentrl.errors import EXIT_USAGE, UserError


class ModelLoadError(UserError, ValueError):
    """A model spec could not be turned into a model and tokenizer."""


class CheckpointNotFoundError(ModelLoadError, FileNotFoundError):
    """A file or directory named by the spec does not exist or lacks a required file."""

    exit_code = EXIT_USAGE  # the spec names nothing usable: the command line is wrong


class ShapeMismatchError(ModelLoadError):
    """A checkpoint tensor does not have the shape the model built for it expects."""

    def __init__(
        self,
        name: str,
        checkpoint_shape: tuple[int, ...],
        model_shape: tuple[int, ...],
        source: str,
        others: int = 0,
    ) -> None:
        self.name = name
        self.checkpoint_shape = tuple(checkpoint_shape)
        self.model_shape = tuple(model_shape)
        more = f" (and {others} more mismatched tensors)" if others else ""
        super().__init__(
            f"{source}: tensor '{name}' has shape {self.checkpoint_shape} in the checkpoint "
            f"but the model expects {self.model_shape}{more}"
        )


class UnsupportedArchitectureError(ModelLoadError):
    """The checkpoint describes an architecture agentrl cannot build."""
