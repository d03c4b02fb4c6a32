"""Answer checking for math environments: is a model's final answer equal to the gold one?

``verify(answer, gold)`` decides mathematical equality, never string similarity:

1. **Extraction.** When a text contains ``\\boxed{...}`` (or ``\\fbox``), the content of the
   last one is the answer (nested braces are matched).
2. **Normalisation** (both sides): ``$`` and ``\\(...\\)`` delimiters, ``\\left``/``\\right``,
   spacing commands, ``\\dfrac``/``\\tfrac``, degree signs, a trailing full stop, currency
   signs, a leading assignment (``x = 3`` becomes ``3``), units after a number
   (``\\text{...}``, ``\\mathrm{...}``, and plain words such as ``apples`` or ``km/h``) and
   thousands separators in a lone number (``1,000`` is 1000; ``\\{1,000\\}`` stays a set).
3. **Plain numbers** (integers, decimals, ``a/b``, ``\\frac{a}{b}``, scientific notation,
   percentages) are compared exactly as rationals with a relative tolerance of
   :data:`REL_TOL`, which absorbs float noise in printed program output
   (``0.30000000000000004`` is 0.3) but not rounding (``0.33`` is not 1/3). A percentage
   matches its number with or without the per cent (``50%`` equals both ``50`` and ``0.5``).
4. **Everything else** (expressions, sets, intervals, tuples, equations) goes to
   `math-verify <https://github.com/huggingface/Math-Verify>`_ (LaTeX parsed by
   ``latex2sympy2_extended``, an ANTLR grammar, so no text is evaluated as Python).
   When math-verify is not installed, or cannot parse a side, a small restricted parser of
   this module builds SymPy objects from tokens (numbers, single-letter variables,
   ``+ - * / ^``, ``\\frac``, ``\\sqrt``, ``\\pi``, ``\\infty``, sets, tuples, intervals)
   and compares them; texts it cannot parse either are equal only when their normalised
   forms are identical.

``verify`` never raises: junk, huge or deeply nested input gives ``False``. Inputs longer
than :data:`MAX_PARSE_CHARS` after extraction, and expressions with nested or huge
exponents (``9^{9^{9}}``), are compared as normalised text only.

Time bound, from any thread: step 4 (the only step that can take unbounded time: SymPy
expanding ``(x+1)^{5000}`` or evaluating ``(10^{10})!`` exactly) runs in a child process
(:mod:`.bounded`) that is killed after :data:`~.bounded.WALL_SECONDS`; an answer whose
comparison overruns is wrong. math-verify's own ``signal.alarm`` timeouts only work in a
main thread, which the child's loop is; the caller's thread and its alarms are untouched.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction
from typing import Any

import sympy

from pettingllm_envs.math.bounded import bounded_symbolic_equal

__all__ = ["MATH_VERIFY_AVAILABLE", "extract_boxed", "normalize_answer", "parse_number", "symbolic_equal", "verify"]

try:  # math-verify is the ``math`` extra; without it the restricted parser below is used.
    from math_verify import LatexExtractionConfig
    from math_verify import parse as mv_parse
    from math_verify import verify as mv_verify

    MATH_VERIFY_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where the extra is missing
    MATH_VERIFY_AVAILABLE = False

#: Relative tolerance of numeric comparisons (float noise, not rounding).
REL_TOL = 1e-9
#: Longest answer that is normalised; longer texts are compared as they are.
MAX_ANSWER_CHARS = 2000
#: Longest normalised answer that is parsed; longer ones are compared as text only.
MAX_PARSE_CHARS = 400
#: Seconds math-verify may spend on one parse or comparison (in the comparison process).
TIMEOUT_SECONDS = 2

# math-verify logs a warning per timeout and a one-off warning when timeouts are disabled;
# those are expected here (junk answers, worker threads), not problems to report.
logging.getLogger("math_verify").setLevel(logging.ERROR)

BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
FRACTION = re.compile(r"([+-]?)\\frac\{([+-]?[\d.]+)\}\{([+-]?[\d.]+)\}")
ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?!=)")
TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
UNIT_WORD = re.compile(r"^(?P<num>[^A-Za-z\\]*?\d%?)\s*(?P<unit>[A-Za-z][A-Za-z\s/.^\d]*)$")
SHORT_UNITS = frozenset({
    "m", "cm", "mm", "km", "kg", "g", "mg", "s", "h", "hr", "hrs", "min", "l", "ml", "ft", "in", "yd", "mi",
    "lb", "lbs", "oz", "mph", "kmh", "sq", "deg", "pt", "pts",
})
NESTED_POWER = re.compile(r"\^\s*\{[^{}]*\^|\^\s*\(?\s*[+-]?[\d.]+\s*\)?\s*\^|\^\s*\{?\s*[+-]?\d{6,}|\d{4,}\s*!")
#: Relations and connectives. An answer must hold the same ones as the gold answer, so that a
#: hedge (``41 \text{ or } 42``, ``x=41, x=42``, ``42 \approx 43``) is never read as one of its parts.
CONNECTIVE = re.compile(
    r"\b(?:or|and)\b|\\(?:lor|land|vee|wedge|approx|sim|simeq|cong|equiv|neq|ne|leq|geq|le|ge|lt|gt|pm|mp)(?![A-Za-z])"
    r"|[=<>≈≠≤≥±∨∧]"
)
#: Spellings of the same connective, mapped to one key (``<`` and ``>`` alike: ``x<3`` is ``3>x``).
CONNECTIVE_KEYS = {
    "\\leq": "<=", "\\le": "<=", "\\geq": "<=", "\\ge": "<=", "≤": "<=", "≥": "<=", "<": "<", ">": "<",
    "\\lt": "<", "\\gt": "<", "\\neq": "!=", "\\ne": "!=", "≠": "!=", "≈": "\\approx", "±": "\\pm",
    "\\lor": "or", "\\vee": "or", "∨": "or", "\\land": "and", "\\wedge": "and", "∧": "and",
}
#: Words in a ``\text{}`` that make it part of the answer, not a unit to drop.
NOT_A_UNIT = re.compile(r"\b(?:or|and|to|than|more|less|least|most|not|none|no)\b", re.IGNORECASE)
SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad|\\displaystyle|\\left|\\right|~")


def extract_boxed(text: str) -> str | None:
    """The content of the last complete ``\\boxed{...}`` in ``text`` (nested braces matched), or None.

    Linear time: once a later box is found unclosed, an earlier box that reaches past it is
    unclosed too, so earlier scans stop at the later box's position."""
    matches = list(BOXED.finditer(text))
    limit = len(text)
    for match in reversed(matches):
        depth = 1
        for pos in range(match.end(), limit):
            char = text[pos]
            if char in "{}" and text[pos - 1] != "\\":
                depth += 1 if char == "{" else -1
                if depth == 0:
                    return text[match.end() : pos].strip()
        limit = match.start()
    return None


def normalize_answer(text: str) -> str:
    """A canonical text form of one final answer (see the module docstring, step 2)."""
    boxed = extract_boxed(text)
    text = boxed if boxed is not None else text
    if len(text) > MAX_ANSWER_CHARS:  # not a final answer; skip the pattern work
        return text.strip()
    text = text.strip().replace("−", "-").replace("\\$", "").replace("$", "")
    text = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", text).strip()
    text = SPACING.sub("", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("{,}", ",")
    text = re.sub(r"\^\s*\{?\\circ\}?|°|\\degree", "", text)
    text = text.replace("\\%", "%").replace("**", "^")
    text = re.sub(r"[€£¥₹]|\b(?:USD|EUR|Rs)\b", "", text)
    text = text.rstrip(". ").strip()
    if text.count("=") == 1 and "," not in text:
        text = ASSIGNMENT.sub("", text)
    text = _strip_units(text)
    if THOUSANDS.fullmatch(text.rstrip("%")):
        text = text.replace(",", "")
    return re.sub(r"\s+", " ", text).strip()


def _strip_units(text: str) -> str:
    """Drop a unit after a number: ``5\\text{ cm}``, ``18 dollars``, ``60 km/h``, ``3 m``.
    Only a trailing ``\\text{}`` after a number is a unit; any other is unwrapped (its words stay)."""
    wrappers = list(TEXT_WRAPPER.finditer(text))
    if wrappers:
        last = wrappers[-1]
        if (last.end() == len(text) and NUMBER.search(text[: last.start()])
                and NOT_A_UNIT.search(last.group(1)) is None):
            text = text[: last.start()]
        text = TEXT_WRAPPER.sub(r" \1 ", text).strip()
    match = UNIT_WORD.match(text)
    if match is None:
        return text
    unit = match["unit"].strip()
    first_word = re.match(r"[A-Za-z]+", unit)[0]
    spaced = text[match.end("num")].isspace()
    if len(first_word) >= 3 or (spaced and first_word.lower() in SHORT_UNITS):
        return match["num"].strip()
    return text


def parse_number(text: str) -> tuple[Fraction, bool] | None:
    """``(value, is_percent)`` when normalised ``text`` is one plain number, else None."""
    percent = text.endswith("%")
    body = text[:-1].strip() if percent else text
    if re.fullmatch(r"[+-]?(?:percent|pct)", body):
        return None
    fraction = FRACTION.fullmatch(body)
    try:
        if fraction is not None:
            sign, num, den = fraction.groups()
            value = Fraction(num) / Fraction(den)
            return (-value if sign == "-" else value), percent
        if "/" in body and body.count("/") == 1:
            num, den = (part.strip() for part in body.split("/"))
            if NUMBER.fullmatch(num) and NUMBER.fullmatch(den) and "e" not in (num + den).lower():
                return Fraction(num) / Fraction(den), percent
            return None
        if NUMBER.fullmatch(body) and len(body) <= 60:
            return Fraction(body), percent
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _numbers_equal(answer: tuple[Fraction, bool], gold: tuple[Fraction, bool]) -> bool:
    def candidates(number: tuple[Fraction, bool]) -> list[Fraction]:
        value, percent = number
        return [value, value / 100] if percent else [value]

    return any(_close(a, g) for a in candidates(answer) for g in candidates(gold))


def _close(a: Fraction, b: Fraction) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def verify(answer: str, gold: str) -> bool:
    """True when ``answer`` is mathematically equal to ``gold`` (see the module docstring).

    Never raises: anything that cannot be read as the gold answer is simply ``False``.
    """
    try:
        return _verify(answer, gold)
    except Exception:  # junk of any shape is a wrong answer, never a crash
        return False


def _verify(answer: str, gold: str) -> bool:
    if not isinstance(answer, str) or not isinstance(gold, str):
        return False
    norm_answer, norm_gold = normalize_answer(answer), normalize_answer(gold)
    if not norm_answer or not norm_gold:
        return False
    if norm_answer == norm_gold:
        return True
    num_answer, num_gold = parse_number(norm_answer), parse_number(norm_gold)
    if num_answer is not None and num_gold is not None:
        return _numbers_equal(num_answer, num_gold)
    if not (_parseable(norm_answer) and _parseable(norm_gold)):
        return False
    if _connectives(norm_answer) != _connectives(norm_gold):
        return False
    return bool(bounded_symbolic_equal(norm_answer, norm_gold, MATH_VERIFY_AVAILABLE))


def symbolic_equal(answer: str, gold: str, use_math_verify: bool = MATH_VERIFY_AVAILABLE) -> bool:
    """Step 4 on two normalised answers: math-verify's verdict, else the restricted parser's.

    Unbounded in time: :func:`verify` calls it only through :mod:`.bounded`'s child process.
    """
    if use_math_verify:
        outcome = _verify_math_verify(answer, gold)
        if outcome is not None:
            return outcome
    return _verify_fallback(answer, gold)


def _connectives(text: str) -> list[str]:
    """The relations and connectives of ``text``, each spelling mapped to one key, sorted."""
    return sorted(CONNECTIVE_KEYS.get(found.lower(), found.lower()) for found in CONNECTIVE.findall(text))


def _parseable(text: str) -> bool:
    """Small enough and free of exponent towers, so that parsing and comparing is bounded."""
    return len(text) <= MAX_PARSE_CHARS and NESTED_POWER.search(text) is None


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
