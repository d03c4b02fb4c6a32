"""Env performance: steps per second and deepcopy cost, each as a ratio to a baseline
measured in the same run.

* **Steps/s** of every registered env with its scripted policy (only ``env.step`` is
  timed, the policy is not), next to PettingZoo's classic ``tictactoe_v3`` stepped with
  random legal moves: a reference AEC env with no text, no parsing and no sandbox.
  Tool roles run a sandboxed program per step, which dominates their step time.
* **deepcopy** of a mid-episode env, against a naive deep copy of the same object that
  also copies the configuration, spaces and problem data (what ``copy.deepcopy`` does
  without the env's ``__deepcopy__``). AT-GRPO copies the state N times per agent step.

Run: ``python -m benchmarks.perf_envs [--episodes 20] [--out benchmarks/results/perf_envs.json]``.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pettingzoo.classic import tictactoe_v3

import pettingllm_envs
from benchmarks.recording import result_keys, start_recording, write_results
from pettingllm_envs.cli import format_table
from pettingllm_envs.policies import scripted_policy

Choose = Callable[[Any, str, dict[str, Any]], Any]


@dataclass(frozen=True)
class StepTime:
    """One timed ``env.step``."""

    agent: str
    moved: bool
    """False for a done agent's None step (bookkeeping, not a move)."""
    seconds: float


def time_steps(env: Any, seed: int, choose: Choose) -> list[StepTime]:
    """Every ``env.step`` of one episode reset with ``seed``, timed; ``choose(observation,
    agent, info)`` picks each action, outside the timing."""
    env.reset(seed=seed)
    times = []
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        action = None if terminated or truncated else choose(obs, agent, info)
        start = time.perf_counter()
        env.step(action)
        times.append(StepTime(agent, action is not None, time.perf_counter() - start))
    return times


def steps_per_second(env: Any, episodes: int, choose: Choose) -> float:
    """Actions per second of ``env.step`` over ``episodes`` episodes (episode ``i`` reset with
    seed ``i``), the done agents' None steps counted in the time."""
    times = [step for seed in range(episodes) for step in time_steps(env, seed, choose)]
    return sum(step.moved for step in times) / sum(step.seconds for step in times)


def scripted_steps_per_second(env_id: str, episodes: int) -> float:
    return steps_per_second(pettingllm_envs.make(env_id, split="test"), episodes, scripted_policy(env_id))


def pettingzoo_tictactoe_steps_per_second(episodes: int) -> float:
    rng = np.random.default_rng(0)
    return steps_per_second(tictactoe_v3.env(), episodes,
                            lambda obs, _agent, _info: int(rng.choice(np.flatnonzero(obs["action_mask"]))))


def naive_deepcopy(env: Any) -> Any:
    """A deep copy that shares only what cannot be copied at all (locks, process pools):
    the cost the env's ``__deepcopy__`` avoids."""
    raw = env.unwrapped
    clone = type(raw).__new__(type(raw))
    memo: dict[int, Any] = {id(raw): clone}
    for name, value in raw.__dict__.items():
        try:
            clone.__dict__[name] = copy.deepcopy(value, memo)
        except TypeError:
            clone.__dict__[name] = value
    return clone


def mean_seconds(fn: Any, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def deepcopy_costs(env_id: str, repeats: int, *, naive_share: int = 10, **config: Any) -> tuple[float, float]:
    """Mean seconds of ``copy.deepcopy`` and of :func:`naive_deepcopy` of the env one scripted
    action in; the naive copy runs ``repeats // naive_share`` times (it is that much slower)."""
    env = pettingllm_envs.make(env_id, split="test", **config)
    env.reset(seed=0)
    agent = env.agent_selection
    env.step(scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent]))
    ours = mean_seconds(lambda: copy.deepcopy(env), repeats)
    naive = mean_seconds(lambda: naive_deepcopy(env), max(1, repeats // naive_share))
    return ours, naive


def print_markdown_table(columns: list[str], rows: list[str], *, left: int = 2) -> None:
    """Print a Markdown table of ``rows`` (each already a ``| ... |`` line) under ``columns``,
    the first ``left`` columns left-aligned and the figures right-aligned."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join(["---"] * left + ["---:"] * (len(columns) - left)) + "|")
    print("\n".join(rows))


RESULT_KEYS = result_keys("baseline", "envs")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--copies", type=int, default=500)
    parser.add_argument("--out", default="benchmarks/results/perf_envs.json")
    args = parser.parse_args(argv)

    recording = start_recording()
    baseline = pettingzoo_tictactoe_steps_per_second(args.episodes * 5)
    results: dict[str, Any] = {"baseline": {"pettingzoo_tictactoe_v3_steps_per_s": baseline}, "envs": {}}
    rows = []
    for env_id in pettingllm_envs.list_envs():
        steps = scripted_steps_per_second(env_id, args.episodes)
        ours, naive = deepcopy_costs(env_id, args.copies)
        results["envs"][env_id] = {
            "steps_per_s": steps, "steps_ratio_to_pettingzoo_tictactoe": steps / baseline,
            "deepcopy_us": ours * 1e6, "naive_deepcopy_us": naive * 1e6, "deepcopy_speedup": naive / ours,
        }
        rows.append((env_id, f"{steps:,.0f}", f"{steps / baseline:.3f}", f"{ours * 1e6:,.1f}",
                     f"{naive * 1e6:,.1f}", f"{naive / ours:.1f}x"))
    print(f"baseline: PettingZoo tictactoe_v3, random legal moves: {baseline:,.0f} steps/s")
    print(format_table(["env", "steps/s (scripted)", "ratio to baseline", "deepcopy us", "naive deepcopy us",
                        "deepcopy speedup"], rows))
    return write_results(args.out, results, recording)


if __name__ == "__main__":
    main()
