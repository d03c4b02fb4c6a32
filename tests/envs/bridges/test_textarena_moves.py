"""textarena_v0's moves: the legal and winning moves it lists are what TextArena accepts and
what the mover's own view decides, winning pays the winner and charges the loser, an invalid
move costs the penalty and TextArena's retry limit loses, and a TextArena exception is an
invalid move after which the game is rebuilt.
"""

from __future__ import annotations

import copy
import random

import pytest

textarena = pytest.importorskip("textarena")

from textarena_helpers import (  # noqa: E402
    CONFORMANCE_GAMES,
    SCRIPTED_GAMES,
    make,
)

from pettingllm_envs.bridges import textarena_games  # noqa: E402
from pettingllm_envs.bridges.textarena_driver import replay  # noqa: E402
from pettingllm_envs.bridges.textarena_policies import scripted_policy  # noqa: E402


# ------------------------------------------------------------------ legal and winning moves
def test_legal_actions_are_what_textarena_accepts():
    env = make("ConnectFour-v0")
    env.reset(seed=0)
    agent = env.agent_selection
    game_info = env.infos[agent]["game"]
    other = "player_1" if agent == "player_0" else "player_0"
    assert env.infos[other]["game"]["legal_actions"] is None  # only the player to move gets the list
    legal = game_info["legal_actions"]
    assert legal and set(legal) <= {f"[col {c}]" for c in range(7)}
    for action in legal:
        trial = copy.deepcopy(env)
        trial.step(action)
        assert trial.infos[agent]["last_action"]["valid"]
    quiet = make("ConnectFour-v0", legal_actions_in_info=False)
    quiet.reset(seed=0)
    assert quiet.infos[quiet.agent_selection]["game"]["legal_actions"] is None


def test_a_winning_move_is_listed_and_pays_the_winner_and_charges_the_loser():
    """Nim from an opening: the scripted policy takes the last objects when it can."""
    env = make("Nim-v0")
    env.reset(seed=0)
    raw = env.unwrapped
    while env.agents:
        agent = env.agent_selection
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        winning = info["game"]["winning_actions"]
        env.step(scripted_policy(obs, agent, info))
        if winning:
            other = "player_1" if agent == "player_0" else "player_0"
            assert raw.rewards[agent] == pytest.approx(raw.config.alpha)
            assert raw.rewards[other] == pytest.approx(-raw.config.alpha)
            assert env.infos[agent]["success"] and not env.infos[other]["success"]
            break


@pytest.mark.parametrize("game", [g for g in CONFORMANCE_GAMES if g.values[0] in SCRIPTED_GAMES])
def test_winning_actions_are_published_only_for_games_of_perfect_information(game):
    env = make(game)
    env.reset(seed=0)
    listed = env.infos[env.agent_selection]["game"]
    assert listed["legal_actions"]
    if textarena_games.GAMES[game].perfect_information:
        assert isinstance(listed["winning_actions"], list)
    else:
        assert listed["winning_actions"] is None and env.unwrapped.legal_actions()[1] == ()


def _legal_in_a_world(env, change) -> tuple[str, tuple[str, ...]]:
    """The observation and the legal moves of the player to move after ``change`` to a copy's hidden state."""
    world = copy.deepcopy(env)
    change(world.unwrapped)
    world.unwrapped.legal_cache = None
    return str(world.observe(world.agent_selection)), world.unwrapped.legal_actions()[0]


def test_legal_moves_do_not_depend_on_the_opponent_s_cards_dice_or_the_next_roll():
    """Only the mover's view decides what is listed: two worlds the mover cannot tell apart (other
    opponent cards or dice, another state of the dice to come) list the same legal moves."""
    kuhn = make("KuhnPoker-v0")
    kuhn.reset(seed=0)
    mover = kuhn.unwrapped.game.state.current_player_id
    mine = kuhn.unwrapped.game.state.game_state["player_cards"][mover]

    def card(value):
        return lambda raw: raw.game.state.game_state["player_cards"].__setitem__(1 - mover, value)

    worlds = {_legal_in_a_world(kuhn, card(value)) for value in range(3) if value != mine}
    assert len(worlds) == 1
    dice = make("LiarsDice-v0")
    dice.reset(seed=0)
    dice.step("[Bid: 2, 3]")
    mover = dice.unwrapped.game.state.current_player_id

    def rolls(values):
        return lambda raw: raw.game.state.game_state["dice_rolls"].__setitem__(1 - mover, list(values))

    assert len({_legal_in_a_world(dice, rolls(values)) for values in ([1] * 5, [6] * 5, [3, 3, 2, 2, 1])}) == 1
    pig = make("PigDice-v0")
    pig.reset(seed=0)

    def next_roll(seed):
        return lambda raw: setattr(raw, "rng_state", random.Random(seed).getstate())

    assert len({_legal_in_a_world(pig, next_roll(seed)) for seed in range(4)}) == 1


# ------------------------------------------------------------------ invalid moves
def test_an_invalid_move_costs_the_penalty_and_loses_the_game_at_once():
    """No retry by default: a rejected reply is never worth more than a legal move that loses
    (-0.3 - 1 < -1), whatever credit window a trainer uses (docs/design.md §4)."""
    env = make("ConnectFour-v0", illegal_move_penalty=0.3)
    env.reset(seed=0)
    agent = env.agent_selection
    env.step("I will not move.")
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and last["reward_local"] == pytest.approx(-0.3)
    assert "no retry" in last["invalid_reason"]
    assert all(env.terminations.values()) and env.rewards[agent] == pytest.approx(-1.3)
    assert env.infos[agent]["game"]["outcome"] == -1.0


def test_with_retries_an_invalid_move_costs_the_penalty_and_the_retry_limit_loses_the_game():
    env = make("ConnectFour-v0", illegal_move_penalty=0.3, retry_rejected=True)
    env.reset(seed=0)
    agent = env.agent_selection
    env.step("I will not move.")
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and last["reward_local"] == pytest.approx(-0.3)
    assert "invalid" in last["invalid_reason"].lower()
    assert env.agent_selection == agent  # TextArena's retry: the same player again
    env.step("Still not.")
    assert all(env.terminations.values())
    assert env.infos[agent]["game"]["outcome"] == -1.0
    other = "player_1" if agent == "player_0" else "player_0"
    assert env.infos[other]["success"]


def test_an_exception_inside_textarena_is_an_invalid_move_and_the_game_is_rebuilt(monkeypatch):
    """No TextArena game raised on the hostile inputs tried; this guards the day one does: the
    half-changed game is rebuilt from the seed, the opening and the actions so far, and the action
    counts as TextArena's invalid move (retry, then the loss), so such input cannot stall a game."""
    env = make("ConnectFour-v0", retry_rejected=True)
    env.reset(seed=0)
    env.step("[col 1]")
    raw = env.unwrapped
    agent = env.agent_selection
    before = copy.deepcopy(raw.game.state.game_state)
    game_class = type(raw.game)
    real_step = game_class.step

    def half_then_raise(self, action):
        if action == "BOOM":
            self.state.game_state["board"][0][0] = "?"  # changed, then the game fails
            raise KeyError("a TextArena bug")
        return real_step(self, action)

    monkeypatch.setattr(game_class, "step", half_then_raise)
    env.step("BOOM")
    last = env.infos[agent]["last_action"]
    assert not last["valid"] and "could not process" in last["invalid_reason"]
    assert raw.game.state.game_state == before and env.agent_selection == agent  # TextArena's retry
    clone = copy.deepcopy(env)
    env.step("[col 2]")
    assert env.infos[agent]["last_action"]["valid"] and not raw.game.state.done
    clone.step("BOOM")  # a second one in a row: TextArena's retry limit ends the game as this player's loss
    assert all(clone.terminations.values()) and clone.infos[agent]["game"]["outcome"] == -1.0
    clone_raw = clone.unwrapped
    # the record replays to the same end
    rebuilt, _ = replay(clone_raw.prototype, clone_raw.spec, clone_raw.instance.seed,
                        (*clone_raw.instance.opening, *clone_raw.game_actions))
    assert rebuilt.state.done and rebuilt.state.rewards == clone_raw.game.state.rewards
