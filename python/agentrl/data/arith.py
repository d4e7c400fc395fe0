"""Random arithmetic expressions for synthetic tool-use tasks.

Expressions are built from atoms (numbers, one-level parenthesised groups, function calls
on a plain sum or number) joined by binary operators, then written in one of several
surface styles (compact ASCII, spaced, ``×``/``÷``, full-width characters). The shapes are
restricted to what the reward's expression extractor recognises in running text (no
nested parentheses, a binary operator outside every group), so that the number of
expressions the reward expects equals the number the task asks for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ALL_OPERATORS = ("+", "-", "*", "/", "//", "%", "**")
ALL_FUNCTIONS = ("sqrt", "abs", "round", "log", "exp", "sin", "cos", "tan")
DEFAULT_OPERATORS = ALL_OPERATORS
DEFAULT_FUNCTIONS = ("sqrt", "abs", "round", "log")
STYLES = ("compact", "spaced", "symbols", "fullwidth")

_FULLWIDTH = str.maketrans(
    {
        **{d: chr(0xFF10 + i) for i, d in enumerate("0123456789")},
        "+": "＋",
        "-": "－",
        "*": "＊",
        "/": "／",
        "(": "（",
        ")": "）",
        "%": "％",
        "^": "＾",
        ".": "．",
    }
)


@dataclass(frozen=True)
class ExprConfig:
    """Difficulty knobs of one expression."""

    max_digits: int = 3
    min_ops: int = 1
    max_ops: int = 2
    operators: tuple[str, ...] = DEFAULT_OPERATORS
    functions: tuple[str, ...] = DEFAULT_FUNCTIONS
    paren_prob: float = 0.25
    func_prob: float = 0.15
    decimal_prob: float = 0.05
    caret_prob: float = 0.3

    def __post_init__(self) -> None:
        bad_ops = [op for op in self.operators if op not in ALL_OPERATORS]
        bad_fns = [fn for fn in self.functions if fn not in ALL_FUNCTIONS]
        if bad_ops or bad_fns or not self.operators:
            raise ValueError(f"unknown operators {bad_ops} or functions {bad_fns}")
        if not 1 <= self.max_digits <= 9:
            raise ValueError("max_digits must be between 1 and 9")
        if not 1 <= self.min_ops <= self.max_ops:
            raise ValueError("need 1 <= min_ops <= max_ops")


def _number(rng: random.Random, max_digits: int, decimal_prob: float = 0.0) -> str:
    digits = rng.randint(1, max_digits)
    low = 0 if digits == 1 else 10 ** (digits - 1)
    value = rng.randint(max(low, 1), 10**digits - 1)
    if rng.random() < decimal_prob:
        return f"{value}.{rng.randint(1, 9)}"
    return str(value)


def _function_atom(rng: random.Random, cfg: ExprConfig) -> str:
    name = rng.choice(cfg.functions)
    small = min(cfg.max_digits, 2)
    if name == "sqrt":
        root = rng.randint(2, 10 ** min(cfg.max_digits, 2) - 1)
        if rng.random() < 0.5:
            return f"sqrt({root * root})"
        return f"sqrt({_number(rng, cfg.max_digits)})"
    if name == "abs":
        a, b = sorted(int(_number(rng, cfg.max_digits)) for _ in range(2))
        return f"abs({a}-{b + 1})"
    if name == "round":
        return f"round({_number(rng, cfg.max_digits)}/{rng.randint(2, 9)})"
    if name == "log":
        base = rng.choice((2, 3, 10))
        power = rng.randint(1, 6 if base == 2 else 3)
        return f"log({base**power},{base})"
    return f"{name}({_number(rng, small)})"


def _group_atom(rng: random.Random, cfg: ExprConfig) -> str:
    ops = [op for op in ("+", "-", "*") if op in cfg.operators] or ["+"]
    terms = [_number(rng, cfg.max_digits, cfg.decimal_prob)]
    for _ in range(rng.randint(1, 2)):
        terms.append(rng.choice(ops))
        terms.append(_number(rng, cfg.max_digits, cfg.decimal_prob))
    return "(" + "".join(terms) + ")"


def _atom(rng: random.Random, cfg: ExprConfig) -> str:
    roll = rng.random()
    func_prob = cfg.func_prob if cfg.functions else 0.0
    if roll < func_prob:
        return _function_atom(rng, cfg)
    if roll < func_prob + cfg.paren_prob:
        return _group_atom(rng, cfg)
    return _number(rng, cfg.max_digits, cfg.decimal_prob)


def random_expression(rng: random.Random, cfg: ExprConfig) -> list[str]:
    """An expression as alternating atoms and operators (ASCII, ``**`` for powers)."""
    pieces = [_atom(rng, cfg)]
    for _ in range(rng.randint(cfg.min_ops, cfg.max_ops)):
        op = rng.choice(cfg.operators)
        # The last piece may be the exponent of a previous power: leave it alone.
        after_power = len(pieces) >= 2 and pieces[-2] == "**"
        if op == "**":
            # Small exponents on small bases keep results readable.
            if pieces[-1].isdigit() and len(pieces[-1]) > 2 and not after_power:
                pieces[-1] = pieces[-1][:2]
            right = str(rng.randint(2, 3))
        elif op in ("/", "//", "%"):
            right = str(rng.randint(2, 10 ** min(cfg.max_digits, 2) - 1))
            if op == "/" and pieces[-1].isdigit() and not after_power and rng.random() < 0.7:
                # Usually divide a multiple, so most quotients are whole numbers.
                pieces[-1] = str(int(right) * rng.randint(1, 10 ** min(cfg.max_digits, 2)))
        else:
            right = _atom(rng, cfg)
        pieces.extend([op, right])
    return pieces


def render_expression(pieces: list[str], style: str, caret: bool = False) -> str:
    """The surface text of an expression in one of :data:`STYLES`."""
    ops = ["^" if p == "**" and caret else p for p in pieces]
    if style == "compact":
        return "".join(ops)
    if style == "spaced":
        return " ".join(ops)
    if style == "symbols":
        swap = {"*": "×", "/": "÷"}
        return "".join(swap.get(p, p) for p in ops)
    if style == "fullwidth":
        out = []
        for piece in ops:
            if piece[:1].isalpha():  # a function call: name stays ASCII, body widens
                head, _, body = piece.partition("(")
                out.append(head + ("(" + body).translate(_FULLWIDTH))
            else:
                out.append(piece.translate(_FULLWIDTH))
        return "".join(out)
    raise ValueError(f"unknown style {style!r}")


__all__ = [
    "ALL_FUNCTIONS",
    "ALL_OPERATORS",
    "DEFAULT_FUNCTIONS",
    "DEFAULT_OPERATORS",
    "STYLES",
    "ExprConfig",
    "random_expression",
    "render_expression",
]
