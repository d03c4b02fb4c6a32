"""Benchmark: M-GRPO vs a frozen sub-agent vs single-agent GRPO on research_v0, tiny model, equal budget.

Every method sees the same questions (``step * questions + j``), the same number of
rollouts per question, steps, completion budget and learning rate, so each generates the
same number of rollouts; they differ only in what is trained:

* ``mgrpo``: separate main and sub models, per-question group advantages for both, the
  sub's after alignment to ``d_max`` sub-trajectories per rollout;
* ``frozen_sub``: the same, the sub model is never updated;
* ``single``: one model plays both roles, every action gets its rollout's main advantage.

All three run in this process (``run_local``; the two-process pipeline computes the same
updates, it only moves the statistics through the store). The main agent's response is
prefilled with ``DELEGATE: `` so that a random tiny model reaches the sub-agent at all;
with it the main never answers, so correctness and success are 0 by construction and the
main reward only measures well-formed delegations. Writes ``<out>.json`` (per-step
metrics), ``<out>.png`` (curves) and prints a Markdown table.

Run: ``python benchmarks/mgrpo_comparison.py [--steps 6 --questions 2 --rollouts 4]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.recording import result_keys, start_recording, write_results  # noqa: E402
from trainers.algorithms.mgrpo.config import MODES  # noqa: E402  (after the sys.path line: runnable as a script)

ENV = {"max_delegations": 2, "max_main_steps": 3, "max_tool_calls": 1}
RESULT_KEYS = result_keys("args", "env_kwargs", "results")
CURVES = ("reward/main", "reward/sub")


def run(model_dir: Path, work: Path, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    from trainers.algorithms.mgrpo.train import MGRPOConfig, run_local

    results = {}
    for mode in MODES:
        start = time.perf_counter()
        cfg = MGRPOConfig.from_flat(model=str(model_dir), mode=mode, env_kwargs=ENV, prefill={"main": "DELEGATE: "},
                                    questions_per_step=args.questions, rollouts=args.rollouts, d_max=args.d_max,
                                    steps=args.steps, max_new_tokens=args.max_new_tokens, max_prompt_tokens=512,
                                    lr=args.lr, seed=args.seed, run_dir=str(work / mode), threads=2)
        results[mode] = run_local(cfg)
        print(f"[{mode}] {args.steps} steps in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return results


def table(results: dict[str, list[dict[str, float]]], last: int) -> str:
    """Markdown: per method, first-step and mean-of-last-``last``-steps rewards, success, signal."""
    lines = [f"| method | main reward (step 1) | main reward (last {last}) | sub reward (step 1) "
             f"| sub reward (last {last}) | success | main degenerate groups | sub degenerate groups |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, history in results.items():
        tail = history[-last:]
        main_deg = "groups/degenerate_frac/shared" if mode == "single" else "groups/degenerate_frac/main"
        sub_deg = (statistics.fmean(m["groups/degenerate_frac/sub"] for m in history) if mode != "single"
                   else float("nan"))
        lines.append(
            f"| {mode} | {history[0]['reward/main']:.3f} | {statistics.fmean(m['reward/main'] for m in tail):.3f} "
            f"| {history[0]['reward/sub']:.3f} | {statistics.fmean(m['reward/sub'] for m in tail):.3f} "
            f"| {statistics.fmean(m['rollout/success_rate'] for m in history):.3f} "
            f"| {statistics.fmean(m[main_deg] for m in history):.2f} | {sub_deg:.2f} |")
    return "\n".join(lines)


def plot(results: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(10, 3.5))
    for ax, key in zip(axes, CURVES, strict=True):
        for mode, history in results.items():
            ax.plot([m["step"] for m in history], [m[key] for m in history], marker="o", label=mode)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("research_v0, tiny random model, equal budget")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--d-max", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mgrpo_comparison"))
    args = parser.parse_args()
    recording = start_recording()
    from trainers.models.tiny_model import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        results = run(write_tiny_model(Path(tmp) / "tiny"), Path(tmp), args)
    out = Path(args.out)
    write_results(out.with_suffix(".json"), {"args": vars(args), "env_kwargs": ENV, "results": results}, recording)
    plot(results, out.with_suffix(".png"))
    print(table(results, last=max(1, args.steps // 2)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
