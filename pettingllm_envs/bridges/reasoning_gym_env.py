"""reasoning-gym tasks as a team env: ``reasoning_gym_v0`` with ``dataset="countdown"``.

| Property            | Value                                                                        |
|---------------------|------------------------------------------------------------------------------|
| Id / import         | `reasoning_gym_v0` (needs `pip install -e '.[reasoning-gym]'`, 0.1.25)        |
| Datasets            | `dataset=`: any reasoning-gym dataset but those in                            |
|                     | `reasoning_gym_datasets.UNSUPPORTED` (listed there with the reason);         |
|                     | `dataset_config=` its options (a dict; not `seed`/`size`: `data_seed` seeds) |
| Roles (turn order)  | `reasoner`, `tool`                                                            |
| Observation         | `TextObservation` (a `str`): role instructions, the task, latest answers     |
| Action              | `UnicodeText(max_action_chars)`: free text                                    |
| reasoner's action   | reasoning ending in `<answer>final answer</answer>` (the last tag counts)     |
| tool's action       | a ```` ```python ```` block run in the sandbox; it checks the reasoner's      |
|                     | answer with code and prints the answer (all its output, or its last           |
|                     | `<answer>...</answer>`)                                                       |
| Team state G        | 1 if the team's answer (the latest action's; none after an action without     |
|                     | one) gets full credit from the dataset's own `score_answer`, else 0           |
| Local reward        | potential-based: the change of L = 1 if the role's own latest answer gets     |
|                     | full credit, else 0; penalties for format, refused answers, program errors   |
| Reward bounds       | local per action in `[-max(1, format, tool_error), 1]` (a role that drops a   |
|                     | right answer loses its 1); each role's local return at most 1; global in      |
|                     | `{-1, 0, 1}` per step, G in `{0, 1}`                                          |
| Termination         | both roles' latest answers agree (equal up to whitespace), or both are right  |
| Truncation          | `max_turns` turns (default 4)                                                 |
| Config              | `ReasoningGymConfig`: dataset, dataset_config, tool_timeout, ...             |

**Scoring.** An answer first passes the guards of
:mod:`pettingllm_envs.bridges.reasoning_gym_answers` (a length limit, no code for the
scorers that evaluate answers, one number or no more words than the reference where the
scorer reads only the start of the answer); one that fails is invalid (``format_penalty``,
the reason in infos) and never reaches ``score_answer``. ``score_answer`` of the dataset
then gives a score (kept in ``last_action["parsed"]["score"]``, clipped to [0, 1]), and only
exactly 1.0 counts as right, unless the answer is a hedge (:func:`~.reasoning_gym_answers.hedge`:
it still gets full credit with a candidate dropped; scored as a wrong answer, the reason in
``parsed["hedge"]``): a score below 1 pays formats and near misses (countdown pays
0.01 for an empty answer, 0.05 for any expression with the wrong numbers; the default
scorer pays ``len(gold)/len(answer)`` for any answer containing the gold), so paying it
would make a hedge, a dump or junk earn more than an honest wrong answer, and no tolerance
is allowed (spell_backward's float sum reaches 1.0000000000000002 for the gold plus a
letter). A scorer that raises scores 0. Scorers run in the env's process, unbounded in
time: the guards keep every bridged scorer to milliseconds on hostile answers
(``tests/adversarial/test_reasoning_gym_attacks.py``), not a timeout.

**Rewards** are potential-based (docs/design.md §3): every role is paid ``alpha`` times
the change of G after each action, and each role the change of its own L, so a role's
return is ``alpha * G_final + L_final`` minus its penalties: repeating a right answer
while the other role disagrees earns it once, and a failed episode never out-earns a
solved one. Agreeing on a wrong answer ends the episode with nothing. Every action replaces
its role's answer and the team's (:class:`~pettingllm_envs.core.answer_team.AnswerTeamEnv`):
an action without an answer (a format error, a refused answer, a failed program) withdraws
them, so it costs what a wrong answer costs plus its penalty, never less.

**Problems** are items of the reasoning-gym dataset seeded with ``data_seed``: problem
``i`` of a split is the first of the items drawn from ``Random(data_seed + i)`` whose
question (with the dataset name) hashes into that split, so train and test never share a
question. The scripted oracle is the dataset's answer of the problem that
``infos[agent]["problem"]`` names (dataset, options, ``data_seed``, ``test_percent``, index
and split; never the answer), rebuilt in whichever process the oracle runs
(``core.answer_team.referenced_answer``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingzoo import AECEnv

from pettingllm_envs.bridges.reasoning_gym_answers import extract_answer, hedge, normalise, program_answer, refusal
from pettingllm_envs.bridges.reasoning_gym_datasets import (
    Problem,
    all_datasets,
    config_key,
    load_dataset,
    load_problem,
    pool_size,
    supported_datasets,
)
from pettingllm_envs.capabilities import Voting
from pettingllm_envs.core import ActionResult, TextAECEnv, answer_team, make_parallel_env, wrap_env
from pettingllm_envs.core.process_shared import process_resource
from pettingllm_envs.core.tools import SHOWN_CODE_CHARS, ToolEnvConfig, program_answers

ROLES = answer_team.ROLES
#: How much of a role's reply and answer later observations show.
SHOWN_REPLY_CHARS = 3000
SHOWN_ANSWER_CHARS = 2000
REPLY_VIEW = answer_team.ReplyView(reply_chars=SHOWN_REPLY_CHARS, code_chars=SHOWN_CODE_CHARS,
                                   answer_chars=SHOWN_ANSWER_CHARS)
#: Full credit: scorers return exactly 1.0 for a right answer. No tolerance either way:
#: spell_backward's sum of per-character credit reaches 1.0000000000000002 (and 0.9999999999999999)
#: for answers that only start with the gold.
FULL_CREDIT = 1.0


@dataclass
class ReasoningGymConfig(ToolEnvConfig):
    """Configuration of ``reasoning_gym_v0``."""

    dataset: str = "basic_arithmetic"
    """The reasoning-gym dataset (``reasoning_gym_datasets.supported_datasets()``)."""
    dataset_config: dict[str, Any] | None = None
    """Options of the dataset's config class (e.g. ``{"min_numbers": 3}`` for countdown), as
    JSON-like values; ``seed`` and ``size`` are the env's (``data_seed``)."""

    def validate(self) -> None:
        super().validate()
        if self.alpha < 0:
            raise ValueError("alpha must be >= 0, or a right answer could earn less than a wrong one")
        config_key(self.dataset_config)  # JSON-like, or a ValueError now


class raw_env(answer_team.AnswerTeamEnv[Problem]):
    """The reasoning-gym team environment (see the module docstring)."""

    has_local_state = True  # each role is paid the change of its local_state

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "reasoning_gym_v0", "is_parallelizable": False
    }
    human_role = "reasoner"
    config_class = ReasoningGymConfig
    config: ReasoningGymConfig
    shared_attributes = TextAECEnv.shared_attributes | {"dataset", "dataset_key"}
    problem_fields = ("dataset", "dataset_config", "data_seed", "test_percent")

    def __init__(self, config: ReasoningGymConfig | None = None, *, render_mode: str | None = None,
                 **overrides: Any) -> None:
        super().__init__(config, render_mode=render_mode, **overrides)
        self.dataset_key = config_key(self.config.dataset_config)
        # Made now, so that an unknown dataset or option fails at construction.
        self.dataset = process_resource(load_dataset, self.config.dataset, self.dataset_key, self.config.data_seed)

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> Problem:
        item = rng.randrange(pool_size(self.config.dataset))
        return load_problem(self.config.dataset, self.dataset_key, self.config.data_seed, item)

    def instance_key(self, problem: Problem) -> str:
        return f"{problem.dataset}\n{problem.question}"

    def start_episode(self, problem: Problem) -> None:
        self.start_answers()

    # -------------------------------------------------------------- actions
    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "reasoner":
            answer, reason = extract_answer(text)
            if answer is None:
                return ActionResult(-self.config.format_penalty, valid=False, invalid_reason=reason)
            return self._answer(agent, answer, {})
        outcome = answer_team.read_tool_answer(text, self.config, program_answer)
        if isinstance(outcome, ActionResult):
            return outcome
        answer, run = outcome
        return self._answer(agent, answer, {"code": run.code}, run.feedback)

    def _answer(self, agent: str, answer: str, parsed: dict[str, Any], feedback: str = "") -> ActionResult:
        """Score a role's answer; a scored one becomes the role's and the team's answer."""
        refused = refusal(self.config.dataset, answer, self.instance.answer)
        if refused is not None:
            return ActionResult(-self.config.format_penalty, valid=False, parsed={**parsed, "answer": answer[:200]},
                                invalid_reason=refused, feedback=feedback)
        raw = self.raw_score(answer)
        score = min(max(raw, 0.0), 1.0)
        parsed = {**parsed, "answer": answer, "score": score}
        hedged = None
        if raw == FULL_CREDIT:  # exact: before any clipping
            hedged = hedge(answer, self.instance.answer, lambda rest: self.raw_score(rest) == FULL_CREDIT)
        if hedged is not None:  # a wrong answer: the right one among others solves nothing
            parsed.update(score=0.0, hedge=hedged)
        self.record_answer(agent, answer, raw == FULL_CREDIT and hedged is None)
        return ActionResult(0.0, parsed={**parsed, "correct": self.correct[agent]}, feedback=feedback)

    def raw_score(self, answer: str) -> float:
        """The dataset's own score of ``answer`` for this problem as it gave it; 0 when it raises."""
        try:
            score = float(self.dataset.score_answer(answer, self.instance.entry))
        except Exception:  # a scorer that chokes on model text scores it as wrong, never crashes the env
            return 0.0
        return score if score == score else 0.0  # NaN is wrong

    # ------------------------------------------------------------ rewards
    def local_state(self, agent: str) -> float:
        return 1.0 if self.correct[agent] else 0.0

    def is_done(self) -> bool:
        reasoner, tool = self.answers["reasoner"], self.answers["tool"]
        if reasoner is None or tool is None:
            return False
        return normalise(reasoner) == normalise(tool) or all(self.correct.values())

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        return answer_team.role_instructions(
            agent, "a reasoning task", tool_timeout=self.config.tool_timeout,
            reasoner="You are the reasoner. Think step by step, check the tool agent's program and output if there is "
                     "one, and end with your final answer between <answer> and </answer>: only the answer, exactly in "
                     "the format the task asks for.",
            tool="You are the tool agent. Write a Python program in a ```python code block that checks the reasoner's "
                 "answer (or works the task out) and prints the answer, exactly in the format the task asks for: "
                 "either only the answer, or the answer between <answer> and </answer>.",
        )

    def task_view(self, agent: str) -> str:
        return REPLY_VIEW.task_view(self, agent, f"Task:\n{self.instance.question}", "Latest reply ({when}), {who}:")

    def render_state(self) -> str:
        return (f"[{self.config.dataset}] {self.instance.question}\nturn {self.turn} answers {self.answers} "
                f"(team correct: {self.team_correct}) reference {self.instance.answer!r}")

    def extra_info(self, agent: str) -> dict[str, Any]:
        return {**super().extra_info(agent), "dataset": self.config.dataset}


def available_datasets() -> list[str]:
    """The reasoning-gym datasets ``reasoning_gym_v0`` plays (sorted)."""
    return supported_datasets()


def listing_note() -> str:
    """What ``pettingllm list`` adds to this env's description: how many datasets it plays."""
    return f"{len(available_datasets())} of {len(all_datasets())} reasoning-gym datasets, dataset=NAME"


def env(**config: Any) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


def answer_keys(env: AECEnv, agent: str, texts: Sequence[str]) -> list[str | None]:
    """The answer each candidate action of ``agent`` gives, as the env reads it (the reasoner's
    last ``<answer>``, the tool's program's output), whitespace-normalised: two answers are one
    vote when the env would count them as agreeing. None for an action without an answer."""
    if agent == "tool":
        answers = program_answers(texts, env.unwrapped.config, program_answer)
    else:
        answers = [extract_answer(text)[0] for text in texts]
    return [None if answer is None else normalise(answer) for answer in answers]


voting = Voting(keys=answer_keys)


def scripted_policy(observation: str, agent: str, info: dict[str, Any]) -> str:
    """Oracle from the dataset's answer of the problem ``info["problem"]`` names, rebuilt in
    this process: the reasoner tags it, the tool prints it. Without one the reply has no
    answer (marked invalid)."""
    return answer_team.reference_oracle(
        raw_env, agent, info, printed=lambda gold: f"<answer>{gold}</answer>",
        reasoner=lambda gold: f"Working through the task step by step gives the result.\n<answer>{gold}</answer>")
