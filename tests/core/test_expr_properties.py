"""Property tests for the arithmetic core.

* `safe_eval` agrees with Python's own float arithmetic on random expressions of the allowed
  grammar, including which inputs raise. The oracle is Python itself: the same expression
  with every literal written as a float and every node wrapped in `float(...)` (the
  evaluator converts each node's value with `float`), evaluated by `eval` on this generated, safe
  input only, in a namespace that holds nothing but the allowed functions.
* An expression embedded in random Chinese/English filler is found by `extract_expressions`.
* No text, and no bytes decoded with surrogate escapes, makes any function raise anything but
  `ValueError` or `OverflowError`.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
import unicodedata
from dataclasses import dataclass

import pytest
from agentrl.parsing import (
    canonicalize_expression,
    extract_expressions,
    format_number,
    safe_eval,
)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import same_float

PROPERTY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FUNCTIONS = ("sqrt", "sin", "cos", "tan", "log", "exp", "abs", "round")
ORACLE_NAMESPACE = {
    "__builtins__": {},
    "float": float,
    "pi": math.pi,
    "e": math.e,
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "exp": math.exp,
    "abs": abs,
    "round": round,
}


# ---------------------------------------------------------------- expression trees


@dataclass(frozen=True)
class Literal:
    value: float  # what Python's float() of the literal gives
    text: str  # a Python literal spelling of it


@dataclass(frozen=True)
class Constant:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]


Node = Literal | Constant | Unary | Binary | Call

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 4}


def precedence(node: Node) -> int:
    if isinstance(node, Binary):
        return PRECEDENCE[node.op]
    if isinstance(node, Unary):
        return 3
    return 5


def int_spellings(k: int) -> list[str]:
    """Python literal spellings whose value is the integer k."""
    spellings = [str(k), f"0x{k:x}", f"0X{k:X}", f"0o{k:o}", f"0b{k:b}"]
    digits = str(k)
    if len(digits) > 1:
        spellings.append("_".join(digits))
    if k == 0:
        spellings += ["00", "0_0", "False"]
    if k == 1:
        spellings.append("True")
    return spellings


def float_spellings(x: float) -> list[str]:
    """Python float literal spellings of x (x finite, non-negative)."""
    text = repr(x)
    spellings = [text]
    if text.startswith("0."):
        spellings.append(text[1:])  # ".5"
    if text.endswith(".0"):
        spellings.append(text[:-1])  # "5."
    return spellings


@st.composite
def literals(draw: st.DrawFn) -> Literal:
    kind = draw(st.sampled_from(["small", "small", "big", "float", "float", "inf"]))
    if kind == "small":
        k = draw(st.integers(0, 12))
        return Literal(float(k), draw(st.sampled_from(int_spellings(k))))
    if kind == "big":
        k = draw(st.integers(0, 10**40))
        return Literal(float(k), draw(st.sampled_from(int_spellings(k)[:3])))
    if kind == "inf":
        return Literal(math.inf, "1e400")
    x = draw(st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False))
    return Literal(x, draw(st.sampled_from(float_spellings(x))))


LEAVES = st.one_of(literals(), st.sampled_from([Constant("pi"), Constant("e")]))


def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    arity = st.sampled_from([1, 1, 1, 1, 2, 0, 3, 4])
    return st.one_of(
        st.builds(Unary, st.sampled_from(["+", "-"]), children),
        st.builds(Binary, st.sampled_from(list(PRECEDENCE)), children, children),
        arity.flatmap(
            lambda n: st.builds(Call, st.sampled_from(FUNCTIONS), st.tuples(*[children] * n))
        ),
    )


TREES = st.recursive(LEAVES, extend, max_leaves=10)


def tokens(node: Node, rnd: random.Random) -> list[str]:
    """Canonical tokens of a Python rendering of `node`, parenthesised only where needed
    (plus a few optional parentheses)."""

    def wrap(child: Node, needed: bool) -> list[str]:
        inner = tokens(child, rnd)
        return ["(", *inner, ")"] if needed or rnd.random() < 0.08 else inner

    if isinstance(node, Literal):
        return [node.text]
    if isinstance(node, Constant):
        return [node.name]
    if isinstance(node, Unary):
        return [node.op, *wrap(node.operand, precedence(node.operand) < 3)]
    if isinstance(node, Binary):
        p = PRECEDENCE[node.op]
        if node.op == "**":
            left_needed = precedence(node.left) <= 4
            right_needed = precedence(node.right) < 3
        else:
            left_needed = precedence(node.left) < p
            right_needed = precedence(node.right) <= p
        return [*wrap(node.left, left_needed), node.op, *wrap(node.right, right_needed)]
    out = [node.name, "("]
    for k, arg in enumerate(node.args):
        if k:
            out.append(",")
        out += tokens(arg, rnd)
    if node.args and rnd.random() < 0.2:
        out.append(",")
    out.append(")")
    return out


# Characters that full-width translation or NFKC identifier normalisation map back.
FULLWIDTH = {"+": "＋", "-": "－", "*": "×", "/": "÷", "(": "（", ")": "）", ",": "，", "%": "％"}
FULLWIDTH.update({d: chr(0xFF10 + int(d)) for d in "0123456789"})
NAME_VARIANTS = {
    "s": "ſｓ",
    "q": "ｑ",
    "r": "ｒ",
    "t": "ｔ",
    "e": "ℯｅ𝐞",
    "c": "ⅽｃ",
    "l": "ⅼｌ",
    "p": "ｐ",
}
SPACES = ["", "", "", " ", "  ", "\t", "\u3000", "\n"]


def decorate(canonical_tokens: list[str], rnd: random.Random) -> str:
    """The text a user might write: random whitespace, full-width forms, `^`, odd letters."""
    out = []
    for tok in canonical_tokens:
        if tok == "**" and rnd.random() < 0.3:
            tok = "^"
        elif tok in (*FUNCTIONS, "pi", "e") and rnd.random() < 0.2:
            tok = "".join(rnd.choice(NAME_VARIANTS.get(c, c)) for c in tok)
        elif tok not in ("True", "False") and not tok.startswith("0x"):
            tok = "".join(FULLWIDTH[c] if c in FULLWIDTH and rnd.random() < 0.1 else c for c in tok)
        out.append(tok)
        out.append(rnd.choice(SPACES))
    return "".join(out)


def oracle_source(node: Node) -> str:
    """The same expression for Python's eval: float literals, every node through float()."""
    if isinstance(node, Literal):
        return "float(1e400)" if math.isinf(node.value) else f"float({node.value!r})"
    if isinstance(node, Constant):
        return f"float({node.name})"
    if isinstance(node, Unary):
        return f"float({node.op}({oracle_source(node.operand)}))"
    if isinstance(node, Binary):
        return f"float(({oracle_source(node.left)}) {node.op} ({oracle_source(node.right)}))"
    args = ", ".join(oracle_source(a) for a in node.args)
    return f"float({node.name}({args}))"


DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")


def expected_value(node: Node, canonical: str) -> float | None:
    """Python's answer, or None where it raises (the length and date guards first)."""
    if len(canonical) > 256 or DATE.fullmatch(canonical):
        return None
    try:
        return eval(oracle_source(node), ORACLE_NAMESPACE)  # generated arithmetic only
    except (ArithmeticError, ValueError, TypeError):
        return None


def test_name_variants_normalise_to_the_ascii_letter() -> None:
    for letter, variants in NAME_VARIANTS.items():
        for v in variants:
            assert unicodedata.normalize("NFKC", v) == letter


@pytest.mark.slow
@PROPERTY
@given(TREES, st.randoms(use_true_random=False))
def test_safe_eval_agrees_with_python_float_arithmetic(node: Node, rnd: random.Random) -> None:
    canonical_tokens = tokens(node, rnd)
    canonical = "".join(canonical_tokens)
    text = decorate(canonical_tokens, rnd)
    want = expected_value(node, canonical)
    try:
        got: float | None = safe_eval(text)
    except ValueError:
        got = None
    event("python raises" if want is None else "python gives a value")
    if want is None:
        assert got is None, f"{text!r} should raise, got {got!r}"
    else:
        assert got is not None, f"{text!r} raised, Python gives {want!r}"
        assert same_float(got, want), f"{text!r}: got {got!r}, Python gives {want!r}"


# ---------------------------------------------------------------- extraction

NUMBERS = st.one_of(
    st.integers(0, 10**6).map(str),
    st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda p: f"{p[0]}.{p[1]}"),
)
SIMPLE = st.tuples(NUMBERS, st.sampled_from("+-*/"), NUMBERS).map("".join)
OPERATORS = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "^"])


@st.composite
def atoms(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["number", "number", "group", "call"]))
    if kind == "group":
        return f"({draw(SIMPLE)})"
    if kind == "call":
        name = draw(st.sampled_from(FUNCTIONS))
        return f"{name}{draw(st.sampled_from(['', ' ']))}({draw(SIMPLE)})"
    sign = draw(st.sampled_from(["", "", "-", "+"]))
    return sign + draw(NUMBERS)


@st.composite
def embeddable_expressions(draw: st.DrawFn) -> str:
    parts = [draw(atoms())]
    for _ in range(draw(st.integers(1, 4))):
        space = draw(st.sampled_from(["", " "]))
        parts += [space, draw(OPERATORS), space, draw(atoms())]
    return "".join(parts)


CJK = "计算等于结果是多少和的请问你好数学题"
FILLER = st.text(alphabet=CJK + "abcdefghijklmnopqrstuvwxyzABC ，。？！", max_size=30)
TO_FULLWIDTH = {"+": "＋", "*": "×", "/": "÷", "(": "（", ")": "）", "%": "％", "^": "＾"}


@pytest.mark.slow
@PROPERTY
@given(
    embeddable_expressions(),
    FILLER,
    FILLER,
    st.sampled_from(CJK),
    st.sampled_from(CJK),
    st.booleans(),
)
def test_expression_in_chinese_english_filler_is_found(
    expr: str, before: str, after: str, left: str, right: str, fullwidth: bool
) -> None:
    try:
        safe_eval(expr)
    except ValueError:
        assume(False)
    written = "".join(TO_FULLWIDTH.get(c, c) for c in expr) if fullwidth else expr
    # A CJK character on each side: not a word character, not part of any atom.
    text = f"{before}{left}{written}{right}{after}"
    assert extract_expressions(text) == [expr]


# ---------------------------------------------------------------- robustness

EXPRESSION_ALPHABET = "0123456789.+-*/%^()eExXoObBjJ_ ,#sqrtlogpiTrueFalse（）＋×÷٣\t\u3000"


def only_documented_errors(text: str) -> None:
    for function in (canonicalize_expression, safe_eval, extract_expressions):
        with contextlib.suppress(ValueError, OverflowError):
            function(text)


@pytest.mark.slow
@PROPERTY
@given(st.text(max_size=200))
def test_random_text_raises_only_value_or_overflow_errors(text: str) -> None:
    only_documented_errors(text)


@PROPERTY
@given(st.text(alphabet=EXPRESSION_ALPHABET, max_size=80))
def test_expression_like_text_raises_only_value_or_overflow_errors(text: str) -> None:
    only_documented_errors(text)


def test_lone_surrogates_survive_canonicalisation_and_never_extract() -> None:
    assert canonicalize_expression("a\ud800 ^ \udfffb") == "a\ud800**\udfffb"
    assert extract_expressions("(1\ud800)+2 3+4") == ["3+4"]
    with pytest.raises(ValueError):
        safe_eval("1+1#\ud800")


@PROPERTY
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_value_or_overflow_errors(data: bytes) -> None:
    only_documented_errors(data.decode("utf-8", errors="surrogateescape"))
    only_documented_errors(data.decode("latin-1"))


def python_format(value: float) -> str:
    """Python's own rendering of the spec: exact integer digits for (nearly) integral values,
    else ten decimals without trailing zeros."""
    nearest = round(value)
    if abs(value - nearest) < 1e-9:
        return str(nearest)
    return f"{value:.10f}".rstrip("0").rstrip(".")


@PROPERTY
@given(st.floats())
def test_format_number_matches_python_formatting_and_raises_only_for_non_finite(
    value: float,
) -> None:
    try:
        text = format_number(value)
    except (ValueError, OverflowError):
        assert not math.isfinite(value)
    else:
        assert text == python_format(value)
