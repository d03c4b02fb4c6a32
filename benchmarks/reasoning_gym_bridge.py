"""reasoning_gym_v0 per dataset: problem generation, step and deepcopy cost, each next to a
baseline measured in the same run.

For every reasoning-gym dataset the bridge plays (and a line for each it refuses, with
the reason):

* **new problem**: mean ms to generate one item the process has not seen (reasoning-gym's
  own generator; the env caches items, so a repeated reset costs a look-up);
* **reasoner step** (answer extraction, the guards and the dataset's ``score_answer``) and
  **tool step** (a sandboxed program that prints the answer), mean over the scripted
  oracle's episodes on the test split, with ``math_v0``'s reasoner and tool steps as the
  baseline (the project's own reasoner + tool env), measured right before each dataset;
* **deepcopy** of a mid-episode env against a naive deep copy that also copies the
  dataset object, configuration and spaces (``benchmarks.perf_envs.naive_deepcopy``), and
  ``math_v0``'s deepcopy;
* **oracle**: test problems the oracle solved, of those played.

Run: ``python -m benchmarks.reasoning_gym_bridge [--episodes 4] [--copies 200] [--datasets a b ...]``
(results in ``benchmarks/results/reasoning_gym_bridge.json``; a markdown table on stdout).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import pettingllm_envs
from benchmarks.perf_envs import deepcopy_costs, print_markdown_table, time_steps
from benchmarks.recording import result_keys, start_recording, write_results
from pettingllm_envs.bridges import reasoning_gym_datasets as catalogue
from pettingllm_envs.policies import scripted_policy


def step_seconds(env_id: str, episodes: int, **config: Any) -> tuple[dict[str, float], int]:
    """Mean seconds of ``env.step`` per role with the oracle on the test split, and the episodes solved."""
    env = pettingllm_envs.make(env_id, split="test", **config)
    oracle = scripted_policy(env_id)
    seconds: dict[str, list[float]] = {role: [] for role in env.unwrapped.possible_agents}
    solved = 0
    for seed in range(episodes):
        for step in time_steps(env, seed, oracle):
            if step.moved:
                seconds[step.agent].append(step.seconds)
        solved += any(env.unwrapped.is_success(a) for a in env.unwrapped.possible_agents)
    return {role: statistics.fmean(times) for role, times in seconds.items() if times}, solved


def generation_ms(dataset: str, items: int) -> float:
    """Mean ms to generate an item no env has asked for (indices past the ones episodes use)."""
    data = catalogue.load_dataset(dataset, catalogue.config_key(None), 0)
    start = time.perf_counter()
    pool = catalogue.pool_size(dataset)
    for index in range(pool - items, pool):
        data[index]
    return (time.perf_counter() - start) / items * 1e3


def copy_microseconds(env_id: str, copies: int, **config: Any) -> tuple[float, float]:
    ours, naive = deepcopy_costs(env_id, copies, naive_share=20, **config)
    return ours * 1e6, naive * 1e6


RESULT_KEYS = result_keys("datasets")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--items", type=int, default=3, help="items generated to time a new problem")
    parser.add_argument("--datasets", nargs="*", help="default: every reasoning-gym dataset")
    parser.add_argument("--out", default="benchmarks/results/reasoning_gym_bridge.json")
    args = parser.parse_args(argv)

    recording = start_recording()
    results: dict[str, Any] = {"datasets": {}}
    rows = []
    for dataset in args.datasets or catalogue.all_datasets():
        if dataset in catalogue.UNSUPPORTED:
            results["datasets"][dataset] = {"bridged": False, "reason": catalogue.UNSUPPORTED[dataset]}
            rows.append(f"| `{dataset}` | no: {catalogue.UNSUPPORTED[dataset]} | | | | | |")
            continue
        # The baseline is measured next to each dataset: on a shared machine the load changes within a run.
        baseline, _ = step_seconds("math_v0", args.episodes)
        math_copy_us, _ = copy_microseconds("math_v0", args.copies)
        start = time.perf_counter()
        catalogue.load_dataset(dataset, catalogue.config_key(None), 0)
        setup_s = time.perf_counter() - start
        new_problem_ms = generation_ms(dataset, args.items)
        steps, solved = step_seconds("reasoning_gym_v0", args.episodes, dataset=dataset)
        ours, naive = copy_microseconds("reasoning_gym_v0", args.copies, dataset=dataset)
        reasoner_ms, tool_ms = steps["reasoner"] * 1e3, steps["tool"] * 1e3
        results["datasets"][dataset] = {
            "bridged": True, "dataset_setup_s": setup_s, "new_problem_ms": new_problem_ms,
            "reasoner_step_ms": reasoner_ms, "tool_step_ms": tool_ms,
            "math_v0_reasoner_step_ms": baseline["reasoner"] * 1e3, "math_v0_tool_step_ms": baseline["tool"] * 1e3,
            "deepcopy_us": ours, "naive_deepcopy_us": naive, "math_v0_deepcopy_us": math_copy_us,
            "oracle_solved": solved, "episodes": args.episodes,
        }
        rows.append(f"| `{dataset}` | yes | {new_problem_ms:,.1f} | {reasoner_ms:.2f} "
                    f"({steps['reasoner'] / baseline['reasoner']:.1f}x) | {tool_ms:.1f} "
                    f"({steps['tool'] / baseline['tool']:.2f}x) | {ours:.0f} ({ours / math_copy_us:.1f}x; "
                    f"naive {naive / ours:.0f}x ours) | {solved}/{args.episodes} |")
    print_markdown_table(["dataset", "bridged", "new problem ms", "reasoner step ms (x math_v0)",
                          "tool step ms (x math_v0)", "deepcopy µs (x math_v0; naive / ours)", "oracle solved"], rows)
    return write_results(args.out, results, recording)


if __name__ == "__main__":
    main()
