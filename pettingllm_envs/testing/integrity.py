"""Reward integrity: junk never earns more than an honest wrong attempt.

"Think like the policy": if an action the env cannot read ever pays more than a well-formed
wrong attempt, RL learns that breaking the format is the safe fallback. It happened here:
math_v0 kept the team's right answer when a role replied junk, while a wrong answer replaced
it, so junk paid -0.5 where trying paid -1.0 (docs/security.md).

The probe applies to any env whose author can say what a trivially wrong attempt is (the
answer format with a wrong answer, one wrong move): from the states before each role's
actions, in oracle play and in play where one role errs, each junk action is compared with
that wrong attempt, both by its step reward and by the role's return when it keeps repeating
the action while the other roles play the oracle.
"""

from __future__ import annotations

import copy
import random
import string
from collections.abc import Callable, Sequence
from typing import Any

from pettingllm_envs.core import TextAECEnv
from pettingllm_envs.policies import Policy
from pettingllm_envs.testing.specs import EnvSpec, env_name, factory, require, require_oracle, text_env

#: ``wrong(env, agent)``: the honest wrong attempt of ``agent``, the one to act in the unwrapped ``env``.
WrongAction = Callable[[Any, str], str]
RULE = "junk earns no more than an honest wrong attempt"


def junk_replies(env: TextAECEnv[Any]) -> dict[str, str]:
    """Junk a policy emits, by name: empty, random printable, binary-ish, one character too long."""
    rng = random.Random(0)
    return {
        "empty": "",
        "random printable": "".join(rng.choice(string.printable) for _ in range(300)),
        "binary-ish": "".join(chr(rng.randrange(0, 256)) for _ in range(300)) + "\x00\ufffd\udc80",
        "huge": "7" * (env.config.max_action_chars + 1),
    }


def live(env: Any) -> bool:
    """The agent to act is neither terminated nor truncated."""
    agent = env.agent_selection
    return not (env.terminations[agent] or env.truncations[agent])


def states_per_role(make: Callable[[], Any], policy: Policy, wrong: WrongAction, seed: int, *,
                    per_role: int = 3, steps: int = 12) -> dict[str, list[Any]]:
    """For each role, copies of the unwrapped env before its first ``per_role`` actions: in oracle
    play, then in play where one role gives the wrong attempt (its teammates' right answers then
    stand when it acts), each episode reset with ``seed`` and cut after ``steps`` steps."""
    roles = make().unwrapped.possible_agents
    states: dict[str, list[Any]] = {role: [] for role in roles}
    for erring in (None, *roles):
        env = make().unwrapped
        env.reset(seed=seed)
        for _ in range(steps):
            if not live(env):
                break
            agent = env.agent_selection
            if len(states[agent]) < per_role:
                states[agent].append(copy.deepcopy(env))
            env.step(wrong(env, agent) if agent == erring else policy(env.observe(agent), agent, env.infos[agent]))
    return states


def step_reward(env: Any, agent: str, action: str) -> float:
    """What ``agent`` is paid for ``action`` in a copy of ``env``."""
    branch = copy.deepcopy(env)
    branch.step(action)
    return float(branch.infos[agent]["last_action"]["reward"])


def return_repeating(env: Any, agent: str, action: WrongAction, policy: Policy, *, steps: int = 60) -> float:
    """``agent``'s return from ``env`` on (in a copy), when it plays ``action`` every time and the others ``policy``."""
    branch = copy.deepcopy(env)
    total = 0.0
    for _ in range(steps):
        if not live(branch):
            break
        acting = branch.agent_selection
        branch.step(action(branch, acting) if acting == agent else policy(branch.observe(acting), acting,
                                                                           branch.infos[acting]))
        total += branch.rewards[agent]
    return total


def _repeating(text: str) -> WrongAction:
    return lambda _env, _agent: text


def check_junk_never_beats_wrong(env: EnvSpec, wrong: WrongAction, *, policy: Policy | None = None,
                                 seeds: Sequence[int] = (0, 1), per_role: int = 3) -> None:
    """For every role and seed, from each state of :func:`states_per_role`, every junk reply of
    :func:`junk_replies` earns no more than ``wrong(env, agent)`` (the honest wrong attempt),
    per step and as the return of repeating it while the other roles play the oracle
    (``policy``, or a registered env's ``scripted_policy``)."""
    solver = require_oracle(env, policy, "the junk-versus-wrong probe")
    make = factory(env)
    name = env_name(make())
    for seed in seeds:
        for agent, states in states_per_role(make, solver, wrong, seed, per_role=per_role).items():
            require(bool(states), name, "every role acts in the first steps of an episode",
                    f"{agent!r} never acted in the first 12 steps of seed {seed}")
            for state in states:
                raw = text_env(state, "the junk-versus-wrong probe")
                attempt = wrong(raw, agent)
                wrong_step = step_reward(raw, agent, attempt)
                wrong_return = return_repeating(raw, agent, wrong, solver)
                where = f"seed {seed}, {agent!r} at turn {raw.turn}"
                for junk_name, junk in junk_replies(raw).items():
                    junk_step = step_reward(raw, agent, junk)
                    require(junk_step <= wrong_step + 1e-9, name, RULE,
                            f"{where}: the {junk_name} reply pays {junk_step:+.3f} for the step, the wrong "
                            f"attempt {attempt[:60]!r} {wrong_step:+.3f}")
                    junk_return = return_repeating(raw, agent, _repeating(junk), solver)
                    require(junk_return <= wrong_return + 1e-9, name, RULE,
                            f"{where}: repeating the {junk_name} reply returns {junk_return:+.3f}, repeating the "
                            f"wrong attempt {wrong_return:+.3f}")
