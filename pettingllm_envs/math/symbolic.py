"""Step 4 of :func:`pettingllm_envs.math.verify.verify`: are two normalised answers symbolically equal?

math-verify (LaTeX parsed by ``latex2sympy2_extended``, an ANTLR grammar, so no text is evaluated as
Python) decides when it is installed and can parse both sides; otherwise a small restricted parser
builds SymPy objects from tokens (numbers, single-letter variables, ``+ - * / ^``, ``\\frac``,
``\\sqrt``, ``\\pi``, ``\\infty``, sets, tuples, intervals) with constructors only, and compares
them. Texts outside its grammar are equal only when they are identical.

Unbounded in time (SymPy may expand ``(x+1)^{5000}``), so only the comparison process of
:mod:`pettingllm_envs.math.bounded` calls it; :mod:`~pettingllm_envs.math.verify` sends it there.
It sits below both so that neither imports the other's caller.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import sympy

try:  # math-verify is the ``math`` extra; without it the restricted parser below is used.
    from math_verify import LatexExtractionConfig
    from math_verify import parse as mv_parse
    from math_verify import verify as mv_verify

    MATH_VERIFY_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where the extra is missing
    MATH_VERIFY_AVAILABLE = False

#: Relative tolerance of numeric comparisons (float noise, not rounding).
REL_TOL = 1e-9
#: Seconds math-verify may spend on one parse or comparison (in the comparison process).
TIMEOUT_SECONDS = 2

# math-verify logs a warning per timeout and a one-off warning when timeouts are disabled;
# those are expected here (junk answers, worker threads), not problems to report.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def symbolic_equal(answer: str, gold: str, use_math_verify: bool = MATH_VERIFY_AVAILABLE) -> bool:
    """Step 4 on two normalised answers: math-verify's verdict, else the restricted parser's.

    Unbounded in time: :func:`~pettingllm_envs.math.verify.verify` calls it only through
    :mod:`.bounded`'s child process.
    """
    if use_math_verify:
        outcome = _verify_math_verify(answer, gold)
        if outcome is not None:
            return outcome
    return _verify_fallback(answer, gold)



# ------------------------------------------------------------------ math-verify
def _verify_math_verify(answer: str, gold: str) -> bool | None:
    """math-verify's verdict, or None when it could not parse one of the sides. Its timeouts
    are ``signal.alarm``, so they apply in a main thread only (the comparison process's)."""
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    parsed_gold = mv_parse(f"${gold}$", extraction_config=config, parsing_timeout=TIMEOUT_SECONDS)
    parsed_answer = mv_parse(f"${answer}$", extraction_config=config, parsing_timeout=TIMEOUT_SECONDS)
    if not _has_sympy(parsed_gold) or not _has_sympy(parsed_answer):
        return None
    return bool(mv_verify(parsed_gold, parsed_answer, timeout_seconds=TIMEOUT_SECONDS))


def _has_sympy(parsed: list[Any]) -> bool:
    return any(isinstance(item, (sympy.Basic, sympy.MatrixBase)) for item in parsed)


# ------------------------------------------------------------ restricted parser
class _ParseError(ValueError):
    """The text is outside the restricted grammar."""


TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<cmd>\\[A-Za-z]+|\\\{|\\\})|(?P<var>[A-Za-z])|(?P<op>[-+*/^(){}\[\],%]))"
)
#: Largest integer exponent the restricted parser evaluates.
MAX_EXPONENT = 1000
#: Largest exact power (in bits) the restricted parser evaluates.
MAX_POWER_BITS = 100_000


def _tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    text = text.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/")
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise _ParseError(f"unexpected character {text[pos]!r}")
        tokens.append(match.group().strip())
        pos = match.end()
    return tokens


class _Parser:
    """Recursive descent over tokens that builds SymPy objects with constructors only."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.pos = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise _ParseError(f"expected {expected or 'a token'}, got {token!r}")
        self.pos += 1
        return token

    def answer(self) -> Any:
        """Top level: an interval, a set, a tuple, a bare list (a set) or one expression."""
        first = self.peek()
        items, closer = self._items()
        if self.peek() is not None:
            raise _ParseError("trailing tokens")
        if closer is None:
            return items[0] if len(items) == 1 else sympy.FiniteSet(*items)
        if first == "\\{":
            return sympy.FiniteSet(*items)
        if len(items) == 2 and closer in ")]" and first in "([":
            return ("interval", first, *items, closer)
        if (closer, first) in ((")", "("), ("]", "[")):
            return sympy.Tuple(*items)
        raise _ParseError("mismatched brackets")

    def _items(self) -> tuple[list[Any], str | None]:
        start = self.pos
        first = self.peek()
        if first in ("(", "[", "\\{"):
            self.take()
            items = [self.expr()]
            while self.peek() == ",":
                self.take()
                items.append(self.expr())
            closer = self.peek()
            if len(items) > 1 or first == "\\{":
                if closer not in (")", "]", "\\}"):
                    raise _ParseError("unclosed bracket")
                self.take()
                return items, closer
            self.pos = start  # one parenthesised expression: parse it as an expression
        items = [self.expr()]
        while self.peek() == ",":
            self.take()
            items.append(self.expr())
        return items, None

    def expr(self) -> sympy.Expr:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> sympy.Expr:
        value = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "/"):
                self.take()
                rhs = self.unary()
                value = value * rhs if token == "*" else value / rhs
            elif token is not None and token not in ("+", "-", ")", "]", "}", ",", "^", "\\}", "%"):
                value = value * self.power()  # implicit product: 2x, 3\sqrt{2}
            else:
                return value

    def unary(self) -> sympy.Expr:
        if self.peek() in ("+", "-"):
            sign = self.take()
            value = self.unary()
            return -value if sign == "-" else value
        return self.power()

    def power(self) -> sympy.Expr:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.unary() if self.peek() in ("+", "-") else self.atom()
            if (exponent.is_number and abs(exponent) > MAX_EXPONENT) or _too_big(base, exponent):
                raise _ParseError("exponent too large")
            base = sympy.Pow(base, exponent)
        if self.peek() == "%":
            self.take()
            base = base / 100
        return base

    def atom(self) -> sympy.Expr:
        token = self.take()
        if token[0].isdigit() or token[0] == ".":
            return sympy.Rational(token) if len(token) <= 60 else _fail("number too long")
        if token in ("(", "{"):
            value = self.expr()
            self.take(")" if token == "(" else "}")
            return value
        if len(token) == 1 and token.isalpha():
            return sympy.Symbol(token)
        if token == "\\frac":
            return self.group() / self.group()
        if token == "\\sqrt":
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
                return sympy.root(self.group(), index)
            return sympy.sqrt(self.group())
        if token == "\\pi":
            return sympy.pi
        if token == "\\infty":
            return sympy.oo
        raise _ParseError(f"unsupported token {token!r}")

    def group(self) -> sympy.Expr:
        if self.peek() == "{":
            self.take()
            value = self.expr()
            self.take("}")
            return value
        raise _ParseError("\\frac and \\sqrt need braced arguments")


def _too_big(base: sympy.Expr, exponent: sympy.Expr) -> bool:
    """An exact rational power with more than :data:`MAX_POWER_BITS` bits: ``(2^{1000})^{1000}``."""
    if not (base.is_Rational and exponent.is_Rational):
        return False
    size = max(abs(base.p), abs(base.q)).bit_length()
    return size * abs(exponent) > MAX_POWER_BITS


def _fail(reason: str) -> sympy.Expr:
    raise _ParseError(reason)


def _parse_restricted(text: str) -> Any:
    return _Parser(_tokenize(text)).answer()


def _verify_fallback(answer: str, gold: str) -> bool:
    """The SymPy path without math-verify: restricted parsing, then structural comparison.
    Texts outside the grammar are equal only when their normalised forms are identical."""
    try:
        parsed_answer, parsed_gold = _parse_restricted(answer), _parse_restricted(gold)
    except (_ParseError, ZeroDivisionError, TypeError, ValueError):
        return answer == gold
    return bool(_objects_equal(parsed_answer, parsed_gold))


def _objects_equal(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):  # intervals: brackets and ends
        return a[1] == b[1] and a[4] == b[4] and _exprs_equal(a[2], b[2]) and _exprs_equal(a[3], b[3])
    if isinstance(a, sympy.FiniteSet) and isinstance(b, sympy.FiniteSet):
        left, right = list(a), list(b)
        return len(left) == len(right) and all(any(_exprs_equal(x, y) for y in right) for x in left) and all(
            any(_exprs_equal(y, x) for x in left) for y in right
        )
    if isinstance(a, sympy.Tuple) and isinstance(b, sympy.Tuple):
        return len(a) == len(b) and all(_exprs_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
        return _exprs_equal(a, b)
    return False


def _exprs_equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a == b:
        return True
    if a.is_number and b.is_number:
        if not (a.is_finite and b.is_finite):
            return False
        va, vb = sympy.N(a, 30), sympy.N(b, 30)
        if not (va.is_real and vb.is_real):
            return bool(sympy.simplify(a - b) == 0)
        return bool(abs(va - vb) <= REL_TOL * max(abs(va), abs(vb)))
    return sympy.expand(a - b) == 0 or sympy.simplify(a - b) == 0
