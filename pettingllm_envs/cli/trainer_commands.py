"""The commands that need the ``train`` extra: ``train``, ``train-variants``, ``train-mgrpo``,
``self-consistency``, ``tiny-model`` and ``plot``.

Their code lives in ``trainers`` and is imported only when the command runs, so the env
package never imports torch or ``trainers`` on its own (docs/design.md §7). The four
training and evaluation commands parse their options with their own parsers (built from
their config dataclasses): ``pettingllm`` hands every argument after the command name to
them untouched. :func:`delegated_parser` builds one of those parsers, for ``--help`` tests.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pettingllm_envs.cli.errors import UsageError
from pettingllm_envs.cli.output import quiet_model_libraries


@dataclass(frozen=True)
class TrainerCommand:
    """A ``pettingllm`` command implemented in ``trainers``: ``parser`` and ``entry`` are
    ``module:function`` names of ``build_parser(prog) -> ArgumentParser`` and ``main(argv) -> int``."""

    name: str
    summary: str
    parser: str
    entry: str


TRAINER_COMMANDS: tuple[TrainerCommand, ...] = (
    TrainerCommand("train", "train LLM policies on an env with AT-GRPO (tree rollouts, per-turn groups)",
                   "trainers.config:build_parser", "trainers.train:main"),
    TrainerCommand("train-variants", "train the first role's first answer with K prompt variants per question on "
                   "one shared model (--prompt-variants '[]': the temperature-only baseline)",
                   "trainers.variants:build_parser", "trainers.variants:main"),
    TrainerCommand("train-mgrpo", "M-GRPO on research_v0: main and sub-agent as separate policies, optionally "
                   "in two processes or on two machines",
                   "trainers.mgrpo.train:build_parser", "trainers.mgrpo.train:main"),
    TrainerCommand("self-consistency", "evaluate a model: single-sample, majority-of-G, greedy and ensemble accuracy",
                   "trainers.self_consistency:build_parser", "trainers.self_consistency:main"),
)


TRAIN_EXTRA = "pip install 'pettingllm-envs[train]'"
#: What the commands of this module import: torch and transformers for models, matplotlib for plots.
MODEL_LIBRARIES = ("torch", "transformers")


def require(*modules: str) -> None:
    """Import ``modules``; one that is not installed is a one-line usage error naming the extra."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise UsageError(f"this command needs {module}, which comes with the train extra: {TRAIN_EXTRA}") from error


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def delegated_parser(name: str) -> argparse.ArgumentParser:
    """The parser of trainer command ``name`` (imports its module)."""
    command = next(c for c in TRAINER_COMMANDS if c.name == name)
    return _load(command.parser)(prog=f"pettingllm {name}")


def _run_delegated(command: TrainerCommand, args: argparse.Namespace) -> int:
    quiet_model_libraries()
    require(*MODEL_LIBRARIES)
    entry = _load(command.entry)
    from trainers.config import ConfigError

    try:
        return int(entry(args.options) or 0)
    except ConfigError as error:  # a bad config value: already one line naming the field
        raise UsageError(str(error)) from error


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    quiet_model_libraries()
    require(*MODEL_LIBRARIES)
    from trainers.tiny_model import write_tiny_model

    path = write_tiny_model(args.out_dir, seed=args.seed)
    print(f"wrote a tiny byte-level causal LM and tokenizer to {path} (random weights: for smoke runs and tests)")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    metrics = Path(args.run_dir) / "metrics.jsonl"
    if not metrics.is_file():
        what = "does not exist" if not Path(args.run_dir).exists() else "has no metrics.jsonl"
        raise UsageError(f"{args.run_dir} {what}: give the --run-dir of a training run that finished a step")
    require("matplotlib")
    from trainers.plot import plot_run

    try:
        paths = plot_run(args.run_dir, out=args.out)
    except ValueError as error:  # an empty metrics file
        raise UsageError(str(error)) from error
    for path in paths:
        print(f"wrote {path}")
    return 0


def add_trainer_commands(sub: Any) -> None:
    """Add the trainer commands to the ``pettingllm`` subparsers ``sub``."""
    for command in TRAINER_COMMANDS:
        # Every option goes to the command's own parser, imported only when it runs;
        # prefix_chars="+" keeps this parser from reading "--x" options itself.
        p = sub.add_parser(command.name, help=command.summary, add_help=False, prefix_chars="+")
        p.add_argument("options", nargs=argparse.REMAINDER,
                       help=f"options of the command, see pettingllm {command.name} --help")
        p.set_defaults(func=partial(_run_delegated, command))

    p = sub.add_parser("tiny-model", help="write a tiny offline byte-level causal LM + tokenizer (no download)",
                       description="Write a tiny byte-level causal LM with random weights and its tokenizer to "
                                   "OUT_DIR, loadable with from_pretrained: for smoke runs and tests, it learns "
                                   "nothing useful.")
    p.add_argument("out_dir", help="folder to write (created)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.set_defaults(func=_cmd_tiny_model)

    p = sub.add_parser("plot", help="draw a training run's metric curves to PNG",
                       description="Draw the curves of RUN_DIR/metrics.jsonl (reward, success, degenerate groups, "
                                   "PPO statistics, time) as one PNG.")
    p.add_argument("run_dir", help="a training run's --run-dir")
    p.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    p.set_defaults(func=_cmd_plot)


__all__ = ["TRAINER_COMMANDS", "add_trainer_commands", "delegated_parser"]
