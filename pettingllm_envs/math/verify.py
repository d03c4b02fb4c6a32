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
4. **Everything else** (expressions, sets, intervals, tuples, equations) is compared
   symbolically by :mod:`.symbolic`:
   `math-verify <https://github.com/huggingface/Math-Verify>`_ (LaTeX parsed by
   ``latex2sympy2_extended``, an ANTLR grammar, so no text is evaluated as Python).
   When math-verify is not installed, or cannot parse a side, a small restricted parser
   builds SymPy objects from tokens (numbers, single-letter variables,
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

import re
from fractions import Fraction

from pettingllm_envs.math.bounded import bounded_symbolic_equal
from pettingllm_envs.math.symbolic import MATH_VERIFY_AVAILABLE, REL_TOL, symbolic_equal

__all__ = ["MATH_VERIFY_AVAILABLE", "extract_boxed", "normalize_answer", "parse_number", "symbolic_equal", "verify"]

#: Longest answer that is normalised; longer texts are compared as they are.
MAX_ANSWER_CHARS = 2000
#: Longest normalised answer that is parsed; longer ones are compared as text only.
MAX_PARSE_CHARS = 400

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


def _connectives(text: str) -> list[str]:
    """The relations and connectives of ``text``, each spelling mapped to one key, sorted."""
    return sorted(CONNECTIVE_KEYS.get(found.lower(), found.lower()) for found in CONNECTIVE.findall(text))


def _parseable(text: str) -> bool:
    """Small enough and free of exponent towers, so that parsing and comparing is bounded."""
    return len(text) <= MAX_PARSE_CHARS and NESTED_POWER.search(text) is None
