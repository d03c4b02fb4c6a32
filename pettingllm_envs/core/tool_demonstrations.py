"""Demonstrations for a tool team (a ``tool`` role that writes a program, a ``planner`` that
answers), worked out from the env's state: the :class:`~pettingllm_envs.capabilities.Demonstrations`
capability of ``plan_path_v0`` and ``sudoku_v0``, each giving its :class:`TeamAnswers`.

RL sharpens what a policy can already sometimes do, so a warm start imitates these actions
first; the mistakes keep the warm policy imperfect, so there is something left for RL to fix.

**Tool programs a small model can write.** The envs' scripted tool writes a full solver (a
BFS or a backtracking search, 700-900 bytes of general Python), which a byte-level model of
a few million parameters cannot learn to write in minutes of CPU. What it can learn is fixed
text and verbatim copying, so the demonstrated tool program is the board copied verbatim
into a string literal followed by a fixed solver for it (a BFS over a maze, the digit missing
from each empty cell's row and column of a sudoku). The program runs in the sandbox and is
scored like any program. Working the answer out in its head is what a model this size does
not learn; the program does it, the division of labour the tool agent exists for. When the
fixed solver would not print the oracle's answer for a board, the tool's program prints the
oracle's answer in one line instead.

**The planner takes the tool's answer over.** When the tool's program printed an answer this
turn, the planner's demonstration is that answer, right or wrong, or at ``mistake_rate`` a
mistake of its own (the solution with one item changed); otherwise it is the oracle's
answer. Copying is the skill the team needs from the planner, and one a small model learns.

**Mistakes** (``mistake_rate``): each demonstrated answer is independently replaced, with
that probability, by a corrupted one. A tool program's board copy gets one cell wrong, chosen
(by :func:`miscopied`) so that the program prints a wrong answer or, where no such cell turns
up, raises; a planner's answer is the solution with one item changed. A corrupted answer is
well-formed (the format is learned either way); it just does not solve the task.

Everything is read from the env's state (instance, board, the tool's run this turn), never
from prompt text, so it works on any view of the env (brief prompts, the single-agent view).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pettingzoo import AECEnv

from pettingllm_envs.capabilities import Demonstrations

#: Where the sandbox's error starts in a failed program's shown output (the answer is before it).
TRACEBACK = "Traceback (most recent call last):"


@dataclass(frozen=True)
class TeamAnswers:
    """How one env's answer is worked out, corrupted, printed and written (``env`` is the raw env)."""

    solution: Callable[[Any], list[str]]
    """The oracle's answer items in the env's state (moves, or ``r c v`` placements)."""
    corrupt: Callable[[list[str], random.Random, Any], list[str]]
    """A well-formed but wrong version of the items."""
    printed: Callable[[str], list[str]]
    """The items of a tool program's printed output ([] unless it is exactly what :attr:`tool_output` writes)."""
    tool_output: Callable[[list[str]], str]
    """What a tool program prints for the items."""
    planner_reply: Callable[[list[str]], str]
    """The planner's reply for the items."""
    board_program: Callable[[Any, random.Random | None], tuple[str, list[str], bool] | None]
    """The short solver over a verbatim copy of the board: ``(program, the items it prints,
    corrupted)``, or None when the board is not one it solves; given an rng, one cell of the
    copy is wrong so that it prints a wrong answer or raises (:func:`miscopied`)."""


def compact_program(printed: str) -> str:
    """A tool action whose program prints ``printed`` in one line."""
    return f"```python\nprint({printed!r})\n```"


def printed_this_turn(env: Any, tool_role: str = "tool") -> str | None:
    """What the tool's program printed this turn as the other roles are shown it (the first
    paragraph of the shown output, before any error), or None."""
    record = env.last_record(tool_role, env.turn)
    shown = record.result.feedback if record is not None else ""
    printed = shown.split("\n\n", 1)[0].split(TRACEBACK, 1)[0].strip()
    return printed or None


def miscopied(board: list[str], printed: list[str], miscopy: Callable[[list[str]], list[str]],
              prints: Callable[[list[str]], list[str] | None], solves: Callable[[list[str]], bool],
              tries: int = 32) -> tuple[list[str], list[str], bool]:
    """A tool's mistake: ``(copy, what the program prints, corrupted)`` for the first of up to
    ``tries`` mis-copies of ``board`` whose program prints an answer that does not solve the
    real board; else the first that makes it raise (printing nothing; in constrained boards most
    mis-copies leave a cell no answer); else the clean copy."""
    raising = None
    for _ in range(tries):
        changed = miscopy(board)
        wrong = prints(changed)
        if wrong is None:
            raising = raising or changed
        elif not solves(wrong):
            return changed, wrong, True
    return (raising, [], True) if raising is not None else (board, printed, False)


@dataclass(frozen=True)
class ToolTeamOracle:
    """The demonstrations of a tool team (see the module docstring); ``demonstrations`` is the capability."""

    answers: TeamAnswers
    tool_role: str = "tool"

    def act(self, env: AECEnv, agent: str, rng: random.Random, mistake_rate: float) -> tuple[str, bool]:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate}")
        state, answers = env.unwrapped, self.answers
        if agent == self.tool_role:
            corrupt = rng.random() < mistake_rate
            made = answers.board_program(state, rng if corrupt else None)
            if made is not None and (made[2] or sorted(made[1]) == sorted(answers.solution(state))):
                return made[0], made[2]
        else:  # the planner takes over what the tool printed this turn, if anything
            printed = printed_this_turn(state, self.tool_role)
            items = answers.printed(printed) if printed is not None else []
            if items:
                if rng.random() >= mistake_rate:
                    return answers.planner_reply(items), False
                # a mistake of its own: the solution with one item changed (changing one item of
                # a wrong copy could right it)
                return answers.planner_reply(answers.corrupt(answers.solution(state), rng, state)), True
        items = answers.solution(state)
        corrupted = bool(items) and rng.random() < mistake_rate
        if corrupted:
            items = answers.corrupt(items, rng, state)
        return self._written(agent, items), corrupted

    def partner(self, env: AECEnv, agent: str) -> str:
        """The clean answer, a tool's as a one-line program (a short prompt for the trained role)."""
        return self._written(agent, self.answers.solution(env.unwrapped))

    def _written(self, agent: str, items: list[str]) -> str:
        if agent == self.tool_role:
            return compact_program(self.answers.tool_output(items))
        return self.answers.planner_reply(items)

    @property
    def demonstrations(self) -> Demonstrations:
        return Demonstrations(act=self.act, partner=self.partner)
