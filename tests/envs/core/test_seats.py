"""Seats: spec strings become policies in one place, and a SeatedEpisode lets any subset of
roles be driven from outside while the others are played by their seats."""

from __future__ import annotations

import io

import pytest

from pettingllm_envs import list_envs, make
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.model_policies.openai_policy import OpenAIChatPolicy
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.seats import HumanSeat, SeatedEpisode, make_seat


def test_seat_specs_build_the_policies_they_name():
    assert make_seat("scripted", "plan_path_v0") is scripted_policy("plan_path_v0")
    first, again = make_seat("random", "plan_path_v0", seed=5), make_seat("random", "plan_path_v0", seed=5)
    assert first("", "tool", {}) == again("", "tool", {})  # seeded
    remote = make_seat("openai:qwen@http://127.0.0.1:9/v1", "plan_path_v0", max_tokens=7)
    assert isinstance(remote, OpenAIChatPolicy) and remote.max_tokens == 7 and remote.model == "qwen"

    def mine(observation: str, agent: str, info: dict) -> str:
        return "x"

    assert make_seat(mine, "plan_path_v0") is mine
    assert isinstance(make_seat("human", "plan_path_v0"), HumanSeat)


@pytest.mark.parametrize("spec", ["scrpted", "openai:qwen", "hf:", "gpt-4", ""])
def test_a_bad_seat_spec_is_one_line_naming_every_form(spec):
    with pytest.raises(ValueError) as error:
        make_seat(spec, "plan_path_v0")
    message = str(error.value)
    assert "\n" not in message
    for form in ("scripted", "random", "human", "openai:<model>@<base_url>", "hf:<model folder>", "callable"):
        assert form in message


def test_a_human_seat_reads_a_move_as_pettingllm_play_does():
    out = io.StringIO()
    seat = HumanSeat(io.StringIO("```python\nprint(1)\n.\nR R\n"), out)
    info = {"messages": [{"role": "system", "content": "RULES"}, {"role": "user", "content": "VIEW"}]}
    assert seat("RULES\n\nVIEW", "planner", info) == "```python\nprint(1)\n```"
    assert seat("RULES\n\nVIEW", "planner", info) == "R R"
    assert out.getvalue().count("RULES") == 1 and out.getvalue().count("VIEW") == 2  # instructions once
    with pytest.raises(EOFError):
        seat("RULES\n\nVIEW", "planner", info)


@pytest.mark.parametrize("env_id", list_envs())
def test_one_policy_in_every_seat_reproduces_the_aec_episode(env_id):
    """Every role a learner (one policy driving all of them through act): observations, rewards,
    returns and success equal play_episode's with the same policy."""
    oracle = scripted_policy(env_id)
    reference = play_episode(make(env_id), oracle, seed=2)
    env = make(env_id)
    episode = SeatedEpisode(env, {}, env.possible_agents)
    turn = episode.reset(seed=2)
    seen, paid = [], dict.fromkeys(env.possible_agents, 0.0)
    while not turn.done:
        seen.append((turn.agent, str(turn.observation)))
        paid[turn.agent] += turn.reward
        turn = episode.act(oracle(turn.observation, turn.agent, turn.info))
    assert seen == reference.observations
    for role in env.possible_agents:
        assert episode.returns[role] == pytest.approx(reference.total_reward(role))
    assert turn.info["success"] == reference.final_infos[turn.info["role"]]["success"]
    with pytest.raises(RuntimeError, match="reset"):
        episode.act("too late")


def test_seats_play_the_other_roles_and_the_learner_is_paid_what_they_paid_it():
    """tictactoe: X is the learner playing badly, the scripted O wins; O's winning move pays X
    the loss, which reaches X in the final turn's reward and in its return."""
    env = make("tictactoe_v0")
    episode = SeatedEpisode(env, {"player_o": make_seat("scripted", "tictactoe_v0")}, ["player_x"])
    turn = episode.reset(seed=0)
    assert turn.agent == "player_x"
    rewards = []
    moves = iter(["1 1", "1 2", "1 3", "2 1", "2 2", "3 1", "3 2", "3 3"])
    while not turn.done:
        turn = episode.act(next(moves))
        rewards.append(turn.reward)
    assert sum(rewards) == pytest.approx(episode.returns["player_x"])
    reference = play_episode(make("tictactoe_v0"), {"player_x": _replay(["1 1", "1 2", "1 3", "2 1", "2 2", "3 1",
                                                                         "3 2", "3 3"]),
                                                    "player_o": scripted_policy("tictactoe_v0")}, seed=0)
    assert episode.returns == pytest.approx({r: reference.total_reward(r) for r in env.possible_agents})


def _replay(moves: list[str]):
    remaining = iter(moves)
    return lambda observation, agent, info: next(remaining)


def test_every_role_that_is_not_a_learner_needs_a_seat():
    with pytest.raises(ValueError, match="no seat for the roles \\['tool'\\]"):
        SeatedEpisode(make("plan_path_v0"), {}, ["planner"])
    with pytest.raises(ValueError, match="learners must be roles"):
        SeatedEpisode(make("plan_path_v0"), {"tool": scripted_policy("plan_path_v0")}, ["pilot"])


def test_an_hf_seat_on_a_missing_folder_says_the_folder_does_not_exist(tmp_path):
    # was transformers' "Repo id must use alphanumeric chars ..." for a path that is not there
    missing = tmp_path / "nonexistent"
    with pytest.raises(ValueError, match=f"{missing} does not exist"):
        make_seat(f"hf:{missing}", "tictactoe_v0")
