"""Driving one TextArena game object for ``textarena_v0``: making and copying it, stepping it under
its own random state, draining the messages it queued, rebuilding it after it raised, and trying
candidate moves on copies to find the legal and the winning ones.

These are the parts of the bridge that touch TextArena's game API; the env
(:mod:`pettingllm_envs.bridges.textarena_env`) keeps the episode, the rewards and the views.
Every function takes the game's state explicitly (the game object, the random state as a tuple
from :func:`random.getstate`) and returns the new one, so the env can keep immutable random
states that deep copies share, and a trial on a copy never touches the live game.

**Randomness.** TextArena's games draw from the global :mod:`random` module. :func:`game_random`
swaps the game's own state in around every call into the game and restores the caller's, so
episodes are reproducible and envs never disturb each other or the caller (one thread per env
at a time: the swap is not thread-safe).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import textarena
from textarena.core import ObservationType

from pettingllm_envs.bridges.textarena_games import GameSpec

#: A message TextArena sent a player: (sender id, text, TextArena's observation type name).
ViewLine = tuple[int, str, str]
#: Most candidates tried per legality check (generators and listed options are cut to this).
MAX_CANDIDATES = 96


@dataclass(frozen=True)
class StepOutcome:
    """What one action did to a TextArena game."""

    invalid: bool
    reason: str | None
    lines: dict[int, tuple[ViewLine, ...]]
    """New messages per player id."""
    raised: bool = False
    """TextArena raised: the game object may be half-changed and must be rebuilt."""


def settle_eliminations(state: Any) -> None:
    """End a two-player game on TextArena's free-for-all state once a player is eliminated: the
    other is the last one standing, and wins. TextArena leaves that to each game, and some never
    do: Poker and Santorini go on with the eliminated player to move (junk until truncation would
    be a draw instead of a loss), MarketEntryGame and PublicGoodsGame loop forever in
    ``FFAMultiPlayerState.step`` once both players are out."""
    eliminated = set(getattr(state, "elimination_order", None) or ())
    if state.done or not eliminated:
        return
    if eliminated >= {0, 1}:
        state.rewards = {0: 0, 1: 0}
    else:
        loser = eliminated.pop()
        state.rewards = {loser: -1, 1 - loser: 1}
    reason = "the game is over: a player was eliminated (an invalid move past the game's allowance, or its rules)"
    state.add_observation(message=reason, observation_type=ObservationType.GAME_ADMIN)
    for pid in (0, 1):
        state.game_info[pid]["reason"] = reason
    state.done = True


@contextmanager
def game_random(state: tuple) -> Iterator[list[tuple]]:
    """Run TextArena code with ``state`` as the global :mod:`random` state; the state it
    leaves is put into the yielded list, and the caller's own state is restored."""
    outer = random.getstate()
    random.setstate(state)
    after: list[tuple] = []
    try:
        yield after
    finally:
        after.append(random.getstate())
        random.setstate(outer)


def copy_game(game: Any, spec: GameSpec) -> Any:
    """A deep copy of TextArena's game that shares the attributes it only reads (``GameSpec.shared``)."""
    memo = {id(getattr(game, name)): getattr(game, name) for name in spec.shared}
    return copy.deepcopy(game, memo)


def new_game(prototype: Any, spec: GameSpec, seed: int) -> tuple[Any, tuple]:
    """A copy of ``prototype`` (the game as made) reset with ``seed``, and the random state after the reset."""
    game = copy_game(prototype, spec)
    with game_random(random.Random(seed).getstate()) as after:
        game.reset(num_players=2, seed=seed)
    return game, after[0]


def replay(prototype: Any, spec: GameSpec, seed: int, actions: tuple[str | None, ...]) -> tuple[Any, tuple]:
    """The game reset with ``seed`` after ``actions`` (the opening first; None: an action the game
    raised on, counted as an invalid move). The game is deterministic given its random state."""
    game, rng_state = new_game(prototype, spec, seed)
    for action in actions:
        if action is None:
            rng_state = count_as_invalid(game, rng_state)
        else:
            game, rng_state, _ = step_game(game, rng_state, action)
    drain(game)
    return game, rng_state


def count_as_invalid(game: Any, rng_state: tuple) -> tuple:
    """Apply TextArena's invalid-move rule to an action the game raised on, so that such
    actions cannot stall a game forever: two-player states give the usual retry and then
    the loss; other states (whose eliminations the game's own code settles) end it as a loss."""
    state = game.state
    pid = state.current_player_id
    reason = "the game could not process this action"
    with game_random(rng_state) as after:
        if isinstance(state, textarena.TwoPlayerState):
            state.set_invalid_move(reason=reason)
            state.step()
        else:
            state.rewards = {pid: -1, 1 - pid: 1}
            state.game_info[pid]["invalid_move"] = True
            state.done = True
    return after[0]


def drain(game: Any) -> dict[int, tuple[ViewLine, ...]]:
    """Take the messages TextArena queued for each player (and drop its log, which nothing reads)."""
    state = game.state
    lines = {pid: tuple((int(sender), str(text), kind.name if isinstance(kind, ObservationType) else str(kind))
                        for sender, text, kind in state.observations[pid]) for pid in (0, 1)}
    state.observations = {pid: [] for pid in (0, 1)}
    state.logs = []
    return lines


def step_game(game: Any, rng_state: tuple, text: str) -> tuple[Any, tuple, StepOutcome]:
    """Apply ``text`` for the player to move; returns the game after it, the random state
    after it, and the outcome. When TextArena raises, the game may be half-changed: the
    outcome says ``raised`` and the caller rebuilds the game (:func:`replay`) or drops it."""
    state = game.state
    pid = state.current_player_id
    errors_before = getattr(state, "error_count", 0)
    flagged_before = bool(state.game_info[pid].get("invalid_move"))
    try:
        with game_random(rng_state) as after:
            game.step(text)
    except Exception as error:  # a TextArena bug on odd input must not end the episode
        reason = f"the game could not process this action ({type(error).__name__}); it counts as invalid"
        return game, rng_state, StepOutcome(True, reason, {0: (), 1: ()}, raised=True)
    state = game.state
    settle_eliminations(state)
    lines = drain(game)
    invalid = getattr(state, "error_count", 0) > errors_before or (
        bool(state.game_info[pid].get("invalid_move")) and not flagged_before)
    reason = None
    if invalid:
        admin = [t for _, t, kind in lines[pid] if kind == "GAME_ADMIN"]
        reason = (admin[-1] if admin else str(state.game_info[pid].get("reason") or "the game rejected the move"))
    return game, after[0], StepOutcome(invalid, reason, lines)


def candidates(spec: GameSpec, game: Any, pid: int) -> list[str]:
    """The moves ``spec``'s generator proposes for player ``pid`` (none for a finished game,
    a game without a generator, or a state the generator does not know)."""
    if spec.moves is None or game.state.done:
        return []
    try:
        moves = spec.moves(game, pid)
    except (KeyError, IndexError, TypeError, AttributeError):  # a state the generator does not know: no list
        return []
    return list(dict.fromkeys(moves))[:MAX_CANDIDATES]


def legal_moves(spec: GameSpec, game: Any, rng_state: tuple) -> tuple[list[str], list[str]]:
    """The candidates the game accepts from the player to move, and those that win at once
    (games of perfect information only: elsewhere the trial would see hidden cards or the next roll)."""
    pid = game.state.current_player_id
    legal, winning = [], []
    for action in candidates(spec, game, pid):
        trial, _, outcome = step_game(copy_game(game, spec), rng_state, action)
        if outcome.invalid:
            continue
        legal.append(action)
        rewards = trial.state.rewards
        if (spec.perfect_information and trial.state.done and rewards
                and rewards.get(pid, 0) > rewards.get(1 - pid, 0)):
            winning.append(action)
    return legal, winning
