"""Benchmark: how an AT-GRPO step's time and memory grow with branching, turns, roles, prompt length and batch.

One variable at a time is swept around a base point (:data:`BASE`), on the tiny and small model
shapes of ``benchmarks/trainer_step.py`` (random weights, byte-level vocabulary). The env is this
module's ``scaling_v0``: ``roles`` roles act in turn for ``max_turns`` turns, each prompt carries
``prompt_chars`` characters of filler (one token a character for the byte-level tokenizer) plus the
actions so far, and a role is paid 1 when its action's first character is a digit. Every completion
has exactly ``max_new_tokens`` tokens (EOS is never sampled) and every sample is trained
(``drop_degenerate`` off), so a step's work is fixed by the swept values alone. A step is
``Trainer.train_step``: the tree rollout (generation, env steps, deep copies and selection) and
one PPO update of all its samples; no evaluation, logging to a temporary run dir.

Samples per step are ``batch x n x roles x turns``. For each curve the script fits the log-log
slope of step time and of samples against the swept value; their difference is the growth of
time per sample (of the step's CPU time with one torch thread on a CPU, which waiting for a core on
a shared machine does not inflate; of wall time otherwise; both are recorded). A curve whose
time per sample grows with an exponent above :data:`TOLERANCE` grows faster than the samples it
produces and is flagged; docs/benchmarks/trainer.md explains each. To tell a defect from the cost of
longer prompts, each curve also fits time per token processed: every distinct prompt's tokens
(each is encoded once for its n completions, in sampling and in scoring) plus the completion tokens.
Memory is the step's own peak: the resident-set high-water mark during the step (reset through
``/proc/self/clear_refs`` before it, after the C heap's free pages went back to the OS) less the
resident set before it; on CUDA, the peak allocated memory above what was allocated before.

Run: ``python -m benchmarks.scaling_curves [--shapes tiny,small] [--repeats 2] [--threads 1]
[--tree-steps 4] [--quick] [--out PATH --plot PATH]``. Results go to
``benchmarks/results/scaling_curves.json`` and ``scaling_curves.png``.
``--quick`` (tiny shape, two values per variable, one timed step) checks the pipeline in well
under a minute; its figures are not for reading.

The run ends with the tree's own share of rollout time (deep copies and branch selection) on
plan_path_v0 with the trainer's CPU defaults, measured as ``benchmarks/trainer_step.py`` does
(:func:`benchmarks.trainer_step.tree_overhead`): the tree at every N is in the curves' ``tree_s``.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import math
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.recording import result_keys, start_recording, write_results
from benchmarks.trainer_memory import current_rss_bytes, peak_rss_bytes, peak_rss_reset
from benchmarks.trainer_step import SHAPES, tree_overhead
from pettingllm_envs.core import ActionResult, TextAECEnv, TextEnvConfig, make_parallel_env, wrap_env

ROOT = Path(__file__).resolve().parent.parent

#: The trainer-step benchmark's random models (a sweep of many points is too long at SmolLM2's size).
TOY_SHAPES = {name: shape.tiny_model for name, shape in SHAPES.items() if shape.tiny_model is not None}
RESULTS = ROOT / "benchmarks" / "results" / "scaling_curves.json"
PLOT = ROOT / "benchmarks" / "results" / "scaling_curves.png"
RESULT_KEYS = result_keys("base", "sweeps", "max_new_tokens", "repeats", "tolerance", "quick", "torch_threads",
                          "device", "shapes", "flagged", "seconds", optional=("tree_overhead",))
ENV_ID = "scaling_v0"
#: The base point every curve passes through: ``batch`` problems a step, ``n`` branches, ...
BASE: dict[str, int] = {"n": 4, "turns": 1, "roles": 2, "prompt_chars": 128, "batch": 2}
#: The values swept per variable (the base value among them).
SWEEPS: dict[str, list[int]] = {"n": [2, 4, 8, 16], "turns": [1, 2, 4], "roles": [1, 2, 4],
                                "prompt_chars": [128, 512, 2048], "batch": [1, 2, 4, 8]}
QUICK_SWEEPS: dict[str, list[int]] = {name: values[:2] for name, values in SWEEPS.items()}
#: Log-log slope of time per sample above which a curve is flagged: above 0, a margin for timing
#: noise on a shared machine.
TOLERANCE = 0.15
MAX_NEW_TOKENS = 16


@dataclass
class ScalingConfig(TextEnvConfig):
    """The scaling env's knobs (``max_turns`` is TextEnvConfig's)."""

    roles: int = 2
    prompt_chars: int = 128
    max_turns: int = 1
    targets: str = "0123456789"


class raw_env(TextAECEnv[int]):
    """``roles`` roles answering in turn; a role is paid 1 when its first character is in ``targets``."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "name": ENV_ID,
                                          "is_parallelizable": False}
    config_class = ScalingConfig
    config: ScalingConfig
    shared_attributes = TextAECEnv.shared_attributes | {"roles"}

    def __init__(self, config: ScalingConfig | None = None, **overrides: Any) -> None:
        count = overrides.get("roles", config.roles if config is not None else ScalingConfig.roles)
        self.roles = tuple(f"role{i}" for i in range(int(count)))  # read by TextAECEnv.__init__
        super().__init__(config, **overrides)

    def load_instance(self, index: int, split: str) -> int:
        return index

    def start_episode(self, instance: int) -> None:
        self.filler = ("context " * (self.config.prompt_chars // 8 + 1))[:self.config.prompt_chars]

    def apply_action(self, agent: str, text: str) -> ActionResult:
        return ActionResult(1.0 if text[:1] and text[0] in self.config.targets else 0.0, parsed=text[:1])

    def global_reward(self) -> float:
        return 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return False

    def is_done(self) -> bool:
        return False

    def role_instructions(self, agent: str) -> str:
        return f"You are {agent}. Answer with a digit."

    def task_view(self, agent: str) -> str:
        lines = [f"Problem {self.index}. Turn {self.turn}.", self.filler]
        return "\n".join(lines + [f"turn {r.turn} {r.agent} said: {r.text}" for r in self.history])

    def render_state(self) -> str:
        return self.task_view(self.agent_selection)


def env(**config: Any) -> TextAECEnv:
    return wrap_env(raw_env(**config))


def parallel_env(**config: Any) -> Any:
    return make_parallel_env(env(**config))


@contextmanager
def registered() -> Iterator[None]:
    """``scaling_v0`` in the env registry for the length of the sweep only (the registry-wide tests
    must not meet it)."""
    from pettingllm_envs.registry import ENV_MODULES, register

    register(ENV_ID, "benchmarks.scaling_curves")
    try:
        yield
    finally:
        ENV_MODULES.pop(ENV_ID, None)


def measure_point(model_dir: Path, run_dir: Path, point: dict[str, int], repeats: int, device: str) -> dict[str, Any]:
    """``repeats`` timed steps (after one warm-up) at ``point``: medians of time, the largest memory."""
    import torch

    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    samples = point["batch"] * point["n"] * point["roles"] * point["turns"]
    config = TrainConfig.from_flat(env=ENV_ID, model=str(model_dir), run_dir=str(run_dir), device=device,
                                   env_kwargs={"roles": point["roles"], "max_turns": point["turns"],
                                               "prompt_chars": point["prompt_chars"]},
                                   problems_per_step=point["batch"], n_samples=point["n"],
                                   max_new_tokens=MAX_NEW_TOKENS, micro_batch_size=min(samples, 64),
                                   drop_degenerate=False, steps=repeats + 1, eval_every=0,
                                   checkpoint_every=0, progress=False, tensorboard=False, lr=1e-6)
    trainer = Trainer(config)
    trainer.policies.eos_ids = []  # every completion has max_new_tokens tokens: the work is fixed by the point
    rollouts: list[Any] = []
    rollout = trainer.rollout

    def recorded_rollout(step: int) -> Any:  # the step's samples, for their prompt lengths
        rollouts.append(rollout(step))
        return rollouts[-1]

    trainer.rollout = recorded_rollout
    cuda = torch.cuda.is_available() and device.startswith("cuda")
    steps = []
    for _ in range(repeats + 1):
        release_free_memory()
        before = current_rss_bytes()
        peak_rss_reset()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            allocated = torch.cuda.memory_allocated()
        cpu = time.process_time()
        metrics = trainer.train_step()
        metrics["time/cpu"] = time.process_time() - cpu
        peak = (torch.cuda.max_memory_allocated() - allocated) if cuda else max(peak_rss_bytes() - before, 0)
        assert metrics["samples"] == samples and metrics["samples/trained"] == samples, metrics
        steps.append({**metrics, "peak_mb": peak / 2**20})
    timed = steps[1:]
    samples_of_step = rollouts[-1].samples
    prompts = {(s.problem, s.agent, s.turn): len(s.completion.prompt_ids) for s in samples_of_step}
    median = {key: statistics.median(s[f"time/{key}"] for s in timed)
              for key in ("step", "cpu", "generate", "env", "tree", "update")}
    return {**point, "samples": samples, "tokens": int(timed[0]["tokens"]),
            "prompt_tokens_per_sample": statistics.fmean(len(s.completion.prompt_ids) for s in samples_of_step),
            "distinct_prompt_tokens": sum(prompts.values()),
            "step_s": median["step"], "step_cpu_s": median["cpu"], "generate_s": median["generate"],
            "env_s": median["env"],
            "tree_s": median["tree"], "update_s": median["update"], "s_per_sample": median["step"] / samples,
            "cpu_s_per_sample": median["cpu"] / samples,
            "tree_share_of_rollout": median["tree"] / (median["generate"] + median["env"]),
            "peak_mb": max(s["peak_mb"] for s in timed), "memory": "cuda_allocated" if cuda else "rss"}


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc's ``malloc_trim``), so the next step's
    temporaries show in the resident set instead of reusing pages an earlier step left behind."""
    libc = ctypes.util.find_library("c")
    if libc and hasattr(ctypes.CDLL(libc), "malloc_trim"):
        ctypes.CDLL(libc).malloc_trim(0)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x): the exponent of a power law through the points."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def fit(points: list[dict[str, Any]], variable: str, basis: str) -> dict[str, Any]:
    """The growth of a curve: exponents in ``variable`` of step time (wall and CPU), samples, time per
    sample and memory; flagged when the time per sample of ``basis`` (``step_s`` or ``step_cpu_s``)
    grows with an exponent above :data:`TOLERANCE`."""
    xs = [p[variable] for p in points]
    samples = slope(xs, [p["samples"] for p in points])
    wall, cpu = slope(xs, [p["step_s"] for p in points]), slope(xs, [p["step_cpu_s"] for p in points])
    per_sample = (cpu if basis == "step_cpu_s" else wall) - samples
    tokens = slope(xs, [p["distinct_prompt_tokens"] + p["tokens"] for p in points])
    return {"time_per_token_exponent": (cpu if basis == "step_cpu_s" else wall) - tokens,
            "step_time_exponent": wall, "step_cpu_exponent": cpu, "samples_exponent": samples,
            "time_per_sample_exponent": per_sample, "basis": basis,
            "peak_memory_exponent": slope(xs, [max(p["peak_mb"], 1e-3) for p in points]),
            "flagged": per_sample > TOLERANCE}


def plot(results: dict[str, Any], out: Path) -> None:
    """Two rows of panels, one column per variable: seconds per sample (of the fitted time: CPU or wall),
    and the step's peak memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variables = list(results["sweeps"])
    fig, axes = plt.subplots(2, len(variables), figsize=(4 * len(variables), 7), constrained_layout=True,
                             squeeze=False)
    for column, variable in enumerate(variables):
        for shape, curves in results["shapes"].items():
            points = curves[variable]["points"]
            xs = [p[variable] for p in points]
            fit = curves[variable]["fit"]
            key = "cpu_s_per_sample" if fit["basis"] == "step_cpu_s" else "s_per_sample"
            flag = " (flagged)" if fit["flagged"] else ""
            axes[0][column].plot(xs, [p[key] for p in points], marker="o", label=f"{shape}{flag}")
            axes[1][column].plot(xs, [p["peak_mb"] for p in points], marker="s", label=shape)
        basis = "CPU" if curves[variable]["fit"]["basis"] == "step_cpu_s" else "wall"
        for row, label in enumerate((f"step {basis} s per sample", "step's peak memory (MB)")):
            ax = axes[row][column]
            ax.set_xscale("log", base=2)
            ax.set_xlabel(variable)
            ax.set_ylabel(label)
            ax.legend(fontsize="small")
        axes[0][column].set_yscale("log")
    fig.suptitle("AT-GRPO step: time per sample and memory, one variable at a time around "
                 + ", ".join(f"{k}={v}" for k, v in results["base"].items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling_curves", description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="tiny,small", help=f"comma-separated, from {sorted(TOY_SHAPES)}")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps per point, after one warm-up")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shape, two values per variable, one timed step")
    parser.add_argument("--tree-steps", type=int, default=4,
                        help="steps of trainer_step.py's tree-overhead measurement (plan_path_v0, the trainer's "
                             "CPU defaults); 0 skips it (--quick does)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    args = parser.parse_args(argv)
    recording = start_recording()
    import torch

    from trainers.models.tiny_model import write_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    shapes = ["tiny"] if args.quick else args.shapes.split(",")
    sweeps = QUICK_SWEEPS if args.quick else SWEEPS
    repeats = 1 if args.quick else args.repeats
    # One torch thread on a CPU: the step's CPU time is its compute, while its wall time on a shared
    # machine also counts waiting for a core; an accelerator's work is not the process's CPU time.
    basis = "step_cpu_s" if args.device == "cpu" and args.threads == 1 else "step_s"
    started = time.perf_counter()
    results: dict[str, Any] = {"base": BASE, "sweeps": sweeps, "max_new_tokens": MAX_NEW_TOKENS, "repeats": repeats,
                               "tolerance": TOLERANCE, "quick": args.quick, "torch_threads": args.threads,
                               "device": args.device, "shapes": {}}
    try:
        with tempfile.TemporaryDirectory() as tmp, registered():
            for shape in shapes:
                model_dir = write_tiny_model(Path(tmp) / shape, **TOY_SHAPES[shape])
                measured: dict[tuple[int, ...], dict[str, Any]] = {}  # the base point is measured once per shape
                results["shapes"][shape] = {}
                for variable, values in sweeps.items():
                    points = []
                    for value in values:
                        point = {**BASE, variable: value}
                        key = tuple(point.values())
                        if key not in measured:
                            run_dir = Path(tmp) / f"{shape}-{len(measured)}"
                            measured[key] = measure_point(model_dir, run_dir, point, repeats, args.device)
                            print(json.dumps({"shape": shape, **measured[key]}), flush=True)
                        points.append(measured[key])
                    results["shapes"][shape][variable] = {"points": points, "fit": fit(points, variable, basis)}
        if args.tree_steps and not args.quick:
            results["tree_overhead"] = tree_overhead(args.tree_steps)
        results["flagged"] = [f"{shape}/{variable}" for shape, curves in results["shapes"].items()
                              for variable, curve in curves.items() if curve["fit"]["flagged"]]
        results["seconds"] = time.perf_counter() - started
        results = write_results(args.out, results, recording)  # the machine record with the run's thread count
    finally:
        torch.set_num_threads(threads)
    plot(results, args.plot)
    print(f"wrote {args.out} and {args.plot}; flagged: {results['flagged'] or 'none'}")
    return results


if __name__ == "__main__":
    main()
