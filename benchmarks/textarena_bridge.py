"""textarena_v0 per game: step and deepcopy cost, each next to TextArena itself measured in the same run.

For every TextArena game the bridge plays (and a line for each it leaves out, with the reason):

* **step**: median ms of ``env.step`` over scripted episodes on the test split, without the
  legal-move listing (``legal_actions_in_info=False``: the cost in training, where nobody reads
  it) and with it (the default: one game copy and step per candidate move). The baseline is
  TextArena's own loop on the same actions from the same start: ``step`` then
  ``get_observation`` on the game made with TextArena's default wrappers (``textarena.make(id)``).
* **deepcopy**: µs to copy a mid-episode env (what a tree rollout does N times per agent step;
  the median of 5 rounds alternating with the baseline), against ``copy.deepcopy`` of
  TextArena's wrapped game at the same point (what branching TextArena directly costs: its
  wrappers keep every message, its state a log).
* **scripted**: episodes won by a player, of those played (games with a move generator).

Run: ``python -m benchmarks.textarena_bridge [--episodes 3] [--copies 200] [--games A B ...]``
(results in ``benchmarks/results/textarena_bridge.json``; a markdown table on stdout).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

import textarena

import pettingllm_envs
from benchmarks.perf_envs import mean_seconds, print_markdown_table
from benchmarks.recording import result_keys, start_recording, write_results
from pettingllm_envs.bridges import textarena_games
from pettingllm_envs.bridges.textarena_policies import scripted_policy

ENV_ID = "textarena_v0"


def bridged_episodes(game: str, episodes: int, legal_actions: bool) -> tuple[list[float], list[tuple[Any, list[str]]],
                                                                             int]:
    """Seconds per ``env.step``, each episode's (instance, actions) and the episodes a player won."""
    env = pettingllm_envs.make(ENV_ID, game=game, split="test", legal_actions_in_info=True)
    timed = pettingllm_envs.make(ENV_ID, game=game, split="test", legal_actions_in_info=legal_actions)
    seconds, played, won = [], [], 0
    for seed in range(episodes):
        env.reset(seed=seed)  # the policy reads legal moves from this env; the timed one mirrors its actions
        timed.reset(seed=seed)
        actions = []
        for agent in env.agent_iter():
            obs, _, terminated, truncated, info = env.last()
            action = None if terminated or truncated else scripted_policy(obs, agent, info)
            env.step(action)
            start = time.perf_counter()
            timed.step(action)
            if action is not None:  # a done agent's None step is bookkeeping, not a move
                seconds.append(time.perf_counter() - start)
                actions.append(action)
        played.append((env.unwrapped.instance, actions))
        won += any(env.unwrapped.is_success(a) for a in env.unwrapped.possible_agents)
    return seconds, played, won


def textarena_step_seconds(game: str, played: list[tuple[Any, list[str]]]) -> list[float]:
    """TextArena's own loop (default wrappers: step, then the next player's observation) on the same actions."""
    seconds = []
    for instance, actions in played:
        ta_env = textarena.make(game)
        ta_env.reset(num_players=2, seed=instance.seed)
        ta_env.get_observation()
        for action in instance.opening:
            ta_env.step(action)
            ta_env.get_observation()
        for action in actions:
            start = time.perf_counter()
            done, _ = ta_env.step(action)
            ta_env.get_observation()
            seconds.append(time.perf_counter() - start)
            if done:
                break
    return seconds


def copy_microseconds(game: str, copies: int, plies: int = 6) -> tuple[float, float]:
    """Deepcopy of the bridged env and of TextArena's wrapped game, both ``plies`` scripted moves in."""
    env = pettingllm_envs.make(ENV_ID, game=game, split="test")
    env.reset(seed=0)
    ta_env = textarena.make(game)
    ta_env.reset(num_players=2, seed=env.unwrapped.instance.seed)
    ta_env.get_observation()
    for action in env.unwrapped.instance.opening:
        ta_env.step(action)
        ta_env.get_observation()
    for _ in range(plies):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        action = scripted_policy(env.observe(agent), agent, env.infos[agent])
        env.step(action)
        ta_env.step(action)
        ta_env.get_observation()
    # Alternating rounds, the median of each: the load on a shared machine changes within seconds.
    ours, theirs = [], []
    for _ in range(5):
        ours.append(mean_seconds(lambda: copy.deepcopy(env), max(1, copies // 5)))
        theirs.append(mean_seconds(lambda: copy.deepcopy(ta_env), max(1, copies // 5)))
    return statistics.median(ours) * 1e6, statistics.median(theirs) * 1e6


RESULT_KEYS = result_keys("textarena", "games")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--games", nargs="*", help="default: every game the bridge plays, then the ones it leaves out")
    parser.add_argument("--out", default="benchmarks/results/textarena_bridge.json")
    args = parser.parse_args(argv)

    recording = start_recording()
    results: dict[str, Any] = {"textarena": textarena.__version__, "games": {}}
    rows = []
    for game in args.games or sorted(textarena_games.GAMES):
        lean, played, won = bridged_episodes(game, args.episodes, legal_actions=False)
        listed, _, _ = bridged_episodes(game, args.episodes, legal_actions=True)
        baseline = textarena_step_seconds(game, played)
        ours_us, theirs_us = copy_microseconds(game, args.copies)
        # medians: on a shared machine a few steps hit another job's burst, and a step is tens of µs
        lean_ms, listed_ms = statistics.median(lean) * 1e3, statistics.median(listed) * 1e3
        base_ms = statistics.median(baseline) * 1e3
        scripted = textarena_games.GAMES[game].moves is not None
        results["games"][game] = {
            "bridged": True, "step_ms": lean_ms, "step_ms_with_legal_actions": listed_ms,
            "textarena_step_ms": base_ms, "deepcopy_us": ours_us, "textarena_deepcopy_us": theirs_us,
            "scripted_play": scripted, "won": won, "episodes": args.episodes,
        }
        rows.append(f"| {game} | yes | {lean_ms:.3f} ({lean_ms / base_ms:.1f}x) | "
                    + (f"{listed_ms:.2f}" if scripted else "n/a") + f" | {ours_us:.0f} ({ours_us / theirs_us:.2f}x) | "
                    + (f"{won}/{args.episodes}" if scripted else "none") + " |")
    if not args.games:
        for game, reason in sorted(textarena_games.UNAVAILABLE.items()):
            results["games"][game] = {"bridged": False, "reason": reason}
            rows.append(f"| {game} | no: {reason} | | | | |")
    print_markdown_table(["game", "bridged", "step ms (x TextArena's own step)", "step ms with legal moves listed",
                          "deepcopy µs (x TextArena's wrapped game)", "scripted games won"], rows)
    return write_results(args.out, results, recording)


if __name__ == "__main__":
    main()
