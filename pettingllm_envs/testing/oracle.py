"""Scripted play: the env's oracle solves its problems, and its declared demonstrations do too.

An oracle that solves every test problem proves each problem solvable and the reward path
to success reachable; benchmarks use it as the ceiling, and the continuation checks use it
to reach deep into episodes. An env that declares the
:class:`~pettingllm_envs.capabilities.Demonstrations` capability promises clean
demonstrations that solve, mistakes that are flagged, and that neither function steps the
env (a warm start reads them from live states).
"""

from __future__ import annotations

import random

from pettingllm_envs.capabilities import Demonstrations
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import Policy
from pettingllm_envs.testing.continuation import first_difference, snapshot
from pettingllm_envs.testing.specs import EnvSpec, env_name, factory, require, require_oracle


def check_oracle_solves(env: EnvSpec, *, policy: Policy | None = None, episodes: int = 50,
                        split: str = "test") -> None:
    """The oracle (``policy``, or a registered env's ``scripted_policy``) solves problems
    ``0 .. episodes-1`` of ``split``, and every episode ends with a bool ``success`` in the
    final infos of every possible agent."""
    solver = require_oracle(env, policy, "the oracle check")
    made = factory(env)()
    name = env_name(made)
    unsolved = []
    for index in range(episodes):
        episode = play_episode(made, solver, seed=index, options={"split": split})
        require(set(episode.final_infos) == set(made.unwrapped.possible_agents), name,
                "every agent sees the end of an episode", f"episode {index} ended for {sorted(episode.final_infos)} "
                f"only, of {made.unwrapped.possible_agents}")
        require(all(isinstance(info.get("success"), bool) for info in episode.final_infos.values()), name,
                "a finished episode's infos carry a bool 'success' for every agent",
                f"episode {index}: {({a: info.get('success') for a, info in episode.final_infos.items()})}")
        if not episode.success:
            unsolved.append(index)
    require(not unsolved, name, "the oracle solves every problem",
            f"it failed problems {unsolved[:10]} of {split} (of {episodes})")


def check_demonstrations(env: EnvSpec, demonstrations: Demonstrations, *, episodes: int = 10,
                         split: str = "test") -> None:
    """The declared :class:`Demonstrations` of ``env``: at mistake rate 0 ``act`` flags no mistake
    and every role playing it solves problems ``0 .. episodes-1``; ``partner`` alone solves them too;
    at rate 1 every action is flagged a mistake; neither function steps the env."""
    make = factory(env)
    name = env_name(make())
    rng = random.Random(0)
    for index in range(episodes):
        for mode in ("act", "partner"):
            made = make()
            made.reset(seed=index, options={"split": split})
            solved = False
            for agent in made.agent_iter(max_iter=10_000):
                _, _, terminated, truncated, info = made.last()
                if terminated or truncated:
                    solved = solved or bool(info.get("success"))
                    made.step(None)
                    continue
                before = snapshot(made)
                if mode == "act":
                    action, mistake = demonstrations.act(made, agent, rng, 0.0)
                    require(not mistake, name, "at mistake rate 0 no demonstration is a mistake",
                            f"problem {index}: act() flagged {action[:80]!r} of {agent!r} a mistake")
                    wrong, flagged = demonstrations.act(made, agent, rng, 1.0)
                    require(flagged, name, "at mistake rate 1 every demonstration is flagged a mistake",
                            f"problem {index}: act() gave {wrong[:80]!r} of {agent!r} unflagged")
                else:
                    action = demonstrations.partner(made, agent)
                require(isinstance(action, str), name, "a demonstration is a string",
                        f"{mode}() gave a {type(action).__name__}")
                require(snapshot(made) == before, name, "a demonstration never steps the env",
                        f"{mode}() changed the state: {first_difference([before], [snapshot(made)])}")
                made.step(action)
            require(solved, name, "clean demonstrations solve every problem",
                    f"every role playing {mode}() at mistake rate 0 left problem {index} of {split} unsolved")
