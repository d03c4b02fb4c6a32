"""Math: a reasoner and a tool agent solve a word problem and must agree on the answer.

| Property            | Value                                                                   |
|---------------------|-------------------------------------------------------------------------|
| Id / import         | `math_v0` / `from pettingllm_envs.math import math_v0`                   |
| Roles (turn order)  | `reasoner`, `tool` (configurable with `turn_order`)                      |
| Observation         | `TextObservation` (a `str`): role instructions, problem, latest answers  |
| Action              | `UnicodeText(max_action_chars)`: free text                               |
| reasoner's action   | step-by-step reasoning ending in `\\boxed{final answer}`                 |
| tool's action       | a ```` ```python ```` block whose program prints the answer last         |
| Team state G        | 1 if the team's answer (the latest action's; none after an action        |
|                     | without an answer) is right                                              |
| Local reward        | 1 the first time the role's own answer is right, else 0                  |
| Reward bounds       | local per action in `[-max(format, tool_error), 1]`; each role's local   |
|                     | rewards sum to at most 1 per episode; global in `{0, 1}`                 |
| Penalties           | format (no `\\boxed{}` / no code / nothing printed), tool program error   |
| Termination         | both roles' latest answers agree (`terminate_on="agreement"`), or the    |
|                     | reasoner is right (`terminate_on="reasoner_correct"`, for evaluation)    |
| Truncation          | `max_turns` turns (default 4)                                            |
| Config              | `MathConfig`: difficulty, dataset, turn_order, terminate_on, ...         |

Each turn the **reasoner** writes a solution with its final answer in ``\\boxed{}`` and the
**tool** agent writes a Python program that runs in the sandbox
(:func:`pettingllm_envs.core.tools.run_tool_program`); the last line it prints (or a
``\\boxed{}`` in its output) is its answer. A role acting later in a turn sees what the
earlier role did in that turn, and from the second turn on each role sees the other's
latest solution and answer, so disagreements can be resolved.

Answers are checked with :func:`pettingllm_envs.math.verify` (mathematical equality,
never string similarity). For every role a right answer earns ``alpha + 1`` (the local 1
only the first time: repeating a right answer while the other role keeps disagreeing
earns no more local credit), a wrong one ``0`` and an invalid action a negative penalty,
so a wrong answer always earns less than a right one. Every action replaces its role's
answer and the team's (:class:`~pettingllm_envs.core.answer_team.AnswerTeamEnv`): an action
without an answer withdraws them, so once the team is right junk costs the team's ``alpha``
like a wrong answer, plus its penalty, and is never the safe fallback. Agreement is
``verify(reasoner_answer, tool_answer)``; agreeing on a wrong answer ends the episode
without success.

Problems come from the procedural GSM-style generator
(:mod:`pettingllm_envs.math.generator`, split by a hash of the problem text) or from a
local GSM8K / MATH / AIME-style file (``dataset="path.jsonl"``) or a cached Hugging Face
dataset (``dataset="hf:name[:config[:split]]"``); dataset records are split by the same
content hash unless ``dataset_hash_split=False``.

The scripted oracle rebuilds the problem from the reference in ``infos[agent]["problem"]``
(the config fields that determine problems, the index and the split; never the answer) and
reads its gold answer, so it works in any process (``core.answer_team.referenced_answer``).
"""

from __future__ import annotations

import random
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pettingzoo import AECEnv

from pettingllm_envs.capabilities import Voting
from pettingllm_envs.core import (
    SPLITS,
    ActionResult,
    Split,
    TextAECEnv,
    answer_team,
    make_parallel_env,
    split_of,
    wrap_env,
)
from pettingllm_envs.core.process_shared import process_resource
from pettingllm_envs.core.tools import ToolEnvConfig, program_answers
from pettingllm_envs.math.datasets import FORMATS, Format, MathProblem, load_dataset_file, load_hf_dataset
from pettingllm_envs.math.generator import generate_problem
from pettingllm_envs.math.verify import BOXED, extract_boxed, verify

ROLES = answer_team.ROLES
#: When an episode ends: the roles agree (training), or the reasoner is right (evaluation).
TerminateOn = Literal["agreement", "reasoner_correct"]
TERMINATE_ON: tuple[str, ...] = typing.get_args(TerminateOn)
#: How much of a role's solution text (and of the tool's program) later observations show:
#: the end, where the answer is.
SHOWN_SOLUTION_CHARS = 3000
REPLY_VIEW = answer_team.ReplyView(reply_chars=SHOWN_SOLUTION_CHARS, code_chars=SHOWN_SOLUTION_CHARS)
#: Longest answer kept from a tool program's output.
MAX_ANSWER_CHARS = 500

#: Loaded datasets, shared by every env in the process: (dataset, format) -> problems.
_DATASETS: dict[tuple[str, str], tuple[MathProblem, ...]] = {}


@dataclass
class MathConfig(ToolEnvConfig):
    """Configuration of ``math_v0``."""

    difficulty: int = 0
    """Level of generated problems: 1 (one or two steps) to 3 (five or more); 0 mixes them."""
    dataset: str | None = None
    """None: generated problems. A path to a local ``.jsonl``/``.json``/``.parquet`` file of
    GSM8K / MATH / AIME-style records, or ``hf:name[:config[:split]]`` for a dataset in the
    local Hugging Face cache (never downloaded)."""
    dataset_format: Format = "auto"
    """Record format of ``dataset``: ``auto`` (detected per record), ``gsm8k``, ``math``, ``answer``."""
    dataset_hash_split: bool = True
    """True: dataset records are divided between train and test by a hash of the problem
    text (``test_percent``). False: every record serves both splits, for a file that is
    already one split (say, the GSM8K test set used for evaluation)."""
    turn_order: tuple[str, ...] = ROLES
    """Order in which the roles act within a turn (a permutation of reasoner and tool)."""
    terminate_on: TerminateOn = "agreement"
    """``agreement``: the episode ends when both latest answers agree (the training rule,
    it needs no ground truth). ``reasoner_correct``: it ends once the reasoner is right."""

    def validate(self) -> None:
        super().validate()
        if self.alpha < 0:
            raise ValueError("alpha must be >= 0, or a right answer could earn less than a wrong one")
        if not 0 <= self.difficulty <= 3:
            raise ValueError(f"difficulty must be 0 (mixed) or 1..3, got {self.difficulty}")
        if sorted(self.turn_order) != sorted(ROLES):
            raise ValueError(f"turn_order must be a permutation of {ROLES}, got {self.turn_order}")
        if self.terminate_on not in TERMINATE_ON:
            raise ValueError(f"terminate_on must be one of {TERMINATE_ON}, got {self.terminate_on!r}")
        if self.dataset_format not in FORMATS:
            raise ValueError(f"dataset_format must be one of {FORMATS}, got {self.dataset_format!r}")


def load_problems(dataset: str, fmt: Format) -> tuple[MathProblem, ...]:
    """The problems of ``dataset`` (a file path or ``hf:...``), loaded once per process."""
    key = (dataset, fmt)
    if key not in _DATASETS:
        if dataset.startswith("hf:"):
            name, config, split = ([*dataset[3:].split(":"), None, None])[:3]
            _DATASETS[key] = load_hf_dataset(name, split or "test", config or None, fmt)
        else:
            _DATASETS[key] = load_dataset_file(dataset, fmt)
    return _DATASETS[key]


def split_pools(dataset: str, fmt: Format, hash_split: bool, test_percent: int) -> dict[Split, tuple[MathProblem, ...]]:
    """The problems of ``dataset`` per split: by the hash of the question, or all in both splits."""
    problems = load_problems(dataset, fmt)
    if not hash_split:
        return {"train": problems, "test": problems}
    return {split: tuple(p for p in problems if split_of(p.question, test_percent) == split) for split in SPLITS}


class raw_env(answer_team.AnswerTeamEnv[MathProblem]):
    """The math environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "math_v0", "is_parallelizable": False
    }
    config_class = MathConfig
    config: MathConfig
    shared_attributes = TextAECEnv.shared_attributes | {"pools"}
    problem_fields = ("difficulty", "dataset", "dataset_format", "dataset_hash_split", "data_seed", "test_percent")

    def __init__(self, config: MathConfig | None = None, *, render_mode: str | None = None, **overrides: Any) -> None:
        super().__init__(config, render_mode=render_mode, **overrides)
        self.possible_agents = list(self.config.turn_order)
        self.pools: dict[Split, tuple[MathProblem, ...]] | None = None
        if self.config.dataset is not None:  # load now, so a bad path fails at construction
            cfg = self.config  # a process resource, so that a pickled env names its problems instead of carrying them
            self.pools = process_resource(split_pools, cfg.dataset, cfg.dataset_format, cfg.dataset_hash_split,
                                          cfg.test_percent)

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> MathProblem:
        question, answer, level, template = generate_problem(rng, self.config.difficulty)
        return MathProblem(question, str(answer), f"generated/{template}", level)

    def instance_key(self, problem: MathProblem) -> str:
        return problem.question

    def load_instance(self, index: int, split: Split) -> MathProblem:
        if self.pools is None:
            return super().load_instance(index, split)
        pool = self.pools[split]
        if not pool:
            raise ValueError(
                f"dataset {self.config.dataset} has no {split!r} problems at test_percent={self.config.test_percent}; "
                "use more records or dataset_hash_split=False"
            )
        return pool[index % len(pool)]

    def start_episode(self, problem: MathProblem) -> None:
        self.start_answers()
        self.agreed = False
        self.credited: set[str] = set()
        """Roles whose right answer has earned its local reward (once per episode)."""

    # -------------------------------------------------------------- actions
    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "reasoner":
            answer = extract_boxed(text)
            if not answer:
                return ActionResult(-self.config.format_penalty, valid=False,
                                    invalid_reason=missing_answer_reason(text))
            return self._answer(agent, answer, {"answer": answer})
        outcome = answer_team.read_tool_answer(text, self.config, program_answer)
        if isinstance(outcome, ActionResult):
            return outcome
        answer, run = outcome
        return self._answer("tool", answer, {"code": run.code, "answer": answer}, run.feedback)

    def _answer(self, agent: str, answer: str, parsed: dict[str, Any], feedback: str = "") -> ActionResult:
        """Record a role's valid answer; it becomes the team's answer."""
        correct = verify(answer, self.instance.answer)
        self.record_answer(agent, answer, correct)
        other = self.answers["tool" if agent == "reasoner" else "reasoner"]
        self.agreed = other is not None and verify(self.answers["reasoner"], self.answers["tool"])
        first = correct and agent not in self.credited
        if first:
            self.credited.add(agent)
        return ActionResult(1.0 if first else 0.0, parsed={**parsed, "correct": correct}, feedback=feedback)

    def withdraw_answer(self, agent: str) -> None:
        super().withdraw_answer(agent)
        self.agreed = False

    # ------------------------------------------------------------ rewards
    def is_done(self) -> bool:
        if self.config.terminate_on == "reasoner_correct":
            return self.correct["reasoner"]
        return self.agreed

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        return answer_team.role_instructions(
            agent, "a math problem", tool_timeout=self.config.tool_timeout,
            reasoner="You are the reasoner. Think step by step, check the tool agent's program and output if "
                     "there is one, and end with your final answer in \\boxed{...} (a number or expression, no units).",
            tool="You are the tool agent. Write a Python program in a ```python code block that computes the "
                 "answer and prints it as its last line of output (a number or expression, no units).",
        )

    def task_view(self, agent: str) -> str:
        return REPLY_VIEW.task_view(self, agent, f"Problem:\n{self.instance.question}",
                                    "Latest answer ({when}), {who} solution:")

    def render_state(self) -> str:
        return (f"{self.instance.question}\nturn {self.turn} answers {self.answers} team {self.team_answer!r} "
                f"(correct: {self.team_correct}) gold {self.instance.answer!r}")


def missing_answer_reason(text: str) -> str:
    """Why ``text`` has no final answer: no ``\\boxed{``, an unclosed one, or an empty one."""
    if BOXED.search(text) is None:
        return "no final answer in \\boxed{...} was found"
    if extract_boxed(text) is None:
        return "the \\boxed{ of the final answer is not closed: end it with a matching }"
    return "the final \\boxed{} is empty"


def program_answer(stdout: str) -> str | None:
    """The answer a program printed: a ``\\boxed{}`` in its output, else its last non-empty line."""
    boxed = extract_boxed(stdout)
    if boxed:
        return boxed[:MAX_ANSWER_CHARS]
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1][:MAX_ANSWER_CHARS] if lines else None


def env(**config: Any) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


def answer_keys(env: AECEnv, agent: str, texts: Sequence[str]) -> list[str | None]:
    """The answer each candidate action of ``agent`` gives, as the env would read it: the
    reasoner's ``\\boxed{}``, the tool's program's printed answer (run in the sandbox); None
    for an action the env would reject as invalid."""
    if agent == "tool":
        return program_answers(texts, env.unwrapped.config, program_answer)
    return [extract_boxed(text) or None for text in texts]


def verified_equal(a: str, b: str) -> bool:
    """Two answers are one vote when :func:`verify` finds them equal either way round
    (``1/2`` and ``0.5``)."""
    return verify(a, b) or verify(b, a)


voting = Voting(keys=answer_keys, same=verified_equal)


def scripted_policy(observation: str, agent: str, info: dict[str, Any]) -> str:
    """Oracle from the ground truth: the reasoner boxes the gold answer, the tool prints it.
    The gold answer is that of the problem ``info["problem"]`` names, rebuilt in this process;
    without one the reply has no answer (marked invalid)."""
    return answer_team.reference_oracle(raw_env, agent, info, printed=str,
                                        reasoner=lambda gold: "Working through the problem step by step gives the "
                                                              f"result.\n\\boxed{{{gold}}}")
