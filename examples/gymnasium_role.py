"""Play one role of a pettingllm env through the Gymnasium API.

    python examples/gymnasium_role.py plan_path_v0 planner

The other roles are the env's scripted oracles; this role is played by the oracle too
(swap in your agent), so every episode should succeed.
"""

from __future__ import annotations

import argparse

import gymnasium

import pettingllm_envs.integrations  # noqa: F401  (registers the pettingllm/<env_id> ids)
from pettingllm_envs.policies import scripted_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id", nargs="?", default="plan_path_v0")
    parser.add_argument("role", nargs="?", default=None, help="default: the first role in turn order")
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()

    env = gymnasium.make(f"pettingllm/{args.env_id}", role=args.role)
    role = env.unwrapped.role
    agent = scripted_policy(args.env_id)
    for seed in range(args.episodes):
        observation, info = env.reset(seed=seed)
        episode_return, steps, done = 0.0, 0, False
        while not done:
            observation, reward, terminated, truncated, info = env.step(agent(observation, role, info))
            episode_return += reward
            steps += 1
            done = terminated or truncated
        print(f"{args.env_id} as {role}, problem {seed}: return {episode_return:+.2f} in {steps} steps, "
              f"success {info['success']}")
    env.close()


if __name__ == "__main__":
    main()
