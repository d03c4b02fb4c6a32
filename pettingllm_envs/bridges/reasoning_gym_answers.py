"""Reading a reasoning-gym answer out of a reply, and the guards it passes before the
dataset's own ``score_answer`` sees it (pure functions, no reasoning-gym import).

reasoning-gym's scorers were written for a model that answers in good faith; a policy
trained on them does not. What they accept that is not a solution (found by scoring
hedges, dumps and code against all 106 datasets of 0.1.25):

* **Code.** Nine scorers evaluate the answer as Python: ``eval(answer)`` (binary_matrix,
  n_queens, spiral_matrix, string_insertion) or SymPy's ``parse_expr`` (countdown, puzzle24,
  polynomial_multiplication, simple_integration, intermediate_integration), which is
  ``eval`` after a token rewrite. ``__import__('os').system(...)`` as a countdown answer
  runs in the scoring process. :func:`refusal` lets those scorers see only answers that
  cannot run code: Python literals (or text that is no Python at all) for the ``eval``
  ones, arithmetic on numbers for countdown. The scorers that also run SymPy's
  ``simplify`` on the answer (unbounded time on a short input) and puzzle24 (which accepts
  any expression that makes 24) are not bridged (``reasoning_gym_datasets.UNSUPPORTED``).
* **Dumps.** The default scorer pays ``len(gold) / len(answer)`` to any answer that
  contains the gold, manipulate_matrix does the same, and longer answers cost longer
  scoring: an answer longer than :func:`max_answer_chars` of the gold is not scored.
* **Hedges and partial credit.** Scores below 1 pay formats and near misses (countdown
  0.01 for an empty answer and 0.05 for any expression with the wrong numbers, gsm_symbolic
  0.01 for any number), so the env pays full credit only, a score of exactly 1.0:
  spell_backward adds ``1/len(gold)`` per matching character and reaches
  1.0000000000000002 for some answers that merely start with the gold. Scorers
  that read the start of the answer pay full credit for the gold followed by anything
  (``12 or 13`` is 12 to gsm_symbolic, which reads the first number; letter_jumble compares
  the first words, fraction_simplification the first LaTeX fraction), so
  :data:`SINGLE_NUMBER_DATASETS` must answer one number and nothing else, and
  :data:`WORD_COUNT_DATASETS` with no more words than the reference answer.
* **Hedges anywhere.** Some scorers pay full credit for the gold followed by other
  candidates: sokoban replays only the moves it needs (``<gold> or <other moves>``),
  word_sorting, time_intervals and advanced_geometry read the first of several
  comma-separated values. Rather than a guard per scorer, :func:`hedge` applies one rule to
  every dataset: an answer that splits into more candidates than the reference (at " or ",
  " and ", commas, semicolons, bars, slashes, line breaks or spaces) and still gets full
  credit with its first or its last candidate dropped holds a right answer among others; the
  env scores it as a wrong answer (``tests/adversarial/test_reasoning_gym_hedges.py`` hedges
  the reference of every bridged dataset in several shapes).
* **NaN.** complex_arithmetic scores ``min(1.0, exp(-distance))``, and ``min(1.0, nan)`` is
  1.0: the answer ``nan`` gets full credit on every problem, so :data:`FINITE_NUMBER_DATASETS`
  refuse an answer that spells a non-finite number.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: An answer may be this many times as long as the gold answer (plus :data:`ANSWER_SLACK_CHARS`).
ANSWER_LENGTH_FACTOR = 4
ANSWER_SLACK_CHARS = 200

#: Scorers that call ``eval(answer)`` (for a partial-credit fallback after the exact match).
LITERAL_EVAL_DATASETS = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})
#: Scorers that call SymPy's ``parse_expr(answer)`` on an arithmetic expression of numbers.
ARITHMETIC_DATASETS = frozenset({"countdown"})
#: Scorers that take the first number found in the answer as the answer.
SINGLE_NUMBER_DATASETS = frozenset({"gsm_symbolic"})
#: Scorers that compare the first words (or the first fraction) of the answer with the gold.
WORD_COUNT_DATASETS = frozenset({"fraction_simplification", "letter_jumble"})
#: Scorers that parse the answer with ``float``/``complex``, which read ``nan`` and ``inf`` (any case).
FINITE_NUMBER_DATASETS = frozenset({"complex_arithmetic"})
_NON_FINITE = re.compile(r"nan|inf", re.IGNORECASE)

#: Where a hedge separates its candidates (see :func:`hedge`).
CANDIDATE_SEPARATORS = tuple(re.compile(pattern, re.IGNORECASE) for pattern in (
    r"\s+or\s+", r"\s+and\s+", r"\s*,\s*", r"\s*;\s*", r"\s*\|\s*", r"\s*/\s*", r"\s*\n\s*", r"\s+"))

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LITERAL_NODES = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Name, ast.Load,
                  ast.UnaryOp, ast.USub, ast.UAdd)
_ARITHMETIC_NODES = (ast.Expression, ast.Constant, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.UnaryOp,
                     ast.USub, ast.UAdd)


def extract_answer(text: str) -> tuple[str | None, str | None]:
    """The content of the last ``<answer>...</answer>`` of ``text`` (stripped), or None and why.

    Only the last tag counts, as in reasoning-gym's own ``extract_answer``: a reply that
    lists several answers is judged by its last one alone. An empty answer is an answer
    (some problems' answer is the empty string, e.g. ab's); it is scored like any other."""
    matches = ANSWER_TAG.findall(text)
    if not matches:
        if "<answer>" in text:
            return None, "the <answer> tag is not closed: end the answer with </answer>"
        return None, "no final answer in <answer>...</answer> tags was found"
    return matches[-1].strip(), None


def program_answer(stdout: str) -> str | None:
    """The answer a tool program printed: its last ``<answer>...</answer>`` if it printed
    one (possibly empty), else all of its output (answers may span lines: grids, boards),
    stripped; None when it printed nothing."""
    tagged = ANSWER_TAG.findall(stdout)
    if tagged:
        return tagged[-1].strip()
    return stdout.strip() or None


def normalise(answer: str) -> str:
    """``answer`` with runs of whitespace collapsed, for deciding whether two answers agree."""
    return " ".join(answer.split())


def max_answer_chars(gold: str) -> int:
    """The longest answer scored for a problem whose gold answer is ``gold``: a few times its
    length, rounded up to a power of two, so that probing the limit tells a policy next to
    nothing about the length of the right answer."""
    return 1 << (ANSWER_LENGTH_FACTOR * len(gold) + ANSWER_SLACK_CHARS - 1).bit_length()


def refusal(dataset: str, answer: str, gold: str) -> str | None:
    """Why ``answer`` must not reach ``dataset``'s ``score_answer`` (it then scores 0), or None."""
    limit = max_answer_chars(gold)
    if len(answer) > limit:
        return f"the answer has {len(answer)} characters, far more than a right answer needs"
    if dataset in LITERAL_EVAL_DATASETS and not _only_nodes(answer, _LITERAL_NODES, allow_non_python=True):
        return (f"the answer is a Python expression that {dataset}'s scorer would evaluate: "
                "give the answer in the task's format (only literal values are scored)")
    if dataset in ARITHMETIC_DATASETS and not _only_nodes(answer, _ARITHMETIC_NODES, allow_non_python=False):
        return "the answer must be an arithmetic expression of numbers with + - * / and parentheses"
    if dataset in SINGLE_NUMBER_DATASETS and _NUMBER.fullmatch(answer) is None:
        return "the answer must be one number and nothing else"
    if dataset in FINITE_NUMBER_DATASETS and _NON_FINITE.search(answer):
        return "the answer must be a finite number (nan and inf are not answers)"
    if dataset in WORD_COUNT_DATASETS and len(answer.split()) > len(gold.split()):
        return f"the answer has more words than a right answer ({len(gold.split())}): give one answer, nothing else"
    return None


def hedge(answer: str, gold: str, full_credit: Callable[[str], bool]) -> str | None:
    """Why ``answer``, which gets full credit, is a hedge (a right answer among other
    candidates), or None. For each of :data:`CANDIDATE_SEPARATORS` at which ``answer`` splits
    into more parts than ``gold``, the answer without its first part and without its last are
    scored with ``full_credit``: if either still gets it, a part was a candidate the answer did
    not need. At most two scorer calls per separator, made only for full-credit answers."""
    answer = answer.strip()
    for separator in CANDIDATE_SEPARATORS:
        cuts = list(separator.finditer(answer))
        if len(cuts) <= len(separator.findall(gold.strip())):
            continue
        for rest in (answer[cuts[0].end():], answer[:cuts[-1].start()]):
            if full_credit(rest):
                return (f"the answer holds several candidates ({rest[:40]!r} alone is scored the same): "
                        "give one answer")
    return None


def _only_nodes(answer: str, allowed: tuple[type[ast.AST], ...], *, allow_non_python: bool) -> bool:
    """Whether every way Python could read ``answer`` as an expression uses only ``allowed``
    nodes (number constants only, for arithmetic). ``eval`` skips leading spaces and tabs
    that ``ast.parse`` rejects, so both spellings are checked. Text that is no Python
    expression at all passes when ``allow_non_python`` (``eval`` then fails before it runs
    anything)."""
    arithmetic = ast.BinOp in allowed
    parsed_any = False
    for source in {answer, answer.lstrip(" \t"), answer.strip()}:
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError:
            continue
        except (ValueError, RecursionError, MemoryError):  # null bytes, deep nesting: refuse
            return False
        parsed_any = True
        for node in ast.walk(tree):
            if not isinstance(node, allowed):
                return False
            if isinstance(node, ast.Constant) and arithmetic and (
                    isinstance(node.value, bool) or not isinstance(node.value, int | float)):
                return False
    return parsed_any or allow_non_python
