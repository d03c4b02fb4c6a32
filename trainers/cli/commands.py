"""The trainer's ``pettingllm`` commands, declared as plug-ins (:mod:`pettingllm_envs.commandline.commands`).

Each :class:`~pettingllm_envs.commandline.commands.Command` below is one entry point of the group
``pettingllm.commands`` in ``pyproject.toml``; a new command is a :class:`Command` (here or in
its own module) plus one line there. This module is imported on every ``pettingllm`` start,
for the ``--help`` listing, so it imports nothing heavy: each command's ``main`` and
``parser`` are imported only when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from pettingllm_envs.commandline.commands import Command, require
from pettingllm_envs.commandline.errors import ArgumentParser, UsageError
from pettingllm_envs.extras import extra_hint

#: Where the trainer's libraries come from, for the one-line error when one is missing.
TRAIN_EXTRA = extra_hint("train")
#: What the model commands import before they run.
MODEL_LIBRARIES = ("torch", "transformers")


def _model_command(summary: str, parser: str, main: str) -> Command:
    return Command(summary=summary, parser=parser, main=main, needs=MODEL_LIBRARIES, needs_hint=TRAIN_EXTRA,
                   loads_models=True,
                   user_errors=("trainers.harness.errors:ConfigError", "trainers.models.spec:ModelSpecError",
                                "trainers.generation.protocol:BackendUnavailable"))


TRAIN = _model_command("train LLM policies on an env with AT-GRPO (tree rollouts, per-turn groups)",
                       "trainers.algorithms.atgrpo.options:build_parser", "trainers.algorithms.atgrpo.train:main")
TRAIN_VARIANTS = _model_command("train the first role's first answer with K prompt variants per question on one "
                                "shared model (--prompt-variants '[]': the temperature-only baseline)",
                                "trainers.algorithms.variants:build_parser", "trainers.algorithms.variants:main")
TRAIN_MGRPO = _model_command("M-GRPO on research_v0: main and sub-agent as separate policies, optionally in two "
                             "processes or on two machines", "trainers.algorithms.mgrpo.train:build_parser",
                             "trainers.algorithms.mgrpo.train:main")
SELF_CONSISTENCY = _model_command("evaluate a model: single-sample, majority-of-G, greedy and ensemble accuracy",
                                  "trainers.algorithms.self_consistency:build_parser",
                                  "trainers.algorithms.self_consistency:main")
SERVE = Command(summary="serve a model folder with the trainer's sampler behind an OpenAI-compatible API",
                parser="trainers.generation.server:build_parser", main="trainers.generation.server:main",
                needs=(*MODEL_LIBRARIES, "fastapi", "uvicorn"), needs_hint=extra_hint("serve"), loads_models=True,
                user_errors=("trainers.harness.errors:ConfigError", "trainers.models.spec:ModelSpecError"))


# ---------------------------------------------------------------- tiny-model
def tiny_model_parser(prog: str = "pettingllm tiny-model") -> argparse.ArgumentParser:
    """The options of ``pettingllm tiny-model``."""
    parser = ArgumentParser(prog=prog, description="Write a tiny byte-level causal LM with random weights and its "
                            "tokenizer to OUT_DIR, loadable with from_pretrained: for smoke runs and tests, it "
                            "learns nothing useful.")
    parser.add_argument("out_dir", help="folder to write (created)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--tools", action="store_true",
                        help="a tool-calling model for TRL's environment_factory: TRL's Qwen3 chat template (it "
                        "renders tool calls) and a generation config under which every reply is one call "
                        "act(action=<one of --actions>)")
    parser.add_argument("--actions", nargs="+", metavar="ACTION",
                        help="with --tools: the candidate actions (default: the right answers of math_v0's train "
                        "problems 0 and 1 and a wrong one)")
    return parser


def tiny_model_main(argv: Sequence[str]) -> int:
    """``pettingllm tiny-model OUT_DIR [--seed S] [--tools [--actions A ...]]``."""
    args = tiny_model_parser().parse_args(argv)
    if args.actions is not None and not args.tools:
        raise UsageError("--actions are the tool calls of a --tools model: add --tools")
    if args.tools:
        require(["trl"], extra_hint("trl"))
        from trainers.integrations.tiny_tool_model import ACTIONS, write_tiny_tool_model

        write_tiny_tool_model(args.out_dir, actions=args.actions or ACTIONS, seed=args.seed)
        print(f"wrote a tiny tool-calling model to {args.out_dir}: TRL's Qwen3 chat template, every reply one "
              f"call act(action=...) (random weights: for smoke runs and tests)")
        return 0
    from trainers.models.tiny_model import write_tiny_model

    path = write_tiny_model(args.out_dir, seed=args.seed)
    print(f"wrote a tiny byte-level causal LM and tokenizer to {path} (random weights: for smoke runs and tests)")
    return 0


TINY_MODEL = Command(summary="write a tiny offline byte-level causal LM + tokenizer (no download)",
                     parser="trainers.cli.commands:tiny_model_parser", main="trainers.cli.commands:tiny_model_main",
                     needs=MODEL_LIBRARIES, needs_hint=TRAIN_EXTRA, loads_models=True)


# ---------------------------------------------------------------------- plot
def plot_parser(prog: str = "pettingllm plot") -> argparse.ArgumentParser:
    """The options of ``pettingllm plot``."""
    parser = ArgumentParser(prog=prog, description="Draw the curves of RUN_DIR/metrics.jsonl (reward, success, "
                            "degenerate groups, PPO statistics, time) as one PNG.")
    parser.add_argument("run_dir", help="a training run's --run-dir")
    parser.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    return parser


def plot_main(argv: Sequence[str]) -> int:
    """``pettingllm plot RUN_DIR [--out PNG]``: the run dir is checked before matplotlib is needed."""
    args = plot_parser().parse_args(argv)
    metrics = Path(args.run_dir) / "metrics.jsonl"
    if not metrics.is_file():
        what = "does not exist" if not Path(args.run_dir).exists() else "has no metrics.jsonl"
        raise UsageError(f"{args.run_dir} {what}: give the --run-dir of a training run that finished a step")
    require(["matplotlib"], TRAIN_EXTRA)
    from trainers.harness.plot import plot_run

    try:
        paths = plot_run(args.run_dir, out=args.out)
    except ValueError as error:  # an empty metrics file
        raise UsageError(str(error)) from error
    for path in paths:
        print(f"wrote {path}")
    return 0


PLOT = Command(summary="draw a training run's metric curves to PNG", parser="trainers.cli.commands:plot_parser",
               main="trainers.cli.commands:plot_main")

__all__ = ["MODEL_LIBRARIES", "PLOT", "SELF_CONSISTENCY", "SERVE", "TINY_MODEL", "TRAIN", "TRAIN_EXTRA", "TRAIN_MGRPO",
           "TRAIN_VARIANTS"]
