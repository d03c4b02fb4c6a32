"""Does AT-GRPO teach? The AT-GRPO paper's comparison in miniature, on held-out problems.

``python -m benchmarks.learning [--quick] [--out-dir DIR] [--seeds 0 1 2] [--envs plan_path_v0 sudoku_v0]``,
from the repository root.

The paper (Zhao et al. 2025, "Stronger Together") reports that on long-horizon planning a
multi-agent system trained with AT-GRPO reaches 96-99.5 % where single-agent RL reaches
14-47 % (Qwen3-1.7B: Plan-Path 5 -> 96-97 %, Sudoku 7 -> 99 %), and that agent- and
turn-wise groups are what make it work. This runs the same comparison at a size a CPU can
rerun:

1. **One warm start per env** (:mod:`benchmarks.learning.sft`): a byte-level Llama-style model
   (1.38M parameters) trained from scratch on the oracle's demonstrations of the train split
   with injected mistakes (tool programs a small model can write, a planner that takes the
   tool's answer over, brief role tags as system messages: :mod:`benchmarks.learning.demonstrations`),
   both views (every role, and the single-agent reply) in one shared model, so every
   condition starts from the same weights.
2. **Five conditions**, each from that warm start, at a matched budget (the same number of
   sampled completions; the run stops at the first step that reaches it), with the same
   optimiser, temperature, group size N and problems per step:

   ``at_grpo_per_role``: tree rollouts, (problem, agent, turn) groups, one policy per role;
   ``at_grpo_shared``: the same, one policy for every role;
   ``pooled_groups``: the same tree rollouts and per-role policies, groups pooled per problem;
   ``independent``: N whole episodes per problem (no tree), (problem, agent, turn) groups,
   per-role policies (the plain-GRPO rollout);
   ``single_agent``: one policy does the whole task alone through the single-agent view
   (:class:`pettingllm_envs.evaluation.single_agent_env.SingleAgentEnv`, the same team
   reward summed), trained with the same tree rollout and per-turn groups, which with one
   agent is GRPO per turn.
3. **Held-out evaluation** (the trainer's :meth:`~trainers.algorithms.atgrpo.train.Trainer.evaluate`): one
   sampled episode (temperature 1) on each of the first ``eval_problems`` test-split
   problems, before training, at ``eval_points`` points of the budget and at the end. Reported per condition:
   success before and after with 95 % Wilson intervals (all seeds' episodes pooled), the
   mean change over seeds with a t interval, the seed-to-seed spread, per-role returns,
   the degenerate-group fraction and the wall time.

Writes ``learning.json``, ``learning.md`` (the table) and ``learning.png`` (held-out
success against sampled completions, one panel per env) to ``--out-dir`` (default
``benchmarks/results/learning``). ``--quick`` is the CI check
(``tests/benchmark/test_learning.py``): one small env, AT-GRPO per role only, three seeds, asserting
that held-out success rises by more than the seed-to-seed noise of the same run.

Everything runs with ``torch.set_num_threads(1)`` on CPU, conditions one after another.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.learning.report import markdown_table, plot, summarize
from benchmarks.recording import result_keys, start_recording, write_results


@dataclass(frozen=True)
class Condition:
    """One training condition of the comparison."""

    name: str
    rollout: str
    group_by: str
    regime: str
    single_agent: bool = False


#: In the order they run: the headline comparison (AT-GRPO against the single agent) first, so
#: that a run cut short still has it; ``independent`` last (all-distinct prompts: the slowest).
CONDITIONS: tuple[Condition, ...] = (
    Condition("at_grpo_per_role", "tree", "problem_agent_turn", "per_role"),
    Condition("single_agent", "tree", "problem_agent_turn", "shared", single_agent=True),
    Condition("at_grpo_shared", "tree", "problem_agent_turn", "shared"),
    Condition("pooled_groups", "tree", "problem", "per_role"),
    Condition("independent", "independent", "problem_agent_turn", "per_role"),
)


@dataclass
class EnvSetting:
    """One env of the experiment: its config, its warm start and its RL budget."""

    env: str
    env_kwargs: dict[str, Any]
    sft_steps: int = 300
    """Warm-start optimiser steps (batch 16)."""
    sft_lr: float = 1e-3
    """Peak learning rate of the warm start (cosine decay to a tenth of it)."""
    sft_continue: tuple[tuple[int, float], ...] = ()
    """Further warm-start stages ``(steps, peak lr)`` on the same demonstrations, each from the
    previous stage's weights (a model this size learns to copy only after several hundred
    steps; a stage at a new peak lr is how the committed run got there)."""
    sft_problems: int = 400
    """Train-split problems demonstrated."""
    mistake_rate: float = 0.3
    """Share of demonstrated answers that are corrupted (the warm policy is imperfect)."""
    max_new_tokens: int = 48
    """Completion budget of a role's action."""
    max_new_tokens_single: int = 96
    """Completion budget of the single-agent reply (every role's section)."""
    max_prompt_tokens: int = 512
    """Prompt budget (bytes: the tokenizer is byte-level), in the warm start and in RL; a
    longer prompt loses the middle of its history (the board and the latest turn stay)."""
    budget: int = 1024
    """Sampled completions per run (the matched budget)."""
    eval_points: int = 0
    """Held-out evaluations during a run besides before and after."""
    scripted_roles: tuple[str, ...] = ()
    """Roles played by the oracle without mistakes instead of a trained policy
    (:class:`benchmarks.learning.demonstrations.ScriptedPartners`); the quick CI check scripts the tool."""
    single_agent_demonstrations: bool = True
    """Also demonstrate the single-agent view (needed when the single-agent condition runs)."""
    warm_dir: str | None = None
    """An existing warm start (a :mod:`benchmarks.learning.sft` output, shared regime) to use instead of
    training one; its ``sft.json`` (and those of the models it was fine-tuned from) go into the results."""


@dataclass
class ExperimentConfig:
    """The whole experiment. The defaults are the committed run (``benchmarks/results/learning``)."""

    envs: list[EnvSetting] = field(default_factory=lambda: [
        # The tool writes a short solver over a copy of the board (400 and 290 bytes) and the
        # planner copies what it printed (the envs' Demonstrations); its prompt shows the program.
        EnvSetting("plan_path_v0", {"rows": 3, "cols": 3, "min_distance": 2, "max_turns": 2},
                   sft_continue=((300, 1e-3),), max_new_tokens=448, max_new_tokens_single=480,
                   max_prompt_tokens=768, budget=512),
        EnvSetting("sudoku_v0", {"size": 4, "givens": 14, "max_turns": 2}, sft_continue=((300, 3e-3),) * 3,
                   max_new_tokens=320, max_new_tokens_single=360, max_prompt_tokens=768, budget=512),
    ])
    conditions: tuple[Condition, ...] = CONDITIONS
    seeds: tuple[int, ...] = (0, 1, 2)
    n_samples: int = 8
    """N: the group size (completions per tree node, episodes per problem with ``independent``)."""
    problems_per_step: int = 2
    """Problems per step: with two roles, two turns and N = 8, a step samples up to 64
    completions, so the 512-completion budget is 8 updates or more."""
    lr: float = 1e-4
    """AdamW learning rate of the RL runs (a tenth of the warm start's peak: at 3e-4 and 1e-3
    the quick check's held-out success fell in every seed)."""
    aggregation: str = "token_mean"
    """The PPO loss's token aggregation (``UpdateSettings.aggregation``)."""
    eval_problems: int = 64
    scratch_hidden_size: int = 192
    """The from-scratch model: hidden 192, 4 layers (1.38M parameters). A 64 x 2-layer model
    (90k) never learned to copy the tool's answer, and a 128 x 4-layer one warm-started to only
    2 % on 4x4 mazes."""
    scratch_layers: int = 4
    work_dir: str = "runs/learning"
    """Warm starts and run directories (not committed)."""
    out_dir: str = "benchmarks/results/learning"
    warm_start_cache: str = "auto"
    """Where warm starts are kept by content and reused (:mod:`benchmarks.learning.warm_cache`):
    ``auto`` is ``$PETTINGLLM_CACHE/warm-starts``, empty trains every time. A reused warm start
    is the one the same inputs would train: the CI check then spends its minutes on RL."""

    def warm_start_cache_dir(self) -> str:
        if self.warm_start_cache == "auto":
            from benchmarks.learning.warm_cache import default_cache_dir

            return str(default_cache_dir())
        return self.warm_start_cache


def quick_config(work_dir: str) -> ExperimentConfig:
    """The CI check, a few minutes of one core: the tool is played by the oracle
    (:class:`benchmarks.learning.demonstrations.ScriptedPartners`) and only the planner is warm-started and
    trained by AT-GRPO, three seeds. The planner's demonstrations take the tool's correct answer
    over, corrupted at 30 % of them, so the warm planner copies it only part of the time and
    exact copying is what RL has to teach. The model is the full experiment's (1.38M
    parameters), warm-started for 200 steps: the 90k-parameter model and an earlier hidden-128
    quick mode never learned to copy the tool's ``MOVES:`` line (then RL has nothing to
    sharpen: held-out success fell in every seed tried, learning rates 1e-4 to 1e-3), and this
    one after 100 steps at 50 % corruption had not yet either (14 % warm, 8 % after).
    Measured: 48 % -> 70 % (docs/benchmarks/learning.md)."""
    full = ExperimentConfig()
    setting = replace(full.envs[0], budget=768, scripted_roles=("tool",), sft_steps=200, sft_continue=(),
                      max_new_tokens=48, max_new_tokens_single=96, max_prompt_tokens=384,
                      single_agent_demonstrations=False)
    return replace(full, envs=[setting], conditions=CONDITIONS[:1], problems_per_step=4, work_dir=work_dir,
                   out_dir=str(Path(work_dir) / "results"))


# --------------------------------------------------------------------- running


def _ancestry(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summaries of the warm starts a warm start was fine-tuned from, latest first."""
    chain, model = [], summary["config"]["model"]
    while model and (Path(model) / "sft.json").is_file():
        parent = json.loads((Path(model) / "sft.json").read_text())
        chain.append({k: v for k, v in parent.items() if k != "loss_curve"})
        model = parent["config"]["model"]
    return chain


def warm_start(setting: EnvSetting, cfg: ExperimentConfig, log: Any) -> tuple[Path, dict[str, Any]]:
    """The env's warm start, trained once (each stage of ``sft_continue`` from the previous
    one's weights) and reused by every condition and seed; a stage whose ``sft.json`` holds
    the same config is reused, not retrained."""
    from benchmarks.learning.sft import SFTConfig, train_sft

    if setting.warm_dir:
        out = Path(setting.warm_dir)
        summary = json.loads((out / "sft.json").read_text())
        print(f"[learning] using the warm start in {out}", file=log, flush=True)
        return out, summary | {"continued_from": _ancestry(summary)}
    out = Path(cfg.work_dir) / f"warm_{setting.env}"
    sft = SFTConfig(env=setting.env, env_kwargs=setting.env_kwargs, train_problems=setting.sft_problems,
                    mistake_rate=setting.mistake_rate, steps=setting.sft_steps, lr=setting.sft_lr,
                    min_lr=setting.sft_lr / 10,
                    max_prompt_tokens=setting.max_prompt_tokens, scratch_hidden_size=cfg.scratch_hidden_size,
                    scratch_layers=cfg.scratch_layers, device="cpu", out_dir=str(out), overwrite=True,
                    cache_dir=cfg.warm_start_cache_dir(), scripted_roles=list(setting.scripted_roles),
                    single_agent=setting.single_agent_demonstrations)
    stages = [sft]
    for k, (steps, lr) in enumerate(setting.sft_continue, start=1):
        stage_out = f"{out}_cont{k if k > 1 else ''}"
        stages.append(replace(stages[-1], model=stages[-1].out_dir, steps=steps, lr=lr, min_lr=lr / 10,
                              out_dir=stage_out))
    for stage in stages:
        summary_file = Path(stage.out_dir) / "sft.json"
        if summary_file.exists() and json.loads(summary_file.read_text())["config"] == asdict(stage):
            print(f"[learning] reusing the warm start in {stage.out_dir}", file=log, flush=True)
            summary = json.loads(summary_file.read_text())
            continue
        print(f"[learning] warm start for {setting.env}: {stage.steps} SFT steps at lr {stage.lr:g}"
              f"{' from ' + stage.model if stage.model else ''}", file=log, flush=True)
        summary = train_sft(stage, log=log)
    return Path(stages[-1].out_dir), summary | {"continued_from": _ancestry(summary)}


def make_trainer(setting: EnvSetting, condition: Condition, seed: int, warm: Path, cfg: ExperimentConfig,
                 run_dir: Path) -> Any:
    from benchmarks.learning.demonstrations import make_view
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    class ViewTrainer(Trainer):
        """The trainer on the env's brief-instruction view (multi-agent or single-agent)."""

        def make_env(self) -> Any:
            task = self.config.task
            return make_view(task.env, dict(task.env_kwargs), single_agent=condition.single_agent,
                             brief=True, scripted=() if condition.single_agent else setting.scripted_roles)

    config = TrainConfig.from_flat(
        env=setting.env, env_kwargs=dict(setting.env_kwargs), model=str(warm), regime=condition.regime,
        rollout=condition.rollout, group_by=condition.group_by, n_samples=cfg.n_samples,
        problems_per_step=cfg.problems_per_step, temperature=1.0,
        max_new_tokens=setting.max_new_tokens_single if condition.single_agent else setting.max_new_tokens,
        max_prompt_tokens=setting.max_prompt_tokens, lr=cfg.lr, aggregation=cfg.aggregation, eval_every=0,
        eval_problems=cfg.eval_problems,
        steps=10**9, seed=seed, run_dir=str(run_dir), overwrite=True, tensorboard=False, progress=False,
        checkpoint_every=0, device="cpu", micro_batch_size=16)
    return ViewTrainer(config)


def _eval_record(metrics: dict[str, float], step: int, completions: int, seconds: float) -> dict[str, Any]:
    return {"step": step, "completions": completions, "seconds": seconds,
            "success": metrics["eval/success_rate"], "ci_low": metrics["eval/success_ci_low"],
            "ci_high": metrics["eval/success_ci_high"],
            "returns": {k.split("/")[-1]: v for k, v in metrics.items() if k.startswith("eval/return/")}}


def run_condition(setting: EnvSetting, condition: Condition, seed: int, warm: Path, cfg: ExperimentConfig,
                  before_cache: dict[tuple[bool, int], dict[str, Any]], log: Any) -> dict[str, Any]:
    """Train one condition with one seed to the matched budget; held-out evaluations on the way."""
    import torch

    run_dir = Path(cfg.work_dir) / setting.env / condition.name / f"seed{seed}"
    start = time.perf_counter()
    trainer = make_trainer(setting, condition, seed, warm, cfg, run_dir)
    key = (condition.single_agent, seed)
    if key not in before_cache:  # same weights, view and eval seed: the same episodes for every condition
        with torch.no_grad():
            before_cache[key] = _eval_record(trainer.evaluate(), 0, 0, 0.0)
    curve = [before_cache[key]]
    checkpoints = [round(setting.budget * (i + 1) / (setting.eval_points + 1)) for i in range(setting.eval_points)]
    completions, tokens, steps = 0, 0, []
    while completions < setting.budget:
        metrics = trainer.train_step()
        completions += int(metrics["samples"])
        tokens += int(metrics["tokens"])
        steps.append({k: metrics[k] for k in ("reward/mean", "groups/degenerate_frac", "samples/trained",
                                              "time/step") if k in metrics})
        if checkpoints and completions >= checkpoints[0] and completions < setting.budget:
            checkpoints.pop(0)
            curve.append(_eval_record(trainer.evaluate(), trainer.step, completions, time.perf_counter() - start))
    curve.append(_eval_record(trainer.evaluate(), trainer.step, completions, time.perf_counter() - start))
    seconds = time.perf_counter() - start
    result = {
        "condition": condition.name, "seed": seed, "steps": trainer.step, "completions": completions,
        "completion_tokens": tokens, "seconds": seconds, "curve": curve,
        "before": curve[0]["success"], "after": curve[-1]["success"],
        "returns_before": curve[0]["returns"], "returns_after": curve[-1]["returns"],
        "degenerate_frac": statistics.fmean(s["groups/degenerate_frac"] for s in steps),
        "train_reward_first": steps[0]["reward/mean"], "train_reward_last": steps[-1]["reward/mean"],
    }
    print(f"[learning] {setting.env} {condition.name} seed {seed}: held-out success {result['before']:.3f} -> "
          f"{result['after']:.3f} ({trainer.step} steps, {completions} completions, "
          f"degenerate {result['degenerate_frac']:.2f}, {seconds:.0f}s)", file=log, flush=True)
    return result


#: learning.json of one run (run_experiment: its config) or of runs merged (combine: their parts).
RESULT_KEYS = result_keys("envs", "seconds_total", optional=("config", "parts"))


def run_experiment(cfg: ExperimentConfig, log: Any = sys.stderr) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    recording, started = start_recording(), time.perf_counter()
    results: dict[str, Any] = {"config": _jsonable(asdict(cfg)), "envs": {}}
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for setting in cfg.envs:
        warm, sft_summary = warm_start(setting, cfg, log)
        env_result: dict[str, Any] = {"warm_start": {k: v for k, v in sft_summary.items() if k != "loss_curve"},
                                      "conditions": {}}
        results["envs"][setting.env] = env_result
        before_cache: dict[tuple[bool, int], dict[str, Any]] = {}
        for condition in cfg.conditions:
            runs = [run_condition(setting, condition, seed, warm, cfg, before_cache, log) for seed in cfg.seeds]
            env_result["conditions"][condition.name] = {"runs": runs, "summary": summarize(runs, cfg.eval_problems)}
            results["seconds_total"] = time.perf_counter() - started
            write_results(out / "learning.json", results, recording)  # partial results survive a crash
    results["seconds_total"] = time.perf_counter() - started
    results = write_results(out / "learning.json", results, recording)
    (out / "learning.md").write_text(markdown_table(results))
    plot(results, out / "learning.png")
    return results


def combine(paths: Sequence[str | Path], out_dir: str | Path) -> dict[str, Any]:
    """One ``learning.json``/``.md``/``.png`` from the results of runs made in separate
    processes (per env, or per group of conditions of an env), written to ``out_dir``. Each part
    keeps its machine record; the merged file's is the first part's (None when it has none)."""
    merged: dict[str, Any] = {"envs": {}, "parts": [], "seconds_total": 0.0}
    for path in paths:
        part = json.loads(Path(path).read_text())
        for env_id, env_result in part["envs"].items():
            target = merged["envs"].setdefault(env_id, {**env_result, "conditions": {}})
            if target["warm_start"]["config"] != env_result["warm_start"]["config"]:
                raise ValueError(f"{path}: {env_id} was trained from another warm start than an earlier part's")
            target["conditions"].update(env_result["conditions"])
        merged["parts"].append({"file": str(path), "config": part["config"], "seconds_total": part["seconds_total"],
                                "machine": part.get("machine")})
        merged["seconds_total"] += part["seconds_total"]
    merged["machine"] = merged["parts"][0]["machine"] if merged["parts"] else None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps(merged, indent=2) + "\n")
    (out / "learning.md").write_text(markdown_table(merged))
    plot(merged, out / "learning.png")
    return merged


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# ------------------------------------------------------------------------ command


def build_parser(prog: str = "python -m benchmarks.learning") -> argparse.ArgumentParser:
    from pettingllm_envs.commandline.errors import ArgumentParser

    parser = ArgumentParser(prog=prog, description="AT-GRPO against its ablations and the "
                            "single-agent baseline, from one warm start, on held-out problems.")
    parser.add_argument("--quick", action="store_true", help="the CI check: plan_path_v0, AT-GRPO per role, "
                        "three seeds, a few minutes (default: the full experiment)")
    parser.add_argument("--envs", nargs="+", help="envs of the full experiment (default: plan_path_v0 sudoku_v0)")
    parser.add_argument("--conditions", nargs="+", choices=[c.name for c in CONDITIONS],
                        help="conditions to run (default: all five)")
    parser.add_argument("--seeds", nargs="+", type=int, help="seeds (default: 0 1 2)")
    parser.add_argument("--budget", type=int, help="sampled completions per run (default: per env, 2304)")
    parser.add_argument("--lr", type=float, help="learning rate of the RL runs (default: 3e-4; --quick: 1e-4)")
    parser.add_argument("--aggregation", choices=["token_mean", "sequence_mean", "dr_grpo"],
                        help="the PPO loss's token aggregation (default: token_mean)")
    parser.add_argument("--work-dir", default="runs/learning", help="warm starts and runs (default: runs/learning)")
    parser.add_argument("--out-dir", help="results (default: benchmarks/results/learning; --quick: WORK_DIR/results)")
    parser.add_argument("--warm-dir", nargs=2, action="append", metavar=("ENV", "DIR"),
                        help="use the benchmarks.learning.sft output DIR as ENV's warm start instead of training one "
                             "(repeatable; default: train one per env in WORK_DIR)")
    parser.add_argument("--combine", nargs="+", metavar="JSON", help="only merge learning.json files of runs made "
                        "in separate processes into OUT_DIR (table, plot, JSON)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.learning [options]``; a bad option is one line on stderr and exit status 2."""
    from pettingllm_envs.commandline.errors import UsageError

    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    if args.combine:
        merged = combine(args.combine, args.out_dir or "benchmarks/results/learning")
        print(markdown_table(merged))
        return 0
    cfg = quick_config(args.work_dir) if args.quick else ExperimentConfig(work_dir=args.work_dir)
    if args.envs:
        known = {s.env: s for s in ExperimentConfig().envs}
        cfg.envs = [known[e] for e in args.envs if e in known]
    if args.conditions:
        cfg.conditions = tuple(c for c in CONDITIONS if c.name in args.conditions)
    if args.seeds:
        cfg.seeds = tuple(args.seeds)
    if args.lr:
        cfg.lr = args.lr
    if args.aggregation:
        cfg.aggregation = args.aggregation
    if args.budget:
        cfg.envs = [replace(s, budget=args.budget) for s in cfg.envs]
    if args.out_dir:
        cfg.out_dir = args.out_dir
    warm = dict(args.warm_dir or [])
    cfg.envs = [replace(s, warm_dir=warm.get(s.env, s.warm_dir)) for s in cfg.envs]
    results = run_experiment(cfg)
    print(markdown_table(results))
    if args.quick:
        verdict = results["envs"]["plan_path_v0"]["conditions"]["at_grpo_per_role"]["summary"]
        print(f"[learning] quick: mean change {verdict['mean_delta']:+.3f}, seed noise {verdict['noise']:.3f}")
        return 0 if verdict["beyond"] else 1
    return 0
