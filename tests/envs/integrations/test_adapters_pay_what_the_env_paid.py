"""Every adapter pays each role exactly what the env paid it, and reports its success alike.

One plain AEC loop is the reference (:func:`aec_reference`): every role's return is the sum of
``env.rewards`` after every step, its success the ``success`` of its info when it finished. Each
adapter then plays the same episode (the same seeded problem, the same deterministic policy per
role, one fresh instance per run) for every env and every role, and what it hands that role's
trainer must sum to the reference return: Gymnasium's step rewards, SkyRL's step rewards (``init``
cannot carry one), TRL's ``get_reward`` (one role; several roles of a cooperative env; a model that
stops calling the tool), the seats' ``SeatTurn.rewards`` (one learner, or one client playing every
role) and Ray's episodes. Roles paid before they act (code_v0's tester, math_v0's tool) and episodes
cut by ``max_turns`` are in the sweep. OpenEnv's sessions are checked the same way in
test_integration_openenv.py (OpenEnv needs its own environment); verifiers' traces in
test_integration_verifiers.py (they need a model server).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pettingllm_envs.integrations.gymnasium_env import RoleEnv
from pettingllm_envs.policies import Policy, random_policy, scripted_policy
from pettingllm_envs.registry import list_envs, make
from pettingllm_envs.seats import SeatedEpisode, roles_compete

#: Short episodes, so that random play is cut by truncation and the sweep stays quick.
CONFIG = {"max_turns": 2}
SEED = 3
ENV_ROLES = [(env_id, role) for env_id in list_envs() for role in make(env_id).possible_agents]


def policies(env_id: str, kind: str) -> dict[str, Policy]:
    """A fresh deterministic policy per role: the env's oracle, or seeded random text."""
    roles = make(env_id).possible_agents
    if kind == "scripted":
        return {role: scripted_policy(env_id) for role in roles}
    return {role: random_policy(SEED + index) for index, role in enumerate(roles)}


def aec_reference(env_id: str, play: dict[str, Policy], silent: Callable[[str, int], bool] | None = None,
                  ) -> tuple[dict[str, float], dict[str, bool]]:
    """Every role's return and success in a plain AEC episode; ``silent(role, k)`` makes the
    role's k-th action the empty text (a model that stopped answering)."""
    env = make(env_id, **CONFIG)
    env.reset(seed=SEED)
    returns, success, acted = dict.fromkeys(env.possible_agents, 0.0), {}, dict.fromkeys(env.possible_agents, 0)
    for agent in env.agent_iter(max_iter=500):
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            success[agent], action = bool(info.get("success", False)), None
        elif silent is not None and silent(agent, acted[agent]):
            action = ""
        else:
            action = play[agent](observation, agent, info)
        acted[agent] += action is not None
        env.step(action)
        for role, reward in env.rewards.items():
            returns[role] += float(reward)
    env.close()
    return returns, success


def others(env_id: str, learners: list[str], kind: str) -> dict[str, Policy]:
    return {role: policy for role, policy in policies(env_id, kind).items() if role not in learners}


@pytest.mark.parametrize("kind", ["scripted", "random"])
@pytest.mark.parametrize(("env_id", "role"), ENV_ROLES)
def test_seats_gymnasium_and_skyrl_pay_one_role_its_return(env_id, role, kind):
    from pettingllm_envs.integrations.skyrl_env import PettingLLMTextEnv

    returns, success = aec_reference(env_id, policies(env_id, kind))
    own = policies(env_id, kind)[role]

    seated = SeatedEpisode(make(env_id, **CONFIG), others(env_id, [role], kind), [role])
    turn, paid = seated.reset(seed=SEED), 0.0
    paid += turn.rewards[role]
    while not turn.done:
        turn = seated.act(own(turn.observation, role, turn.info))
        paid += turn.rewards[role]
    assert paid == pytest.approx(returns[role]) and seated.success(role) == success[role]

    gym, own = RoleEnv(env_id, role, others(env_id, [role], kind), **CONFIG), policies(env_id, kind)[role]
    observation, info = gym.reset(seed=SEED)
    paid, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, info = gym.step(own(observation, role, info))
        paid, done = paid + reward, terminated or truncated
    assert paid == pytest.approx(returns[role]) and bool(info.get("success")) == success[role]

    skyrl = PettingLLMTextEnv({"role": role, "seed": SEED, "env_config": CONFIG,
                               "seats": others(env_id, [role], kind)}, env_id=env_id)
    own, paid, output = policies(env_id, kind)[role], 0.0, {"done": False, "metadata": {}}
    skyrl.init([])
    while not output["done"]:
        turn = skyrl.episode.turn
        output = skyrl.step(own(turn.observation, role, turn.info) if not turn.done else "")
        paid += output["reward"]
    assert paid == pytest.approx(returns[role]), "SkyRL's step rewards are what the env paid the role"
    assert output["metadata"]["success"] == success[role]
    assert skyrl.step("again")["reward"] == 0.0  # nothing is paid twice


@pytest.mark.parametrize(("env_id", "role"), ENV_ROLES)
def test_trl_pays_one_learner_its_return_played_or_silent(env_id, role):
    from trainers.integrations.trl_env import environment_factory

    returns, _ = aec_reference(env_id, policies(env_id, "random"))
    env, own = environment_factory(env_id, role, others(env_id, [role], "random"), **CONFIG)(), \
        policies(env_id, "random")[role]
    env.reset(index=SEED)
    while not env.episode.done:
        turn = env.episode.turn
        env.act(own(turn.observation, role, turn.info))
    assert env.get_reward() == pytest.approx(returns[role])

    # The model answers once, then stops calling the tool: the rest is played with empty actions.
    silent_returns, _ = aec_reference(env_id, policies(env_id, "random"), lambda r, k: r == role and k >= 1)
    env, own = environment_factory(env_id, role, others(env_id, [role], "random"), **CONFIG)(), \
        policies(env_id, "random")[role]
    turn = env.episode.reset(seed=SEED)
    if not turn.done:
        env.act(own(turn.observation, role, turn.info))
    assert env.get_reward() == pytest.approx(silent_returns[role])


@pytest.mark.parametrize("env_id", list_envs())
def test_one_client_playing_every_role_is_paid_each_roles_return(env_id):
    """Seats with every role a learner (OpenEnv's one-session play, verifiers' agents): each role's
    ``SeatTurn.rewards`` sum to its return, the last payments of the role that did not end the
    episode included (the -1 of a loss); TRL's one reward is refused where it would cancel."""
    from trainers.integrations.trl_env import environment_factory

    for kind in ("scripted", "random"):
        returns, success = aec_reference(env_id, policies(env_id, kind))
        play, roles = policies(env_id, kind), list(make(env_id).possible_agents)
        episode = SeatedEpisode(make(env_id, **CONFIG), {}, roles)
        turn, paid = episode.reset(seed=SEED), dict.fromkeys(roles, 0.0)
        for role, reward in turn.rewards.items():
            paid[role] += reward
        while not turn.done:
            turn = episode.act(play[str(turn.agent)](turn.observation, str(turn.agent), turn.info))
            for role, reward in turn.rewards.items():
                paid[role] += reward
        assert paid == pytest.approx(returns) and {r: episode.success(r) for r in roles} == success
    if roles_compete(make(env_id)):
        with pytest.raises(ValueError, match="rewarded against each other"):
            environment_factory(env_id, roles)
        return
    trl = environment_factory(env_id, roles, **CONFIG)()
    trl.reset(index=SEED)
    while not trl.episode.done:
        turn = trl.episode.turn
        trl.act(play[str(turn.agent)](turn.observation, str(turn.agent), turn.info))
    assert trl.get_reward() == pytest.approx(sum(returns.values()))


@pytest.mark.slow
def test_ray_episodes_pay_each_role_its_return(ray_session):
    from pettingllm_envs.integrations.ray_backend import RayBackend

    env_ids = ["code_v0", "math_v0", "tictactoe_v0"]  # roles paid before they act; a zero-sum game
    with RayBackend(num_workers=1) as backend:
        played = {env_id: backend.play_episodes(env_id, policies(env_id, "random"), [SEED], **CONFIG)[0]
                  for env_id in env_ids}
    for env_id, episode in played.items():
        returns, success = aec_reference(env_id, policies(env_id, "random"))
        assert {role: episode.total_reward(role) for role in returns} == pytest.approx(returns)
        assert {role: bool(info.get("success")) for role, info in episode.final_infos.items()} == success
