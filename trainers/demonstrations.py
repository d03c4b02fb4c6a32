"""Demonstrations for a warm start: the scripted oracle's actions on the train split, with
mistakes injected at a documented rate, for the multi-agent roles and the single-agent view.

RL sharpens what a policy can already sometimes do; a random model gives all-degenerate
groups (docs/design.md §4). :mod:`trainers.sft` fine-tunes on these demonstrations so the
warm policy solves some held-out problems, and the mistakes keep it imperfect, so there is
something left for RL to fix.

**Tool programs a small model can write.** The envs' scripted tool writes a full solver (a
BFS or a backtracking search, 700-900 bytes of general Python), which a byte-level model of
a few million parameters cannot learn to write in minutes of CPU. What it can learn is fixed
text and verbatim copying, so the demonstrated tool program is the board copied verbatim
into a string literal followed by a fixed solver for it: a breadth-first search for
``plan_path_v0`` (:data:`MAZE_SOLVER`, 400 bytes in all on a 3x3 maze) and, for
``sudoku_v0``, the digit missing from each empty cell's row and column
(:data:`SUDOKU_SOLVER`, 290 bytes on a 4x4 board; exact with up to two empty cells). The
program runs in the sandbox and is scored like any program. Working the answer out in its
head (a path, a cell's missing digit) is what a model this size does not learn; the
program does it, the division of labour the tool agent exists for. (An earlier version
had the tool print the oracle's answer in one line, ``print("MOVES: U R")``: its warm tool
printed the same moves on every maze.) :class:`ScriptedPartners` still uses that one-line
program (``solver_programs=False``): the partner is not trained, and it keeps the trained
role's prompt short.

**The planner takes the tool's answer over.** When the tool's program printed an answer this
turn, the planner's demonstration is that answer, right or wrong, or at ``mistake_rate`` a
mistake of its own (the solution with one item changed); otherwise it is the oracle's answer
worked out from the board.
Copying is the skill the team needs from the planner, and one a small model learns: an
earlier version demonstrated the oracle's answer regardless of the tool's, and its warm
planner never learned to copy (agreeing with the tool only when the tool happened to be
right, it could not tell when copying pays).

**Mistakes** (``mistake_rate``): each demonstrated answer is independently replaced, with
that probability, by a corrupted one. A tool program's board copy gets one cell wrong (a
maze cell copied as a wall, free or the goal; a sudoku digit changed or a given left
empty), chosen so that the program prints a wrong answer or, where no such cell turns up
(a constrained sudoku), raises; a planner's answer is the solution with one item changed
(one move to another direction, one value). A corrupted answer is well-formed (the format
is learned either way); it just does not solve the task.

**Brief instructions** (:class:`BriefInstructions`, optional): the envs' system messages
are 450-700 bytes of English per role (1,100-1,500 for the single-agent view), the same
every episode. A byte-level model trained from scratch cannot read them; to it they are a
role tag that costs one token per byte in every forward. The wrapper replaces each system
message by a one-line tag naming the role and the answer format (:data:`BRIEF`), which
makes prompts 3-4x shorter on CPU. The user message (board, history, tool output) and
everything else about the env are unchanged.

Supported envs: ``plan_path_v0`` and ``sudoku_v0`` (:data:`ANSWERS`).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

import pettingllm_envs
from pettingllm_envs.evaluation.single_agent_env import SOLO, single_agent_env
from pettingllm_envs.policies import scripted_policy

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Demonstration:
    """One (prompt, action) pair: ``policy_role`` is the env role (or ``solo``) that acts."""

    policy_role: str
    messages: Messages
    action: str
    corrupted: bool


@dataclass(frozen=True)
class AnswerFormat:
    """How an env's oracle answer is read, corrupted and written by the tool and the planner."""

    parse: Callable[[str], list[str]]
    """The answer's items from the oracle planner's reply (moves, or ``r c v`` triples)."""
    corrupt: Callable[[list[str], random.Random, int], list[str]]
    """A well-formed but wrong version of the items (the last argument: the sudoku's size)."""
    tool_output: Callable[[list[str]], str]
    """What the compact tool program prints."""
    planner_reply: Callable[[list[str]], str]
    """The planner's reply."""
    parse_output: Callable[[str], list[str]]
    """The answer's items from a tool program's printed output."""
    board_program: Callable[[str, int, random.Random | None], tuple[str, list[str], bool] | None] | None = None
    """A short generic solver over a verbatim copy of the board in the observation (see the
    module docstring): ``(program, the items it prints, corrupted)``, or None when the board
    is not one it solves; given an rng, one digit of the copy is changed so that it prints a
    wrong answer. None: the tool prints the oracle's answer (:func:`compact_program`)."""


_DIRECTIONS = ("U", "D", "L", "R")


def _parse_moves(reply: str) -> list[str]:
    return reply.split("MOVES:", 1)[1].split()


def _corrupt_moves(moves: list[str], rng: random.Random, size: int) -> list[str]:
    changed = list(moves)
    i = rng.randrange(len(changed))
    changed[i] = rng.choice([d for d in _DIRECTIONS if d != changed[i]])
    return changed


def _parse_triples(reply: str) -> list[str]:
    return [t.strip() for t in reply.split("PLACE:", 1)[1].split(";") if t.strip()]


def _corrupt_triples(triples: list[str], rng: random.Random, size: int) -> list[str]:
    changed = list(triples)
    i = rng.randrange(len(changed))
    r, c, v = changed[i].split()
    changed[i] = f"{r} {c} {rng.choice([x for x in range(1, size + 1) if x != int(v)])}"
    return changed


def _printed_moves(printed: str) -> list[str]:
    """The moves of a printed ``MOVES: U R`` line ([] unless the output is exactly that)."""
    return printed.split()[1:] if re.fullmatch(r"MOVES:( [UDLR])+", printed) else []


def _printed_triples(printed: str) -> list[str]:
    """The triples of a printed ``r c v; r c v`` line ([] unless the output is exactly that)."""
    return [t.strip() for t in printed.split(";")] if re.fullmatch(r"\d+ \d+ \d+(; \d+ \d+ \d+)*", printed) else []


def _miscopied(board: list[str], printed: list[str], miscopy: Callable[[list[str]], list[str]],
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


def _board_rows(observation: str, size: int) -> list[str] | None:
    """The board as the env renders it (row lines ``rN  ...`` and the rule lines between
    them), or None when the observation has none."""
    lines = observation.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("r1 ")), None)
    last = next((i for i, line in enumerate(lines) if line.startswith(f"r{size} ")), None)
    if first is None or last is None or last < first:
        return None
    return lines[first:last + 1]


def _grid(board: list[str], size: int) -> list[list[str]]:
    """The cells of the board's row lines (``.`` for an empty one)."""
    keep = set("123456789"[:size]) | {"."}
    return [[x for x in line[2:] if x in keep] for line in board if line.startswith("r")]


def _still_solves(printed: list[str], solution: list[str], board: list[str], size: int) -> bool:
    """Whether placing ``printed`` on ``board`` solves it anyway: every solution triple is
    there and any other one only repeats a given."""
    grid = _grid(board, size)
    extra = [t.split() for t in set(printed) - set(solution)]
    return set(solution) <= set(printed) and all(grid[int(r) - 1][int(c) - 1] == v for r, c, v in extra)


def _solver_prints(board: list[str], size: int) -> list[str] | None:
    """What :func:`_sudoku_program`'s program prints for this board copy (the same steps in
    Python, so a corruption is checked without running anything), or None when it raises.
    Each empty cell gets the smallest digit absent from its row and its column: the solution
    whenever no empty cell shares both its row and its column with other empty cells (always
    so with two of them)."""
    digits = set("123456789"[:size])
    grid = _grid(board, size)
    if len(grid) != size or any(len(row) != size for row in grid):
        return None
    printed = []
    for r in range(size):
        for c in range(size):
            if grid[r][c] == ".":
                left = digits - set(grid[r]) - {row[c] for row in grid}
                if not left:
                    return None
                printed.append(f"{r + 1} {c + 1} {min(left)}")
    return printed


#: The sudoku tool's program after the board literal (``{digits}`` and ``{size}`` filled in).
SUDOKU_SOLVER = (
    "g=[[x for x in l[2:]if x in'.{digits}']for l in B.split('\\n')if'r'==l[0]]\n"
    "print('; '.join(f'{{r+1}} {{c+1}} {{min({{*\"{digits}\"}}-{{*g[r]}}-{{m[c]for m in g}})}}'"
    "for r in range({size})for c in range({size})if'.'==g[r][c]))"
)


def _sudoku_program(observation: str, size: int, rng: random.Random | None) -> tuple[str, list[str], bool] | None:
    board = _board_rows(observation, size)
    printed = _solver_prints(board, size) if board is not None else None
    if board is None or printed is None:
        return None
    digits = "123456789"[:size]
    corrupted = False
    if rng is not None:  # a digit changed, or a given copied as empty
        givens = [(r, i) for r, line in enumerate(board) if line.startswith("r")
                  for i, ch in enumerate(line) if i >= 2 and ch in digits]

        def miscopy(board: list[str]) -> list[str]:
            r, i = rng.choice(givens)
            line = board[r][:i] + rng.choice(digits.replace(board[r][i], "") + ".") + board[r][i + 1:]
            return [*board[:r], line, *board[r + 1:]]

        board, printed, corrupted = _miscopied(board, printed, miscopy, lambda copy: _solver_prints(copy, size),
                                               lambda wrong: _still_solves(wrong, printed, board, size))
    literal = "\n".join(board)
    program = f"```python\nB='''{literal}'''\n{SUDOKU_SOLVER.format(digits=digits, size=size)}\n```"
    return program, printed, corrupted


_STEPS = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def _maze_rows(observation: str) -> list[str] | None:
    """The grid lines the env shows after its ``Grid (...):`` line, or None."""
    lines = observation.splitlines()
    first = next((i + 1 for i, line in enumerate(lines) if line.startswith("Grid (")), None)
    if first is None:
        return None
    rows = list(itertools.takewhile(lambda line: line and set(line) <= set(".#AG"), lines[first:]))
    return rows or None


def _bfs_prints(grid: list[str]) -> list[str] | None:
    """The moves :func:`_maze_program`'s program prints for this grid copy (the same search in
    Python, directions tried in the order U D L R), or None when it raises (no single ``A``
    or ``G``, rows of unequal length, or no path)."""
    cells = [(r, c, x) for r, row in enumerate(grid) for c, x in enumerate(row)]
    walkers, goals = [(r, c) for r, c, x in cells if x == "A"], [(r, c) for r, c, x in cells if x == "G"]
    if not walkers or not goals or len({len(row) for row in grid}) != 1:
        return None
    paths = {walkers[0]: ""}
    queue = [walkers[0]]
    for r, c in queue:
        for d, (dr, dc) in _STEPS.items():
            n = (r + dr, c + dc)
            if 0 <= n[0] < len(grid) and 0 <= n[1] < len(grid[0]) and grid[n[0]][n[1]] != "#" and n not in paths:
                paths[n] = paths[(r, c)] + d
                queue.append(n)
    return list(paths[goals[0]]) if goals[0] in paths else None


def _walk_reaches_goal(grid: list[str], moves: list[str]) -> bool:
    """Whether walking ``moves`` on ``grid`` enters the goal before a wall or the edge stops it."""
    (r, c), = [(r, c) for r, row in enumerate(grid) for c, x in enumerate(row) if x == "A"]
    for move in moves:
        r, c = r + _STEPS[move][0], c + _STEPS[move][1]
        if not (0 <= r < len(grid) and 0 <= c < len(grid[0])) or grid[r][c] == "#":
            return False
        if grid[r][c] == "G":
            return True
    return False


#: The plan-path tool's program after the grid literal: a breadth-first search.
MAZE_SOLVER = (
    "R,C=len(G),len(G[0])\n"
    "s=[(r,c)for r in range(R)for c in range(C)if G[r][c]=='A'][0]\n"
    "P={s:''};Q=[s]\n"
    "for r,c in Q:\n"
    " for d,a,b in('U',-1,0),('D',1,0),('L',0,-1),('R',0,1):\n"
    "  n=(r+a,c+b)\n"
    "  if 0<=n[0]<R and 0<=n[1]<C and G[n[0]][n[1]]!='#'and n not in P:P[n]=P[(r,c)]+d;Q.append(n)\n"
    "print('MOVES:',' '.join(P[[(r,c)for r in range(R)for c in range(C)if G[r][c]=='G'][0]]))"
)


def _maze_program(observation: str, size: int, rng: random.Random | None) -> tuple[str, list[str], bool] | None:
    grid = _maze_rows(observation)
    printed = _bfs_prints(grid) if grid is not None else None
    if grid is None or printed is None:
        return None
    corrupted = False
    if rng is not None:  # a free cell copied as a wall or as the goal, a wall as free or as the goal
        cells = [(r, c) for r, row in enumerate(grid) for c, x in enumerate(row) if x in ".#"]

        def miscopy(grid: list[str]) -> list[str]:
            r, c = rng.choice(cells)
            cell = rng.choice(".#G".replace(grid[r][c], ""))
            changed = [row.replace("G", ".") if cell == "G" else row for row in grid]
            changed[r] = changed[r][:c] + cell + changed[r][c + 1:]
            return changed

        grid, printed, corrupted = _miscopied(grid, printed, miscopy, _bfs_prints,
                                              lambda wrong: _walk_reaches_goal(grid, wrong))
    literal = "\n".join(grid)
    return f"```python\nG='''{literal}'''.split()\n{MAZE_SOLVER}\n```", printed, corrupted


#: Answer formats of the supported envs.
ANSWERS: dict[str, AnswerFormat] = {
    "plan_path_v0": AnswerFormat(_parse_moves, _corrupt_moves, lambda m: "MOVES: " + " ".join(m),
                                 lambda m: "MOVES: " + " ".join(m), _printed_moves, board_program=_maze_program),
    "sudoku_v0": AnswerFormat(_parse_triples, _corrupt_triples, lambda t: "; ".join(t),
                              lambda t: "PLACE: " + "; ".join(t), _printed_triples,
                              board_program=_sudoku_program),
}


#: The brief system message of every role (and of the single-agent view) per env.
BRIEF: dict[str, dict[str, str]] = {
    "plan_path_v0": {
        "tool": "Role: tool. Maze: a ```python block that prints MOVES: U D L R to the goal.",
        "planner": "Role: planner. Maze: reply MOVES: U D L R to the goal.",
        SOLO: "Role: solo. Maze: reply ### tool, a ```python block that prints MOVES, then ### planner, MOVES.",
    },
    "sudoku_v0": {
        "tool": "Role: tool. Sudoku: a ```python block that prints the empty cells as r c v; r c v.",
        "planner": "Role: planner. Sudoku: reply PLACE: r c v; r c v for the empty cells.",
        SOLO: "Role: solo. Sudoku: reply ### tool, a ```python block that prints r c v; ..., then ### planner, PLACE:.",
    },
}


class BriefInstructions(BaseWrapper):
    """An env whose chat prompts carry a one-line system message (:data:`BRIEF`) instead of
    the env's instructions; the user message and the env's dynamics are unchanged."""

    def __init__(self, env: AECEnv, env_id: str) -> None:
        super().__init__(env)
        self.brief = BRIEF[env_id]

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        return {agent: self._brief(agent, info) for agent, info in self.env.infos.items()}

    def _brief(self, agent: str, info: dict[str, Any]) -> dict[str, Any]:
        messages = info.get("messages")
        if not messages or messages[0].get("role") != "system":
            return info
        return {**info, "messages": [{"role": "system", "content": self.brief[agent]}, *messages[1:]]}

    def observe(self, agent: str) -> Any:
        messages = self.infos[agent].get("messages")
        return "\n\n".join(m["content"] for m in messages) if messages else self.env.observe(agent)


class ScriptedPartners(BaseWrapper):
    """An env in which ``roles`` are played by the demonstration oracle without mistakes
    (:class:`DemonstrationPolicy`, compact tool programs): whenever one of them is to move it
    acts inside ``reset``/``step``, so a rollout only ever sees the other roles' turns. The
    scripted roles stay in ``agents`` (their rewards and dead steps follow the AEC protocol);
    they simply never have a live turn left for the trainer."""

    def __init__(self, env: AECEnv, env_id: str, roles: tuple[str, ...]) -> None:
        super().__init__(env)
        self.scripted = roles
        # the oracle's answer printed in one line: the partner is not trained, and a short
        # program keeps the trained role's prompt short
        self.partner = DemonstrationPolicy(env_id, 0.0, random.Random(0), solver_programs=False)

    def _play_scripted(self) -> None:
        env = self.env
        while env.agents and env.agent_selection in self.scripted:
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                return  # the episode is over: the rollout steps the dead agents itself
            action, _ = self.partner.act(agent, env.observe(agent), env.infos[agent])
            env.step(action)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self._play_scripted()

    def step(self, action: Any) -> None:
        self.env.step(action)
        self._play_scripted()


def make_view(env_id: str, env_kwargs: dict[str, Any], *, single_agent: bool, brief: bool,
              scripted: tuple[str, ...] = ()) -> AECEnv:
    """The multi-agent env or its single-agent view, with brief instructions or the env's own,
    and optionally some roles played by the oracle (:class:`ScriptedPartners`)."""
    env = single_agent_env(env_id, **env_kwargs) if single_agent else pettingllm_envs.make(env_id, **env_kwargs)
    if scripted:
        env = ScriptedPartners(env, env_id, scripted)
    return BriefInstructions(env, env_id) if brief else env


def compact_program(printed: str) -> str:
    """A tool action whose program prints ``printed`` (see the module docstring)."""
    return f"```python\nprint({printed!r})\n```"


def check_supported(env_id: str) -> AnswerFormat:
    if env_id not in ANSWERS:
        raise ValueError(f"demonstrations exist for {sorted(ANSWERS)}, not {env_id!r}")
    return ANSWERS[env_id]


class DemonstrationPolicy:
    """The oracle with programs a small model can write, a planner that takes the tool's answer
    over, and injected mistakes, for one env (see the module docstring)."""

    def __init__(self, env_id: str, mistake_rate: float, rng: random.Random, size: int = 9, *,
                 solver_programs: bool = True) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate}")
        self.format = check_supported(env_id)
        self.solver_programs = solver_programs
        self.oracle = scripted_policy(env_id)
        self.mistake_rate = mistake_rate
        self.rng = rng
        self.size = size

    def answer(self, observation: str, info: dict[str, Any]) -> tuple[list[str], bool]:
        """The oracle planner's answer items for this board, corrupted with ``mistake_rate``."""
        items = self.format.parse(self.oracle(observation, "planner", info))
        if items and self.rng.random() < self.mistake_rate:
            return self.format.corrupt(items, self.rng, self.size), True
        return items, False

    def act(self, role: str, observation: str, info: dict[str, Any]) -> tuple[str, bool]:
        if role == "tool" and self.solver_programs and self.format.board_program is not None:
            corrupt = self.rng.random() < self.mistake_rate
            made = self.format.board_program(observation, self.size, self.rng if corrupt else None)
            oracle = self.format.parse(self.oracle(observation, "planner", info))
            if made is not None and (made[2] or sorted(made[1]) == sorted(oracle)):
                return made[0], made[2]
        if role != "tool":  # the planner takes over what the tool printed this turn, if anything
            printed = tool_output_this_turn(observation)
            items = self.format.parse_output(printed) if printed is not None else []
            if items:
                if self.rng.random() >= self.mistake_rate:
                    return self.format.planner_reply(items), False
                # a mistake of its own: the solution with one item changed (changing one item of
                # a wrong copy could right it)
                solution = self.format.parse(self.oracle(observation, "planner", info))
                return self.format.planner_reply(self.format.corrupt(solution, self.rng, self.size)), True
        items, corrupted = self.answer(observation, info)
        if role == "tool":
            return compact_program(self.format.tool_output(items)), corrupted
        return self.format.planner_reply(items), corrupted


def multi_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                               seed: int, *, brief: bool = False, scripted: tuple[str, ...] = ()
                               ) -> list[Demonstration]:
    """Every role's demonstrated action at every step of one episode per train problem. The
    episodes continue with the demonstrated (possibly wrong) actions, so later turns show the
    states a mistake leads to and the oracle's recovery from them. Roles in ``scripted`` are
    played by the oracle without mistakes inside the env (:class:`ScriptedPartners`) and get
    no demonstrations."""
    policy = DemonstrationPolicy(env_id, mistake_rate, random.Random(seed), env_kwargs.get("size", 9))
    env = make_view(env_id, {**env_kwargs, "split": "train"}, single_agent=False, brief=brief, scripted=scripted)
    demos = []
    for problem in problems:
        env.reset(seed=problem)
        for agent in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            action, corrupted = policy.act(agent, observation, info)
            demos.append(Demonstration(agent, [dict(m) for m in info["messages"]], action, corrupted))
            env.step(action)
    env.close()
    return demos


def single_agent_demonstrations(env_id: str, env_kwargs: dict[str, Any], problems: range, mistake_rate: float,
                                seed: int, *, brief: bool = False, scripted: tuple[str, ...] = ()
                               ) -> list[Demonstration]:
    """The single-agent view's demonstrations: one reply per turn with a ``### <role>``
    section per role, each section the multi-agent role's demonstration (independently
    corrupted), worked out from the board the turn starts from."""
    policy = DemonstrationPolicy(env_id, mistake_rate, random.Random(seed), env_kwargs.get("size", 9))
    env = make_view(env_id, {**env_kwargs, "split": "train"}, single_agent=True, brief=brief)
    demos = []
    for problem in problems:
        env.reset(seed=problem)
        solo = env.unwrapped
        for _ in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            sections, any_corrupted = [], False
            for role in solo.roles:
                inner_observation = solo.inner.observe(role)
                action, corrupted = policy.act(role, inner_observation, solo.inner.infos[role])
                sections.append(f"### {role}\n{action}")
                any_corrupted |= corrupted
            reply = "\n".join(sections)
            demos.append(Demonstration(SOLO, [dict(m) for m in info["messages"]], reply, any_corrupted))
            env.step(reply)
    env.close()
    return demos



def tool_output_this_turn(observation: str) -> str | None:
    """What the tool's program printed this turn, as the env shows it to the next role (the
    text after ``Program output:`` up to the next blank line), or None."""
    turn = observation.rfind("This turn the tool agent wrote:")
    start = observation.find("Program output:\n", turn) if turn >= 0 else -1
    printed = observation[start + len("Program output:\n"):].split("\n\n", 1)[0] if start >= 0 else ""
    printed = printed.split("Traceback (most recent call last):", 1)[0].strip()  # a failed program's error
    return printed or None
