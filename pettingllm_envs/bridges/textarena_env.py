"""TextArena: its two-player games (Connect Four, Othello, Kuhn poker, Liar's dice, ...) as competitive AEC envs.

| Property            | Value                                                                        |
|---------------------|------------------------------------------------------------------------------|
| Id / import         | `textarena_v0` (needs `pip install -e '.[textarena]'`, TextArena 0.7.4)       |
| Games               | `game=`: any of the 41 two-player games of `textarena_games.GAMES`; the games |
|                     | left out are listed there with the reason (NLTK data, API keys, fixed starts) |
| Roles (turn order)  | `player_0`, `player_1`: TextArena's players 0 and 1; who moves next is the    |
|                     | game's `current_player_id` (a player may move twice: a retry, or the rules)   |
| Observation         | `TextObservation`: the game's prompt for this player, then the messages the   |
|                     | game sent this player (only the latest board), players' words quoted `> `    |
| Action              | `UnicodeText(max_action_chars)`: free text, read by the game itself (most     |
|                     | games want a bracketed move, e.g. `[col 3]`); the whole reply goes to it,     |
|                     | at most 2048 characters by default (TextArena's parsers can be quadratic)     |
| Team state G        | zero-sum, from the player's side: `(r_self - r_other) / 2` of TextArena's     |
|                     | rewards once the game is over (+1 win, -1 loss, 0 draw), 0 while it runs      |
| Local reward        | legality only: 0 for a move the game accepts, `-illegal_move_penalty` for   |
|                     | one it rejects (TextArena's invalid move), `-format_penalty` for a non-string |
|                     | or over-long action (not sent to the game)                                    |
| Reward bounds       | local per action in `[-max(format, illegal), 0]`; global in `[-1, 1]`         |
| Illegal move        | a rejected reply (refused by the game or unread) is penalised, explained in   |
|                     | infos and loses the game at once; `retry_rejected=True`: TextArena's rule,    |
|                     | the player retries (its `error_allowance`, usually 1), then loses             |
| Termination         | the game says it is over (win, loss, draw, its own turn limit)                |
| Truncation          | `max_turns` turns (default 100); an unfinished game scores as a draw (G = 0), |
|                     | (with retries, a rejected reply whose retry would start a turn past it loses)  |
| Config              | `TextArenaConfig`: game, illegal_move_penalty, retry_rejected, ...           |

**Rewards.** The base class pays every player, after each action, ``alpha`` times the change
of its team state (:meth:`raw_env.team_state`): the outcome from that player's own side. The
move that ends the game pays the winner ``alpha`` and the loser ``-alpha`` in the same step
(PettingZoo's end-of-game reward); the two global returns sum to zero. The local term only
penalises moves the game rejects: a positive credit per legal move would pay a player for
making a game last longer (the stalling attack), which TextArena's games cannot bound in
general. ``infos[agent]["success"]`` is True for the winner.

**A rejected reply loses at once** by default. Under TextArena's retry, the rejected reply's
sample is credited what the env pays its player until the player's next action, which is the
retry: -``illegal_move_penalty`` (-0.5), while a legal move that loses at the opponent's reply
is charged -1. Every rollout mode's credit window (docs/design.md §4) then ranks junk above a
legal move in a lost position (TicTacToe-v0 sweep, tests/adversarial/test_tree_branches_same_footing.py:
7 of 26 tree groups, 1 of 8 independent, 4 of 14 seated tree, 1 of 8 seated independent). A
rejected reply that loses costs -penalty - 1, below any legal move, in every mode (0 of them).
Crediting the retry's outcome to the rejected reply instead (a role's actions in a row as one
move) was measured worse: the retry's *win* flows back too, so junk then a winning retry (+0.5)
outranks a legal move that does not win (9 of 26, 3 of 8, 7 of 14, 3 of 8), at four times the
tree's continuation generations. ``retry_rejected=True`` plays TextArena's rule, for play and
evaluation; training with it reopens the ranking above.

**The last turn, with retries.** A rejected reply (refused by the game, or unread: not a string, too long)
gives the same player a retry, and a player acting again starts a new turn. So at the last
turn one invalid move would truncate the episode as a draw, and a player in a lost position
could deny the opponent its winning reply (-``illegal_move_penalty`` beats -1). The env
therefore scores a rejected reply that leaves no turn for its retry as that player's loss,
like TextArena's rule for a player out of retries. The alternatives were weighed: counting
only accepted moves as turns needs a separate bound on rejected ones (replies refused unread
never reach TextArena's retry limit), and the reply that reaches that bound would be the same
dodge; this rule costs an honest policy only an invalid move at the very last turn, which a
longer ``max_turns`` makes rare. (A legal move after which the same player moves again, a
dice game's roll, still ends the last turn as a truncation: it is a move, not a dodge.)

**Instances and splits.** An instance is a TextArena seed plus, for games whose start is
always the same (``GameSpec.opening_plies``), an opening of random legal moves drawn from
``Random(data_seed + index)``. Its content (both players' first views, the game state and,
for games that draw random numbers later, the seed) is hashed into train or test, so the
two splits never share a start. ``reset(seed=i)`` plays instance ``i``.

**Randomness.** TextArena's games draw from the global :mod:`random` module (its
``State`` calls ``random.seed(seed)``). Each env keeps its own state of that generator and
swaps it in around every call into the game, so episodes are reproducible, deep copies
continue identically, and two envs never disturb each other or the caller's ``random``
(one thread per env at a time: the swap is not thread-safe).

**Deep copies** copy TextArena's game object (its state only: the env drains TextArena's
message queues and log after every step) and share the rest: the message views and the
random state are immutable tuples, replaced at each step, never mutated.

**Legal moves.** For games with a move generator (``textarena_games``), the env tries each
candidate on a copy of the game and lists the ones TextArena accepts in
``infos[agent]["game"]["legal_actions"]`` for the player to move (legality reads only the
public state and the mover's own hand); ``legal_actions_in_info=False`` skips this (it costs
one game copy and step per candidate). The moves that win at once are listed in
``winning_actions`` only for games of perfect information (``GameSpec.perfect_information``:
13 board games); elsewhere it is None, since the trial runs on the full state: in KuhnPoker
``[call]`` would be listed exactly when the opponent's hidden card is lower, in a dice game the
trial would see the next roll. :func:`scripted_policy` plays a listed winning move, else a
legal move chosen by a hash of the observation: a decisive, reproducible opponent that sees
only what its seat sees, not an oracle (TextArena has no solver for its games).

**Forged messages.** A player's words reach the other player (TextArena shows each action
to both). Every line of them is quoted with ``> `` under a ``[Player k wrote]`` header, and
every line of the game's own messages after their first is indented, so a line that
starts with ``[GAME]`` is always the game's: a reply cannot forge a game message, a board
or a result in the opponent's view. Rewards come only from TextArena's game state. (The
quoting matters: TextArena deletes the tags ``[GAME]`` and ``[Player k]`` from a player's
words once, so a nested tag such as ``[GA[GAME]ME]`` comes out as ``[GAME]``.) As in
TextArena, a player's whole reply reaches the opponent: in games of hidden information a
reply that reasons about its own cards tells them to the other player.

**Self-play.** One shared policy can play both seats: AT-GRPO groups by (problem, agent,
turn), so each seat's candidates are normalised only against the same seat's, from the
same position.

**Modules.** The game table and move generators are in :mod:`.textarena_games`; the calls into
TextArena's game object (stepping it under its random state, draining, replaying, legality
trials) in :mod:`.textarena_driver`; the scripted opponents in :mod:`.textarena_policies`.
"""

from __future__ import annotations

import dataclasses
import difflib
import random
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import textarena
from textarena.core import GAME_ID, ObservationType

from pettingllm_envs.bridges.textarena_driver import (
    ViewLine,
    count_as_invalid,
    drain,
    legal_moves,
    new_game,
    replay,
    step_game,
)
from pettingllm_envs.bridges.textarena_games import GAMES, SINGLE_PLAYER, UNAVAILABLE, GameSpec, game_id
from pettingllm_envs.bridges.textarena_policies import scripted_policy
from pettingllm_envs.core import ActionResult, TextAECEnv, TextEnvConfig, make_parallel_env, wrap_env
from pettingllm_envs.core.actions import coerce_action
from pettingllm_envs.core.process_shared import process_resource

__all__ = ["TextArenaConfig", "available_games", "env", "game_spec", "listing_note", "parallel_env", "raw_env",
           "scripted_policy"]

ROLES = ("player_0", "player_1")
#: A message as the player's view shows it: (observation type name, the text rendered once, when it arrived).
ShownLine = tuple[str, str]
#: Why a rejected reply loses (see ``raw_env._forfeit_if_no_turn_is_left``): without retries, and with
#: them at the last turn.
NO_RETRY = "rejected replies get no retry (retry_rejected=False), so it loses the game"
NO_TURN_FOR_RETRY = "no turn is left for a retry (max_turns), so it loses the game"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def available_games() -> list[str]:
    """The TextArena games ``textarena_v0`` plays (sorted)."""
    return sorted(GAMES)


def listing_note() -> str:
    """What ``pettingllm list`` adds to this env's description: how many games it plays."""
    return f"{len(GAMES)} TextArena games, game=NAME; {len(UNAVAILABLE)} left out, with reasons: textarena_games"


@dataclass
class TextArenaConfig(TextEnvConfig):
    """Configuration of ``textarena_v0``."""

    game: str = "ConnectFour-v0"
    """The TextArena game id (``textarena_games.GAMES``)."""
    max_turns: int = 100
    """Turns before truncation (a turn: each player acts once; a player acting again, a retry or
    a dice game's next roll, starts a new one); most games end before, by their own rules or limits."""
    illegal_move_penalty: float = 0.5
    """Subtracted from the local reward of a move the game rejects (TextArena's invalid move)."""
    retry_rejected: bool = False
    """TextArena's retry after a rejected reply (its ``error_allowance``). Off: a rejected reply loses the
    game at once, so no credit window values it above a legal move (module docstring)."""
    legal_actions_in_info: bool = True
    """List the legal and the winning candidate moves of the player to move in
    ``infos[agent]["game"]`` (games with a move generator; one game copy and step per candidate)."""
    max_quoted_chars: int = 2000
    """A player's words are shown to the players cut to this many characters (the game reads them whole)."""
    max_action_chars: int = 2048
    """Longest reply sent to the game (longer ones cost ``format_penalty`` unread). Far below the base
    class's 32768 because some TextArena parsers take time quadratic in the reply's length (ConnectFour's
    ``.*\\[(?:col\\s*)?(\\d+)\\].*`` takes 29 s on 32768 ``[``): at 2048 the slowest hostile reply
    found steps in about 0.1 s, so one reply cannot stall a rollout worker."""

    def validate(self) -> None:
        super().validate()
        self.game = game_id(self.game)
        if self.game not in GAMES:
            if self.game in UNAVAILABLE:
                raise ValueError(f"TextArena game {self.game!r} is not available: {UNAVAILABLE[self.game]}")
            if self.game in SINGLE_PLAYER:
                raise ValueError(f"TextArena game {self.game!r} is not available: it is a one-player puzzle, and "
                                 "textarena_v0 plays games between two players")
            close = difflib.get_close_matches(self.game, GAMES, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown TextArena game {self.game!r}{hint} ({len(GAMES)} games: textarena_games.GAMES)")
        if self.illegal_move_penalty < 0:
            raise ValueError(f"illegal_move_penalty must be >= 0, got {self.illegal_move_penalty}")
        if self.max_quoted_chars < 1:
            raise ValueError(f"max_quoted_chars must be >= 1, got {self.max_quoted_chars}")


@dataclass(frozen=True)
class GameInstance:
    """One instance: a TextArena seed and the opening moves played from it."""

    game: str
    seed: int
    opening: tuple[str, ...]
    key: str
    """Canonical content (hashed into a split)."""


def game_spec(game: str) -> GameSpec:
    """How ``textarena_v0`` plays ``game``, by a module-level name that a pickle can refer to."""
    return GAMES[game]


class raw_env(TextAECEnv[GameInstance]):
    """A two-player TextArena game (see the module docstring)."""

    roles_compete = True  # each player's team_state is its own side of the game's outcome

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "textarena_v0", "is_parallelizable": False
    }
    roles = ROLES
    config_class = TextArenaConfig
    config: TextArenaConfig
    #: Views and the random state are immutable tuples that each step replaces, so copies share them.
    shared_attributes = TextAECEnv.shared_attributes | {"spec", "prototype", "views", "rng_state", "game_actions",
                                                        "legal_cache"}

    def __init__(self, config: TextArenaConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        super().__init__(config, render_mode=render_mode, **overrides)
        # Process resources: a pickle names them (GameSpec holds lambdas, which pickle cannot carry).
        self.spec: GameSpec = process_resource(game_spec, self.config.game)
        #: TextArena's game as made, before any reset: each episode starts from a copy (making one
        #: re-imports and, for some games, re-reads data files).
        self.prototype: Any = process_resource(textarena.make, self.config.game + "-raw")
        self.game: Any = None
        self.rng_state: tuple = random.Random(0).getstate()
        self.views: dict[str, tuple[ShownLine, ...]] = {a: () for a in ROLES}
        #: Every action the game has processed this episode, to rebuild it if TextArena ever raises
        #: (None: an action it raised on, which the rebuilt game counts as an invalid move).
        self.game_actions: tuple[str | None, ...] = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> raw_env:
        if self.game is not None:  # TextArena's read-only data stays shared (``GameSpec.shared``)
            for name in self.spec.shared:
                memo[id(getattr(self.game, name))] = getattr(self.game, name)
        return super().__deepcopy__(memo)

    # ------------------------------------------------------------ instances
    def generate_instance(self, rng: random.Random) -> GameInstance:
        while True:
            seed = rng.randrange(2**31)
            game, rng_state = new_game(self.prototype, self.spec, seed)
            views = drain(game)
            opening: list[str] = []
            plies = rng.choice(self.spec.opening_plies) if self.spec.opening_plies else 0
            for _ in range(plies):
                legal, _ = legal_moves(self.spec, game, rng_state)
                if not legal:
                    break
                action = rng.choice(legal)
                game, rng_state, outcome = step_game(game, rng_state, action)
                opening.append(action)
                views = {pid: views[pid] + outcome.lines[pid] for pid in (0, 1)}
            if game.state.done or len(opening) < plies:
                continue  # the opening ended the game: draw another
            content = [self.config.game, repr(views), _ADDRESS.sub("", repr(game.state.game_state))]
            if self.spec.random_during_play:
                content.append(f"seed={seed}")
            return GameInstance(self.config.game, seed, tuple(opening), "\n".join(content))

    def instance_key(self, instance: GameInstance) -> str:
        return instance.key

    def start_episode(self, instance: GameInstance) -> None:
        game, rng_state = new_game(self.prototype, self.spec, instance.seed)
        views = drain(game)
        for action in instance.opening:
            game, rng_state, outcome = step_game(game, rng_state, action)
            views = {pid: views[pid] + outcome.lines[pid] for pid in (0, 1)}
        self.game, self.rng_state, self.game_actions = game, rng_state, ()
        self.views = {ROLES[pid]: self._shown(lines) for pid, lines in views.items()}
        self.agent_selection = ROLES[game.state.current_player_id]
        self.legal_cache: tuple[int, tuple[str, ...], tuple[str, ...]] | None = None

    # -------------------------------------------------------------- actions
    def apply_action(self, agent: str, text: str) -> ActionResult:
        self.game, self.rng_state, outcome = step_game(self.game, self.rng_state, text)
        if outcome.raised:  # back to the state before this action, which then counts as an invalid move
            self.game, self.rng_state = replay(self.prototype, self.spec, self.instance.seed,
                                              (*self.instance.opening, *self.game_actions))
            self.rng_state = count_as_invalid(self.game, self.rng_state)
            outcome = dataclasses.replace(outcome, lines=drain(self.game))
            self.game_actions = (*self.game_actions, None)
        else:
            self.game_actions = (*self.game_actions, text)
        self.views = {ROLES[pid]: self.views[ROLES[pid]] + self._shown(outcome.lines[pid]) for pid in (0, 1)}
        self.legal_cache = None
        parsed = {"action": text[:200]}
        if outcome.invalid:
            reason = outcome.reason
            if self._forfeit_if_no_turn_is_left(agent):
                reason = f"{reason}; {self._forfeit_reason}"
            return ActionResult(-self.config.illegal_move_penalty, valid=False, parsed=parsed, invalid_reason=reason)
        return ActionResult(0.0, parsed=parsed)

    def step(self, action: Any) -> None:
        """The base step; a reply refused unread (not a string, too long) at the last turn loses too."""
        agent = self.agent_selection
        live = bool(self.agents) and not (self.terminations[agent] or self.truncations[agent])
        if live and coerce_action(action, self.config.max_action_chars)[1] is not None:
            self._forfeit_if_no_turn_is_left(agent)
        super().step(action)

    @property
    def _forfeit_reason(self) -> str:
        return NO_TURN_FOR_RETRY if self.config.retry_rejected else NO_RETRY

    def _forfeit_if_no_turn_is_left(self, agent: str) -> bool:
        """After a rejected reply: without retries (``retry_rejected`` off), it loses the game. With them,
        when the retry it earns would start a turn past ``max_turns``, the episode would truncate as a
        draw, so the player to move could dodge a lost position with one invalid move; then too the
        rejected reply loses (TextArena's rule for a player out of retries). A retry always starts a
        new turn: the same player acting again ends the turn."""
        state = self.game.state
        if state.done or ROLES[state.current_player_id] != agent or (
                self.config.retry_rejected and self.turn + 1 < self.config.max_turns):
            return False
        pid = ROLES.index(agent)
        state.rewards = {pid: -1, 1 - pid: 1}
        state.game_info[pid]["invalid_move"] = True
        for player in (0, 1):
            state.game_info[player]["reason"] = self._forfeit_reason
        state.add_observation(message=f"Player {pid} made an invalid move; {self._forfeit_reason}.",
                              observation_type=ObservationType.GAME_ADMIN)
        state.done = True
        lines = drain(self.game)
        self.views = {ROLES[p]: self.views[ROLES[p]] + self._shown(lines[p]) for p in (0, 1)}
        return True

    def next_agent(self, agent: str) -> str:
        if self.game.state.done:
            return super().next_agent(agent)
        return ROLES[self.game.state.current_player_id]

    # ------------------------------------------------------------ rewards
    def _rewards(self) -> dict[int, float] | None:
        state = self.game.state
        if not state.done or not state.rewards:
            return None
        return {pid: float(state.rewards.get(pid, 0.0)) for pid in (0, 1)}

    def outcome(self, agent: str) -> float:
        """``(r_self - r_other) / 2`` of TextArena's rewards, in [-1, 1]: +1 win, -1 loss, 0 draw or running."""
        rewards = self._rewards()
        if rewards is None:
            return 0.0
        pid = ROLES.index(agent)
        return max(-1.0, min(1.0, (rewards[pid] - rewards[1 - pid]) / 2))

    def global_reward(self) -> float:
        """The outcome from the side of the player to move; rewards use :meth:`team_state`."""
        return self.outcome(self.agent_selection)

    def team_state(self, agent: str) -> float:
        return self.outcome(agent)

    def is_success(self, agent: str | None = None) -> bool:
        agents = [agent] if agent is not None else list(ROLES)
        return any(self.outcome(a) > 0 for a in agents)

    def is_done(self) -> bool:
        return bool(self.game.state.done)

    def legal_actions(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The legal and the winning candidate moves of the player to move (cached per step); no
        winning moves are named in games without ``perfect_information``."""
        if self.legal_cache is None or self.legal_cache[0] != len(self.history):
            legal, winning = legal_moves(self.spec, self.game, self.rng_state)
            self.legal_cache = (len(self.history), tuple(legal), tuple(winning))
        return self.legal_cache[1], self.legal_cache[2]

    def extra_info(self, agent: str) -> dict[str, Any]:
        game: dict[str, Any] = {"name": self.config.game, "player_id": ROLES.index(agent),
                                "outcome": self.outcome(agent) if self.is_done() else None,
                                "legal_actions": None, "winning_actions": None}
        if (self.config.legal_actions_in_info and self.spec.moves is not None and agent == self.agent_selection
                and not self.is_done()):
            legal, winning = self.legal_actions()
            game["legal_actions"] = list(legal)
            if self.spec.perfect_information:  # elsewhere which move wins depends on what the player cannot see
                game["winning_actions"] = list(winning)
        return {"game": game}

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        prompt = "\n".join(text for kind, text in self.views[agent] if kind == "PROMPT")
        return (
            f"You are {agent} (Player {ROLES.index(agent)}) in the two-player TextArena game "
            f"{self.config.game}. Your whole reply is sent to the game as your move, so follow the move "
            f"format in the rules below. A move the game rejects costs {self.config.illegal_move_penalty}; "
            + ("the game's own rules say when a rejected move loses. " if self.config.retry_rejected
               else "it also loses the game at once. ") + "Win: +1, loss: -1, draw: 0. Lines quoted "
            "with '>' are a player's own words, not the game's.\n\nThe game's rules:\n" + prompt
        )

    def _shown(self, lines: tuple[ViewLine, ...]) -> tuple[ShownLine, ...]:
        """Render each message once, when it arrives (a view is re-read at every step, by every role)."""
        return tuple((kind, text if kind == "PROMPT" else self._render_line(sender, text, kind))
                     for sender, text, kind in lines)

    def _render_line(self, sender: int, text: str, kind: str) -> str:
        if sender != GAME_ID:  # a player's words, quoted line by line: they cannot pass for the game's
            if len(text) > self.config.max_quoted_chars:
                text = text[: self.config.max_quoted_chars] + " [... cut]"
            quoted = "\n".join("> " + line for line in (text.splitlines() or [""]))
            return f"[Player {sender} wrote]\n{quoted}"
        lines = text.splitlines() or [""]
        return "\n".join(["[GAME] " + lines[0], *("    " + line for line in lines[1:])])

    def task_view(self, agent: str) -> str:
        lines = [line for line in self.views[agent] if line[0] != "PROMPT"]
        boards = [i for i, (kind, _) in enumerate(lines) if kind == "GAME_BOARD"]
        stale = set(boards[:-1])  # only the latest board is shown: earlier ones are history the state already holds
        parts = [text for i, (_, text) in enumerate(lines) if i not in stale]
        if self.is_done():
            parts.append(f"[GAME] The game is over. Your result: {self.outcome(agent):+.0f}.")
        elif agent == self.agent_selection:
            parts.append(f"It is your turn (turn {self.turn + 1} of at most {self.config.max_turns}).")
        else:
            parts.append("It is the other player's turn.")
        return "What the game has shown you so far:\n" + "\n".join(parts)

    def render_state(self) -> str:
        board = next((text for kind, text in reversed(self.views[ROLES[0]]) if kind == "GAME_BOARD"), "")
        rewards = self._rewards()
        return f"{self.config.game}, turn {self.turn}, to move: {self.agent_selection}\n{board}\nrewards: {rewards}"


def env(**config: Any) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))
