"""The answer-team pattern: a ``reasoner`` writes a reply ending in an answer and a ``tool``
role writes a program whose output is its answer; each sees the other's latest reply, and
a scripted oracle reads the reference answer of the problem that the infos entry names.
Shared by ``math_v0`` and ``reasoning_gym_v0``, which differ only in how an answer is read and
scored.

**Every action replaces its role's answer** (:class:`AnswerTeamEnv`): the team's answer is
the answer of the latest action, and an action that gives none (unparseable, over-long, a
program that fails or prints nothing, an answer the env refuses) withdraws the role's answer
and leaves the team without one. Were the earlier answer kept instead, an action without an
answer would be the safe fallback once the team's answer is right: a wrong answer costs the
team ``alpha`` (G falls from 1 to 0) while junk kept it and paid only its penalty, so junk
would out-earn an honest wrong attempt. Withdrawn, junk costs what a wrong answer costs plus
its penalty (``tests/adversarial/test_junk_never_beats_wrong.py``).

**The oracle works in any process** (a Ray worker, a fresh interpreter that unpickled the
env, a policy server): each infos entry carries a *problem reference*, ``info["problem"]``,
the JSON-like config fields that determine the env's problems (:attr:`AnswerTeamEnv.problem_fields`)
with the episode's index and split, never the answer. :func:`referenced_answer` rebuilds the
problem from it with the process's one loader env per configuration
(:func:`~pettingllm_envs.core.process_shared.process_resource`, which shares the dataset the
env itself loaded there) and reads its reference answer. A reference that names no problem
of that configuration, or a problem other than ``info["problem_id"]`` (say, a dataset file
that changed), gets no answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, cast

from pettingllm_envs.core.actions import ActionResult
from pettingllm_envs.core.instances import Split
from pettingllm_envs.core.process_shared import process_resource
from pettingllm_envs.core.text_env import TextAECEnv
from pettingllm_envs.core.tools import ToolEnvConfig, ToolRun, read_tool_output

#: Why a tool action whose program ran but printed nothing the env reads as an answer is invalid.
NO_PROGRAM_ANSWER = "the program printed no answer"
ROLES = ("reasoner", "tool")

#: The oracle's reply when it cannot name the problem's answer (the env marks it invalid).
NO_REFERENCE_REPLY = "The oracle cannot find this problem's reference answer."


class TeamProblem(Protocol):
    """What an answer team's problem has: a content id, the same in every process, and the
    reference answer."""

    @property
    def uid(self) -> str: ...

    @property
    def answer(self) -> str: ...


ProblemT = TypeVar("ProblemT", bound=TeamProblem)


class AnswerTeamEnv(TextAECEnv[ProblemT]):
    """A reasoner and a tool role that each give an answer per action; G is 1 while the
    team's answer (the latest action's) is right. Subclasses read and score answers and call
    :meth:`record_answer` for a valid one; every other outcome leaves the role withdrawn."""

    roles = ROLES
    #: The config fields that, with an index and a split, determine a problem: what the
    #: problem reference in infos carries (JSON-like values; never the answer).
    problem_fields: ClassVar[tuple[str, ...]]

    def start_answers(self) -> None:
        """No role has answered yet (call from ``start_episode``)."""
        self.answers: dict[str, str | None] = dict.fromkeys(ROLES)
        self.correct: dict[str, bool] = dict.fromkeys(ROLES, False)
        self.team_answer: str | None = None
        self.team_correct = False

    def before_action(self, agent: str) -> None:
        """Every action replaces the role's answer: an action that gives one records it, any
        other (the base class's rejections included) leaves the role and the team without one."""
        self.withdraw_answer(agent)

    def withdraw_answer(self, agent: str) -> None:
        """``agent`` has no answer and the team has none (the latest action gave none)."""
        self.answers[agent], self.correct[agent] = None, False
        self.team_answer, self.team_correct = None, False

    def record_answer(self, agent: str, answer: str, correct: bool) -> None:
        """``agent``'s valid ``answer`` becomes its answer and the team's."""
        self.answers[agent], self.correct[agent] = answer, correct
        self.team_answer, self.team_correct = answer, correct

    def global_reward(self) -> float:
        return 1.0 if self.team_correct else 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return self.team_correct

    def extra_info(self, agent: str) -> dict[str, Any]:
        problem = cast(TeamProblem, self.instance)  # infos are made after reset, which loads the instance
        return {"problem_id": problem.uid, "problem": self.problem_reference()}

    def problem_reference(self) -> dict[str, Any]:
        """The episode's problem as :func:`referenced_answer` finds it in any process: the
        config fields that determine problems, the index and the split (a JSON copy: a reader
        that changes it changes nothing in the env)."""
        config = {name: getattr(self.config, name) for name in self.problem_fields}
        return json.loads(json.dumps({"config": config, "index": self.index, "split": self.split}))


def problem_loader(env_class: type[AnswerTeamEnv[Any]], config_json: str) -> AnswerTeamEnv[Any]:
    """An env of ``env_class`` configured by ``config_json``, used only to load problems (a
    process resource: one per process and configuration, sharing that configuration's dataset)."""
    return env_class(**json.loads(config_json))


def referenced_answer(env_class: type[AnswerTeamEnv[Any]], info: dict[str, Any]) -> str | None:
    """The reference answer of the problem that ``info["problem"]`` names, rebuilt in this
    process; None when the reference names no problem of ``env_class`` or another problem
    than ``info["problem_id"]``."""
    reference = info.get("problem")
    if not isinstance(reference, dict):
        return None
    try:
        config_json = json.dumps(reference["config"], sort_keys=True)
        split: Split = reference["split"]
        # A class is hashable; mypy's Hashable protocol does not see type.__hash__ as matching.
        loader = process_resource(problem_loader, cast(Hashable, env_class), config_json)
        problem = loader.load_instance(int(reference["index"]), split)
    except (KeyError, TypeError, ValueError, OSError):  # not a reference of this env, or its dataset is gone
        return None
    return problem.answer if problem.uid == info.get("problem_id") else None


def reference_oracle(env_class: type[AnswerTeamEnv[Any]], agent: str, info: dict[str, Any], *,
                     reasoner: Callable[[str], str], printed: Callable[[str], str]) -> str:
    """The scripted oracle's action: the reference answer of the problem ``info`` names
    (:func:`referenced_answer`), as ``reasoner(answer)`` for the reasoner and, for the tool,
    a program printing ``printed(answer)``. Without one it replies without an answer (the
    env marks that invalid)."""
    gold = referenced_answer(env_class, info)
    if gold is None:
        return NO_REFERENCE_REPLY
    if agent == "tool":
        return f"```python\nprint({printed(gold)!r})\n```"
    return reasoner(gold)


def read_tool_answer(text: str, config: ToolEnvConfig,
                     program_answer: Callable[[str], str | None]) -> tuple[str, ToolRun] | ActionResult:
    """Run the tool role's program and read its answer from what it printed with
    ``program_answer``: ``(answer, run)``, or the penalised result of a missing code block, a
    failed program or an output without an answer (``format_penalty``, :data:`NO_PROGRAM_ANSWER`)."""
    return read_tool_output(text, config, lambda stdout: (program_answer(stdout), NO_PROGRAM_ANSWER),
                            reason_format="{}")


def role_instructions(agent: str, task: str, *, reasoner: str, tool: str, tool_timeout: float) -> str:
    """``agent``'s instructions in a team that solves ``task`` (e.g. "a math problem"): the
    team's rules, then the role's own part, ``reasoner`` or ``tool`` (the tool's followed by
    its sandbox's limits)."""
    common = (
        f"You are on a team of two agents, a reasoner and a tool agent, that solves {task}. "
        "Each of you gives an answer every turn; the episode ends when your answers agree."
    )
    if agent == "reasoner":
        return f"{common}\n{reasoner}"
    return f"{common}\n{tool} The program runs in a sandbox without network access for at most {tool_timeout:g} s."


@dataclass(frozen=True)
class ReplyView:
    """How much of a past action later observations show: the end of a reply or program
    (where the answer is) and the start of its answer (None: all of it)."""

    reply_chars: int
    code_chars: int
    answer_chars: int | None = None

    def describe(self, agent: str, text: str, result: ActionResult) -> str:
        """A past action for observations: the end of the reply (or the tool's code and its
        output), its answer and why it was invalid, if it was."""
        parsed = result.parsed if isinstance(result.parsed, dict) else {}
        lines = []
        if agent == "tool":
            code = parsed.get("code")
            lines.append(f"```python\n{code[-self.code_chars:]}\n```" if code else "(no code)")
            if result.feedback:
                lines.append(f"Program output:\n{result.feedback}")
        else:
            lines.append(text[-self.reply_chars:].strip() or "(empty)")
        lines.append(f"Answer: {parsed['answer'][:self.answer_chars]}" if "answer" in parsed else "Answer: none")
        if result.invalid_reason:
            lines.append(f"(invalid: {result.invalid_reason})")
        return "\n".join(lines)

    def task_view(self, env: TextAECEnv, agent: str, task: str, heading: str) -> str:
        """The observation's task part: ``task``, the turn, and each role's latest action
        under ``heading`` (see :meth:`latest_replies`)."""
        parts = [task, "", f"Turn {env.turn + 1} of {env.config.max_turns}."]
        return "\n".join(parts + self.latest_replies(env, agent, heading))

    def latest_replies(self, env: TextAECEnv, agent: str, heading: str) -> list[str]:
        """Each role's latest action, oldest role first, under ``heading`` (a format string
        with ``{when}``, e.g. "this turn", and ``{who}``, "your" or "the tool's")."""
        lines = []
        for role in env.possible_agents:
            record = env.last_record(role)
            if record is None:
                continue
            when = "this turn" if record.turn == env.turn else f"turn {record.turn + 1}"
            who = "your" if role == agent else f"the {role}'s"
            lines.append("\n" + heading.format(when=when, who=who))
            lines.append(self.describe(record.agent, record.text, record.result))
        return lines
