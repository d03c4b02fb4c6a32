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
| Team state G        | pass rate of the coder's code on the hidden tests (each step pays its change) |
| Local reward        | after every step, the change of each role's potential L (`local_state`):  |
|                     | coder: pass rate of its code on the tester's valid tests (a shown failure |
|                     | counts as fixed only with a hidden test fixed too); tester: mean credit   |
|                     | of its tests (share of mutants killed) + `bug_credit` * credit for bugs   |
| Reward bounds       | coder L in [0, 1], tester L in [0, 1 + bug_credit]; per step, the change  |
|                     | of L minus `format_penalty` on an invalid action: coder local in          |
|                     | [-1 - format_penalty, 1], tester in [-(1 + bug_credit) - format_penalty,  |
|                     | 1 + bug_credit]; over an episode each role's locals sum to its final L    |
|                     | minus its penalties; G in [0, 1] (its change in [-1, 1])                  |
| Penalties           | format (no code block / no parseable test): `-format_penalty` local       |
| Termination         | the code passes every valid tester test (at least one) and hidden test    |
| Truncation          | `max_turns` turns (default 4)                                             |
| Config              | `CodeConfig`: dataset, dataset_format, max_tests, bug_credit, timeouts... |

The coder acts first in each turn and the tester tests that turn's code. A tester test earns
credit only when it is valid: the reference passes it, it fails with the reference's results
perturbed, and it kills seeded mutants of the reference (:mod:`pettingllm_envs.code.mutants`).
Every program is judged in the sandbox (:mod:`pettingllm_envs.code.judge`) under the config's
one set of limits (:meth:`CodeConfig.judge_limits`); hidden tests never reach an observation.

Why the rewards take this shape, what each role sees, how programs are judged and where the
problems come from: docs/design.md §3, "code_v0: rewards and judging".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pettingllm_envs.code.config import CodeConfig
from pettingllm_envs.code.datasets import CodeDataset, CodeProblem, Test, load_dataset
from pettingllm_envs.code.instructions import instructions
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.code.judge.scheduler import judge_many
from pettingllm_envs.code.judge.suite import Outcome
from pettingllm_envs.code.mutants import failed_in_time, problem_screened, tests_worth
from pettingllm_envs.code.tester_tests import format_tests, parse_tests, show_test
from pettingllm_envs.code.verdict_cache import OutcomeCache
from pettingllm_envs.code.voting import voting as voting  # its Voting capability (self-consistency)
from pettingllm_envs.core import ActionResult, Split, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.core.parsing import find_code_block
from pettingllm_envs.core.process_shared import process_resource
from pettingllm_envs.core.tools import SHOWN_CODE_CHARS

# ``judge_many`` and its ``JudgeLimits`` are re-exported with the tester's test format: judging
# a (code, test) pair the way the env does is part of this env's interface.
__all__ = ["CodeConfig", "JudgeLimits", "Outcome", "env", "format_tests", "judge_many", "parallel_env", "parse_tests",
           "raw_env", "scripted_policy", "show_test"]


class raw_env(TextAECEnv[CodeProblem]):
    """The code environment (see the module docstring)."""

    has_local_state = True  # each role is paid the change of its local_state

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "code_v0", "is_parallelizable": False
    }
    roles = ("coder", "tester")
    config_class = CodeConfig
    config: CodeConfig
    #: ``caught`` is episode state, but an immutable frozenset that steps rebind, never
    #: mutate, so copies may share it (deep-copying its tests cost as much as the rest).
    shared_attributes = TextAECEnv.shared_attributes | {"dataset", "cache", "caught"}

    def __init__(self, config: CodeConfig | None = None, *, render_mode: str | None = None, **overrides: Any) -> None:
        super().__init__(config, render_mode=render_mode, **overrides)
        # A process resource, so that a pickled env names its dataset instead of carrying it.
        self.dataset: CodeDataset = process_resource(load_dataset, self.config.dataset, self.config.dataset_format,
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
        # All immutable, so deep copies are cheap. Each action of a role replaces its code or
        # tests (an unparseable one withdraws them: before_action).
        self.code: str | None = None  # the coder's current code
        self.hidden: tuple[Outcome, ...] = ()  # that code on the hidden tests
        self.tests: tuple[Test, ...] = ()  # the tester's current tests
        self.worth: tuple[float, ...] = ()  # test i's credit in [0, 1]: kills wrong programs (0: invalid)
        self.valid: tuple[bool, ...] = ()  # test i counts: worth > 0
        self.checks_nothing: tuple[bool, ...] = ()  # the reference passes test i even with its results changed
        self.kills_nothing: tuple[bool, ...] = ()  # it checks results, but every mutant of the reference passes it
        self.outcomes: tuple[Outcome | None, ...] = ()  # the code on test i; None: invalid test or no code
        self.ignored = 0  # the tester's asserts that count in the denominator only (see parse_tests)
        # valid tests some code of this episode failed -> the best hidden verdicts of the codes that
        # failed it, with the hidden tests every mutant passes: passing beyond them is a fix
        self.caught: dict[Test, tuple[bool, ...]] = {}

    # --------------------------------------------------------------- running
    def run(self, jobs: Sequence[tuple[str, Test]], perturbed: Sequence[Test] = ()) -> list[Outcome]:
        """Judge (code, test) pairs, then the reference on ``perturbed`` tests with every
        result it returns perturbed, through the family's verdict cache; every program under
        the config's one set of limits."""
        return self.cache.judge(self.instance, jobs, perturbed, limits=self.config.judge_limits())

    def catch(self, tests: Sequence[Test]) -> None:
        """Record that the current code fails ``tests`` (rebinding ``caught``: copies share it)."""
        if tests:
            trivial = problem_screened(self.instance, self.config.judge_limits()).trivial
            best = {test: tuple(o.passed or t for o, t in zip(self.hidden, self.caught.get(test, trivial), strict=True))
                    for test in tests}
            self.caught = {**self.caught, **best}

    def really_passes(self, test: Test, outcome: Outcome | None) -> bool:
        """The current code passes ``test`` and, if some code failed it before, it does not
        only match the test's literal cases: it passes a hidden test that every code that
        failed it failed, and that not every mutant passes (so a first code that fails every
        hidden test does not make a lookup table of the shown cases a fix)."""
        if outcome is None or not outcome.passed:
            return False
        before = self.caught.get(test)
        return before is None or any(now and not then for now, then in zip(
            (o.passed for o in self.hidden), before, strict=True))

    # -------------------------------------------------------------- actions
    def before_action(self, agent: str) -> None:
        if agent == "coder":
            self.code, self.hidden = None, ()
            self.outcomes = (None,) * len(self.tests)
        else:
            self.tests, self.worth, self.valid, self.checks_nothing, self.kills_nothing = (), (), (), (), ()
            self.outcomes, self.ignored = (), 0

    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "coder":
            return self._apply_coder(text)
        return self._apply_tester(text)

    def _apply_coder(self, text: str) -> ActionResult:
        code, missing = find_code_block(text)
        if code is None:
            return ActionResult(-self.config.format_penalty, valid=False,
                                invalid_reason=f"{missing}; the coder has no code until it writes some")
        problem = self.instance
        checked = [i for i, valid in enumerate(self.valid) if valid]
        results = self.run([(code, t) for t in problem.tests] + [(code, self.tests[i]) for i in checked])
        hidden, mine = results[: len(problem.tests)], results[len(problem.tests):]
        self.code, self.hidden = code, tuple(hidden)
        outcomes: list[Outcome | None] = [None] * len(self.tests)
        for i, outcome in zip(checked, mine, strict=True):
            outcomes[i] = outcome
        self.outcomes = tuple(outcomes)
        self.catch([self.tests[i] for i, outcome in zip(checked, mine, strict=True) if not outcome.passed])
        passed = sum(o.passed for o in mine)
        parsed = {"code": code, "tests_passed": passed, "tests_run": len(mine),
                  "hidden_passed": sum(o.passed for o in hidden), "hidden_total": len(hidden)}
        return ActionResult(0.0, parsed=parsed)  # the pass rate is paid as the change of local_state

    def _apply_tester(self, text: str) -> ActionResult:
        cfg, problem = self.config, self.instance
        tests, ignored, reason = parse_tests(problem, text)
        if reason is not None:
            return ActionResult(-cfg.format_penalty, valid=False,
                                invalid_reason=f"{reason}; the tester has no tests until it writes some")
        dropped = max(0, len(tests) - cfg.max_tests)
        tests = tests[: cfg.max_tests]
        n = len(tests)
        jobs = [(problem.reference, t) for t in tests]
        if self.code is not None:
            jobs += [(self.code, t) for t in tests]
        # Stdio tests compare the whole output with the expected one: they always check it.
        results = self.run(jobs, perturbed=tests if problem.style == "function" else ())
        reference, on_code, on_perturbed = results[:n], results[n: len(jobs)], results[len(jobs):]
        passes = tuple(o.passed for o in reference)
        limits = cfg.judge_limits()
        checks = tuple(failed_in_time(o, r, limits.timeout) for o, r in zip(on_perturbed, reference, strict=True)
                       ) if on_perturbed else (True,) * n
        checking = [p and c for p, c in zip(passes, checks, strict=True)]
        mutants = problem_screened(problem, limits).sources
        worth = tests_worth(problem, mutants, tests, reference, checking, limits.timeout, self.run)
        valid = tuple(w > 0 for w in worth)
        if self.code is None:
            outcomes: tuple[Outcome | None, ...] = (None,) * n
        else:
            outcomes = tuple(o if ok else None for o, ok in zip(on_code, valid, strict=True))
        self.tests, self.worth, self.valid, self.checks_nothing = tuple(tests), worth, valid, tuple(
            p and not c for p, c in zip(passes, checks, strict=True))
        self.kills_nothing = tuple(p and c and not ok for p, c, ok in zip(passes, checks, valid, strict=True))
        self.outcomes, self.ignored = outcomes, ignored
        failing = [t for t, o in zip(tests, outcomes, strict=True) if o is not None and not o.passed]
        self.catch(failing)
        parsed = {"tests": [show_test(t, cfg.shown_chars) for t in tests], "valid": sum(valid),
                  "credit": round(sum(worth), 6), "checks_nothing": sum(self.checks_nothing),
                  "kills_no_mutant": sum(self.kills_nothing), "ignored_asserts": ignored,
                  "dropped_over_max_tests": dropped, "caught": len(failing)}
        return ActionResult(0.0, parsed=parsed)  # validity and bug credit are paid as the change of local_state

    # ------------------------------------------------------------ rewards
    def local_state(self, agent: str) -> float:
        """Each role's potential (docs/design.md §3, "code_v0: rewards and judging")."""
        if agent == "coder":
            checked = [(t, o) for t, o in zip(self.tests, self.outcomes, strict=True) if o is not None]
            return sum(self.really_passes(t, o) for t, o in checked) / len(checked) if checked else 0.0
        total = len(self.tests) + self.ignored
        if not total:
            return 0.0
        caught = [(test, worth, outcome) for test, worth, outcome in zip(self.tests, self.worth, self.outcomes,
                                                                         strict=True) if worth and test in self.caught]
        if self.episode_ending:  # only bugs really fixed keep their credit
            caught = [(test, worth, outcome) for test, worth, outcome in caught if self.really_passes(test, outcome)]
        credited = sum(worth for _, worth, _ in caught)
        return (sum(self.worth) + self.config.bug_credit * credited) / total

    def global_reward(self) -> float:
        return sum(o.passed for o in self.hidden) / len(self.hidden) if self.hidden else 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return bool(self.hidden) and all(o.passed for o in self.hidden)

    def is_done(self) -> bool:
        """Agreement: the coder's code passes every valid test of the tester (at least one) and
        the hidden tests, which the tester did not write."""
        checked = [o for o in self.outcomes if o is not None]
        return self.code is not None and bool(checked) and all(o.passed for o in checked) and self.is_success()

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        return instructions(self.instance, self.config.max_tests, agent)

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
                limit = self.config.shown_chars
                vacuous = [i for i, nothing in enumerate(self.checks_nothing) if nothing]
                weak = [i for i, nothing in enumerate(self.kills_nothing) if nothing]
                invalid = [i for i, ok in enumerate(self.valid) if not ok and i not in vacuous and i not in weak]
                parts.append(f"Your current tests: {len(self.tests)}, of which {n_valid} are valid.")
                if invalid:
                    parts += ["Invalid tests (a correct reference solution fails them):",
                              *(f"- test {i + 1}: {show_test(self.tests[i], limit)}" for i in invalid)]
                if vacuous:
                    parts += ["Tests that check no result (they still pass when every result of the function "
                              "is changed), so they earn nothing:",
                              *(f"- test {i + 1}: {show_test(self.tests[i], limit)}" for i in vacuous)]
                if weak:
                    parts += ["Tests that plausible wrong versions of the function pass too (they check nothing "
                              "this problem's answer depends on), so they earn nothing:",
                              *(f"- test {i + 1}: {show_test(self.tests[i], limit)}" for i in weak)]
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
