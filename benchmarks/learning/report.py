"""The learning experiment's statistics and report (pure but for the plot): success pooled over
seeds with Wilson intervals, the mean change with a t interval, whether it beats the
seed-to-seed noise, and the table and plot that :mod:`benchmarks.learning.experiment` writes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainers.maths.evaluation import wilson_interval

#: Two-sided 95 % quantiles of Student's t by degrees of freedom (seeds - 1).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval over seeds (0 for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def pooled_rate(rates: Sequence[float], n_each: int) -> dict[str, float]:
    """Success over every seed's episodes pooled, with its Wilson 95 % interval."""
    successes = round(sum(r * n_each for r in rates))
    n = n_each * len(rates)
    low, high = wilson_interval(successes, n)
    return {"rate": successes / n, "ci_low": low, "ci_high": high, "episodes": n}


def improvement_beyond_noise(before: Sequence[float], after: Sequence[float]) -> dict[str, float]:
    """The mean change of held-out success over seeds against the seed-to-seed noise measured
    in the same run: the larger standard deviation over seeds of the before and after rates
    (how much one seed's figure moves by chance). ``beyond`` is 1 when the mean change
    exceeds it."""
    deltas = [a - b for a, b in zip(after, before, strict=True)]
    noise = max(statistics.stdev(before) if len(before) > 1 else 0.0,
                statistics.stdev(after) if len(after) > 1 else 0.0)
    mean = statistics.fmean(deltas)
    return {"mean_delta": mean, "noise": noise, "beyond": float(mean > noise)}


def summarize(runs: list[dict[str, Any]], eval_problems: int) -> dict[str, Any]:
    """Per-condition aggregates over seeds (pure)."""
    before = [r["before"] for r in runs]
    after = [r["after"] for r in runs]
    delta, delta_ci = mean_ci([a - b for a, b in zip(after, before, strict=True)])
    roles = sorted(runs[0]["returns_after"])
    return {
        "seeds": len(runs),
        "before": pooled_rate(before, eval_problems), "after": pooled_rate(after, eval_problems),
        "delta_mean": delta, "delta_ci95": delta_ci,
        "after_seed_std": statistics.stdev(after) if len(after) > 1 else 0.0,
        **improvement_beyond_noise(before, after),
        "returns_before": {r: statistics.fmean(x["returns_before"][r] for x in runs) for r in roles},
        "returns_after": {r: statistics.fmean(x["returns_after"][r] for x in runs) for r in roles},
        "degenerate_frac": statistics.fmean(r["degenerate_frac"] for r in runs),
        "completions": statistics.fmean(r["completions"] for r in runs),
        "completion_tokens": statistics.fmean(r["completion_tokens"] for r in runs),
        "seconds": statistics.fmean(r["seconds"] for r in runs),
    }



#: The paper's numbers (Zhao et al. 2025, Qwen3-1.7B): held-out success before -> after.
PAPER = {
    "plan_path_v0": "AT-GRPO (MAS): 5 -> 96-97 %; single-agent RL: 14-47 %",
    "sudoku_v0": "AT-GRPO (MAS): 7 -> 99 %; single-agent RL: 14-47 %",
}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_table(results: dict[str, Any]) -> str:
    lines = ["| env | condition | held-out success before (95 % CI) | after (95 % CI) | change, mean over seeds "
             "(95 % t CI) | seed std after | degenerate groups | completions | wall s/run | paper |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for env_id, env_result in results["envs"].items():
        for name, cond in env_result["conditions"].items():
            s = cond["summary"]
            b, a = s["before"], s["after"]
            lines.append(
                f"| `{env_id}` | {name} | {_pct(b['rate'])} % ({_pct(b['ci_low'])}-{_pct(b['ci_high'])}) | "
                f"{_pct(a['rate'])} % ({_pct(a['ci_low'])}-{_pct(a['ci_high'])}) | "
                f"{100 * s['delta_mean']:+.1f} ± {100 * s['delta_ci95']:.1f} pts | {100 * s['after_seed_std']:.1f} | "
                f"{s['degenerate_frac']:.2f} | {s['completions']:.0f} | {s['seconds']:.0f} | "
                f"{PAPER.get(env_id, '') if name == 'at_grpo_per_role' else ''} |")
    lines += ["", "Held-out return per role (mean over seeds and test episodes), before -> after:", "",
              "| env | condition | returns | train reward, first -> last step |", "|---|---|---|---|"]
    for env_id, env_result in results["envs"].items():
        for name, cond in env_result["conditions"].items():
            s = cond["summary"]
            returns = ", ".join(f"{role} {s['returns_before'][role]:+.2f} -> {s['returns_after'][role]:+.2f}"
                                for role in s["returns_after"])
            first = statistics.fmean(r["train_reward_first"] for r in cond["runs"])
            last = statistics.fmean(r["train_reward_last"] for r in cond["runs"])
            lines.append(f"| `{env_id}` | {name} | {returns} | {first:+.3f} -> {last:+.3f} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(results["envs"])
    fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4.2), squeeze=False)
    for ax, env_id in zip(axes[0], envs, strict=True):
        for name, cond in results["envs"][env_id]["conditions"].items():
            runs = cond["runs"]
            points = min(len(r["curve"]) for r in runs)
            xs = [statistics.fmean(r["curve"][i]["completions"] for r in runs) for i in range(points)]
            ys = [statistics.fmean(r["curve"][i]["success"] for r in runs) for i in range(points)]
            low = [min(r["curve"][i]["success"] for r in runs) for i in range(points)]
            high = [max(r["curve"][i]["success"] for r in runs) for i in range(points)]
            (line,) = ax.plot(xs, ys, marker="o", label=name)
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15)
        ax.set_title(env_id)
        ax.set_xlabel("sampled completions")
        ax.set_ylabel("held-out success (mean of seeds; band: min-max)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
