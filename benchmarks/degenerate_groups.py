"""Do instruction variants reduce degenerate GRPO groups? Variants vs. temperature only.

``python -m benchmarks.degenerate_groups [--steps 12] [--g 8] [--seeds 0 1] [--out-dir DIR]``

One command runs the experiment of docs/design.md §5 on the tiny offline model:

1. **Warm start.** The tiny model has random weights and would never write ``\\boxed{}``,
   so every group would be degenerate in both conditions. A short supervised warm-up on
   disjoint ``math_v0`` train problems (ids from :data:`WARMUP_OFFSET`; plain and
   variant-conditioned prompts in equal parts, so neither condition is favoured) teaches it
   the answer format partially: rewards then vary (-0.5 no answer, 0 wrong, 1 right).
2. **Two conditions, same budget.** From the warm model, with the same seeds, problems,
   G, steps and temperature: the prompt-conditioned trainer with the K default variants
   (G split round-robin) and the temperature-only baseline (no variants). Both train the
   reasoner's first-turn answer, grouped by question.
3. **Self-consistency** on test problems: single sample, majority of G, greedy and the
   logit-averaged variant ensemble, for the warm model and each condition's trained model.
4. **Theory beside it**: the analytic p^G + (1-p)^G, and a correlated-rollout simulation
   (beta-binomial: each question draws its own success rate q ~ Beta with mean p, rollouts
   are Bernoulli(q), so two rollouts of one question have correlation rho) against its
   closed form, over rho and G. For the measured runs: the degenerate rate that independent
   rollouts with the condition's reward distribution would give (sum_v pi_v^G, the
   generalisation of p^G + (1-p)^G to rewards with more than two values) and the measured
   within-question correlation (ICC(1)).

Writes ``degenerate_groups.json``, ``degenerate_groups.md`` and ``degenerate_groups.png``
to ``--out-dir`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.recording import result_keys, start_recording, write_results

#: Warm-up problems are train-split ids from here on, disjoint from the training runs' ids.
WARMUP_OFFSET = 1_000_000
CONDITIONS = ("variants", "temperature")


# ----------------------------------------------------------------- theory (pure)


def analytic_degenerate(p: float, g: int) -> float:
    """Pr[all G independent Bernoulli(p) rollouts agree] = p^G + (1-p)^G."""
    return p**g + (1.0 - p) ** g


def independent_degenerate(distribution: Sequence[float], g: int) -> float:
    """Pr[G independent draws from a reward distribution with these value probabilities are
    all equal] = sum_v pi_v^G (p^G + (1-p)^G for two values)."""
    return math.fsum(pi**g for pi in distribution)


def beta_params(p: float, rho: float) -> tuple[float, float]:
    """Beta(a, b) with mean p whose beta-binomial rollouts have pairwise correlation rho:
    rho = 1 / (a + b + 1)."""
    if not (0 < p < 1 and 0 < rho < 1):
        raise ValueError(f"need 0 < p < 1 and 0 < rho < 1, got p={p}, rho={rho}")
    total = (1.0 - rho) / rho
    return p * total, (1.0 - p) * total


def beta_binomial_degenerate(p: float, rho: float, g: int) -> float:
    """Closed form of Pr[degenerate] when a question's G rollouts are Bernoulli(q), q ~ Beta
    with mean p and correlation rho: E[q^G] + E[(1-q)^G] = prod_i (a+i)/(a+b+i) + prod_i (b+i)/(a+b+i).
    rho = 0 is independence, rho = 1 a shared outcome (always degenerate)."""
    if rho <= 0:
        return analytic_degenerate(p, g)
    if rho >= 1 or p in (0.0, 1.0):
        return 1.0
    a, b = beta_params(p, rho)
    all_right = math.prod((a + i) / (a + b + i) for i in range(g))
    all_wrong = math.prod((b + i) / (a + b + i) for i in range(g))
    return all_right + all_wrong


def simulate_degenerate(p: float, rho: float, g: int, questions: int, rng: np.random.Generator) -> float:
    """Monte-Carlo degenerate fraction of the shared-latent model (see
    :func:`beta_binomial_degenerate`) over ``questions`` simulated questions."""
    q = np.full(questions, p) if rho <= 0 else rng.beta(*beta_params(p, rho), size=questions)
    successes = rng.binomial(g, q)
    return float(np.mean((successes == 0) | (successes == g)))


def intraclass_correlation(groups: Sequence[Sequence[float]]) -> float:
    """ICC(1) of rewards within groups (one-way ANOVA, equal group sizes): how much more
    alike two rollouts of one question are than two rollouts of different questions. NaN
    when there is no variance at all."""
    k = len(groups[0])
    if any(len(grp) != k for grp in groups) or k < 2 or len(groups) < 2:
        raise ValueError("need at least two groups of one size >= 2")
    means = [statistics.fmean(grp) for grp in groups]
    grand = statistics.fmean(means)
    msb = k * math.fsum((m - grand) ** 2 for m in means) / (len(groups) - 1)
    msw = math.fsum((x - m) ** 2 for grp, m in zip(groups, means, strict=True) for x in grp) / (len(groups) * (k - 1))
    denominator = msb + (k - 1) * msw
    return (msb - msw) / denominator if denominator > 0 else float("nan")


def reward_groups(dump: Path) -> list[list[float]]:
    """The reward groups of a run's ``--dump-samples`` file, one list per (step, group)."""
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for line in dump.read_text().splitlines():
        row = json.loads(line)
        groups[(row["step"], row["group"])].append(row["reward"])
    return list(groups.values())


# ----------------------------------------------------------------- experiment


def warm_start(model_dir: Path, out_dir: Path, *, steps: int, batch: int, lr: float, variants: Sequence[str],
               seed: int) -> Path:
    """Teacher-force ``\\boxed{gold}`` answers on reasoner prompts of disjoint train problems
    (see the module docstring); returns the warm model's directory."""
    import torch

    import pettingllm_envs
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.variants import condition
    from trainers.models.policy_set import PolicySet
    from trainers.rollout.episodes import agent_prompt

    torch.manual_seed(seed)
    config = TrainConfig.from_flat(model=str(model_dir), env="math_v0", lr=lr, device="cpu")
    policies = PolicySet(config.model, config.policy_for_roles(["reasoner"]))
    eos = policies.eos_ids[0]
    env = pettingllm_envs.make("math_v0")
    conditions: list[str | None] = [None, *variants]
    for step in range(steps):
        prompts, targets = [], []
        for j in range(batch):
            env.reset(seed=WARMUP_OFFSET + step * batch + j, options={"split": "train"})
            messages = agent_prompt(env, "reasoner")
            variant = conditions[(step * batch + j) % len(conditions)]
            prompts.append(policies.encode_prompt(condition(messages, variant) if variant else messages)[1])
            answer = "\\boxed{" + env.unwrapped.instance.answer + "}"
            targets.append(policies.tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos])
        optimizer = policies.optimizers["shared"]
        optimizer.zero_grad(set_to_none=True)
        with policies.active("shared") as model:
            logp, mask = policies.token_logprobs(model, prompts, targets)
        loss = -(logp * mask).sum() / mask.sum()
        loss.backward()
        optimizer.step()
    target = out_dir / "warm"
    policies.save(target)
    return target / "shared"


def run_condition(condition_name: str, model: Path, run_dir: Path, args: argparse.Namespace,
                  seed: int) -> tuple[list[dict[str, float]], Path]:
    """Train one condition from ``model``; returns its metrics history and sample dump."""
    from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS, TrainConfig
    from trainers.algorithms.variants import PromptConditionedTrainer

    dump = run_dir / "samples.jsonl"
    config = TrainConfig.from_flat(
        env="math_v0", model=str(model), run_dir=str(run_dir), steps=args.steps, seed=seed,
        problems_per_step=args.problems_per_step, n_samples=args.g, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, lr=args.lr, micro_batch_size=64, device="cpu", progress=False,
        tensorboard=False, checkpoint_every=0, keep_checkpoints=1, dump_samples=str(dump),
        prompt_variants=list(DEFAULT_PROMPT_VARIANTS) if condition_name == "variants" else [],
    )
    return PromptConditionedTrainer(config).train(), dump


def self_consistency(model: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    import pettingllm_envs
    from pettingllm_envs.capabilities import Voting, capability
    from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS, TrainConfig
    from trainers.algorithms.self_consistency import evaluate_self_consistency
    from trainers.models.policy_set import PolicySet

    torch.manual_seed(args.seeds[0])
    config = TrainConfig.from_flat(model=str(model), env="math_v0", temperature=args.temperature,
                                   max_new_tokens=args.max_new_tokens, device="cpu")
    policies = PolicySet(config.model, config.policy_for_roles(["reasoner", "tool"]))
    report = evaluate_self_consistency(policies, "shared", lambda: pettingllm_envs.make("math_v0"),
                                       range(args.eval_problems), args.g, voting=capability("math_v0", Voting),
                                       variants=DEFAULT_PROMPT_VARIANTS)
    return {"single": report.single, "majority": report.majority, "greedy": report.greedy,
            "ensemble": report.ensemble, "voted": report.voted, "problems": report.problems}


def summarise_condition(histories: Sequence[list[dict[str, float]]], dumps: Sequence[Path], g: int) -> dict[str, Any]:
    """Pooled statistics of one condition over its seeds."""
    rows = [m for h in histories for m in h]
    groups = [grp for d in dumps for grp in reward_groups(d)]
    values = Counter(r for grp in groups for r in grp)
    total = sum(values.values())
    distribution = {str(v): c / total for v, c in sorted(values.items())}
    variant_keys = sorted({k for m in rows for k in m if k.startswith("reward/variant/")})
    return {
        "degenerate_frac": statistics.fmean(m["groups/degenerate_frac"] for m in rows),
        "degenerate_frac_first_step": statistics.fmean(h[0]["groups/degenerate_frac"] for h in histories),
        "independent_prediction": independent_degenerate(list(distribution.values()), g),
        "icc": intraclass_correlation(groups),
        "reward_mean": statistics.fmean(m["reward/mean"] for m in rows),
        "reward_first_step": statistics.fmean(h[0]["reward/mean"] for h in histories),
        "reward_last_step": statistics.fmean(h[-1]["reward/mean"] for h in histories),
        # first-turn rollouts: each sample is its own one-step episode, so this is the policy's rate
        "success_rate": statistics.fmean(m["rollout/success_rate"] for m in rows),
        "reward_distribution": distribution,
        "variant_reward": {k.rsplit("/", 1)[1]: statistics.fmean(m[k] for m in rows if k in m) for k in variant_keys},
        "groups": len(groups),
        "curves": {key: [statistics.fmean(h[i][key] for h in histories) for i in range(len(histories[0]))]
                   for key in ("reward/mean", "groups/degenerate_frac", *variant_keys)},
    }


def theory(rhos: Sequence[float], gs: Sequence[int], p: float, questions: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "p": p, "questions": questions,
        "analytic": {str(g): {str(pp): analytic_degenerate(pp, g) for pp in (0.1, 0.3, 0.5, 0.7, 0.9)} for g in gs},
        "correlated": {str(g): [{"rho": rho, "closed_form": beta_binomial_degenerate(p, rho, g),
                                 "simulated": simulate_degenerate(p, rho, g, questions, rng)} for rho in rhos]
                       for g in gs},
    }


# ----------------------------------------------------------------- report


def markdown(result: dict[str, Any]) -> str:
    from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS

    args = result["args"]
    lines = [f"Tiny model, math_v0 reasoner first turn, G={args['g']}, {args['problems_per_step']} questions/step, "
             f"{args['steps']} steps, seeds {args['seeds']}, temperature {args['temperature']}, "
             f"warm-up {args['warmup_steps']} steps; {result['seconds']:.0f} s.", "",
             "| condition | degenerate frac (all steps) | step 1 | independent prediction | ICC | mean reward | "
             "reward step 1 -> last | success |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in CONDITIONS:
        c = result["conditions"][name]
        lines.append(f"| {name} | {c['degenerate_frac']:.3f} | {c['degenerate_frac_first_step']:.3f} | "
                     f"{c['independent_prediction']:.3f} | {c['icc']:.3f} | {c['reward_mean']:.3f} | "
                     f"{c['reward_first_step']:.3f} -> {c['reward_last_step']:.3f} | {c['success_rate']:.3f} |")
    lines += ["", "Per-variant mean reward (variants condition):", "", "| variant | mean reward |", "|---|---:|"]
    for k, v in result["conditions"]["variants"]["variant_reward"].items():
        lines.append(f"| {k}: {DEFAULT_PROMPT_VARIANTS[int(k)]} | {v:.3f} |")
    lines += ["", f"Self-consistency on test problems 0..{args['eval_problems'] - 1} (G={args['g']}):", "",
              "| model | single sample | majority of G | greedy | variant ensemble (greedy) | voted |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, sc in result["self_consistency"].items():
        lines.append(f"| {name} | {sc['single']:.3f} | {sc['majority']:.3f} | {sc['greedy']:.3f} | "
                     f"{sc['ensemble']:.3f} | {sc['voted']:.3f} |")
    th = result["theory"]
    gs = list(th["correlated"])
    lines += ["", f"Correlated rollouts (beta-binomial, p={th['p']}, {th['questions']} simulated questions): "
              "Pr[degenerate] closed form / simulated", "", "| rho | " + " | ".join(f"G={g}" for g in gs) + " |",
              "|---:|" + "---:|" * len(gs)]
    for i, row in enumerate(th["correlated"][gs[0]]):
        cells = [f"{th['correlated'][g][i]['closed_form']:.3f} / {th['correlated'][g][i]['simulated']:.3f}"
                 for g in gs]
        lines.append(f"| {row['rho']:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5), constrained_layout=True)
    for name in CONDITIONS:
        curves = result["conditions"][name]["curves"]
        steps = range(1, len(curves["reward/mean"]) + 1)
        axes[0].plot(steps, curves["reward/mean"], marker=".", label=name)
        axes[1].plot(steps, curves["groups/degenerate_frac"], marker=".", label=name)
    for key, values in result["conditions"]["variants"]["curves"].items():
        if key.startswith("reward/variant/"):
            axes[2].plot(range(1, len(values) + 1), values, marker=".", label=key)
    for g, rows in result["theory"]["correlated"].items():
        rhos = [r["rho"] for r in rows]
        line, = axes[3].plot(rhos, [r["closed_form"] for r in rows], label=f"G={g} closed form")
        axes[3].plot(rhos, [r["simulated"] for r in rows], "o", color=line.get_color(), label=f"G={g} simulated")
    titles = ("mean reward", "degenerate group fraction", "reward per variant", "Pr[degenerate] vs rho (p=0.5)")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("rho" if ax is axes[3] else "step")
        ax.legend(fontsize="small")
    fig.savefig(target, dpi=100)
    plt.close(fig)


RESULT_KEYS = result_keys("args", "conditions", "self_consistency", "theory", "seconds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.degenerate_groups", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--problems-per-step", type=int, default=4)
    parser.add_argument("--g", type=int, default=8, help="rollouts per question (both conditions)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--eval-problems", type=int, default=16)
    parser.add_argument("--sim-questions", type=int, default=20_000)
    parser.add_argument("--out-dir", default="benchmarks/results")
    parser.add_argument("--work-dir", help="models and runs (default: a temporary directory)")
    args = parser.parse_args(argv)

    from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS
    from trainers.models.tiny_model import write_tiny_model

    recording, start = start_recording(), time.perf_counter()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work_dir or tmp)
        tiny = write_tiny_model(work / "tiny", seed=args.seeds[0])
        warm = warm_start(tiny, work, steps=args.warmup_steps, batch=16, lr=3e-3, variants=DEFAULT_PROMPT_VARIANTS,
                          seed=args.seeds[0])
        print(f"[degenerate_groups] warm model in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        conditions, sc = {}, {"warm start": self_consistency(warm, args)}
        for name in CONDITIONS:
            histories, dumps = [], []
            for seed in args.seeds:
                history, dump = run_condition(name, warm, work / f"{name}_seed{seed}", args, seed)
                histories.append(history)
                dumps.append(dump)
                print(f"[degenerate_groups] {name} seed {seed}: degenerate "
                      f"{[round(m['groups/degenerate_frac'], 2) for m in history]}", file=sys.stderr)
            conditions[name] = summarise_condition(histories, dumps, args.g)
            trained = work / f"{name}_seed{args.seeds[0]}" / "checkpoints" / f"step_{args.steps:06d}" / "policies"
            sc[f"trained: {name}"] = self_consistency(trained / "shared", args)
    result = {"args": vars(args), "conditions": conditions, "self_consistency": sc,
              "theory": theory([0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9], [4, 8, 16], 0.5, args.sim_questions,
                               args.seeds[0]),
              "seconds": time.perf_counter() - start}
    result = write_results(out_dir / "degenerate_groups.json", result, recording)
    (out_dir / "degenerate_groups.md").write_text(markdown(result))
    plot(result, out_dir / "degenerate_groups.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
