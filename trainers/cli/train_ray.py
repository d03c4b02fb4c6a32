"""``pettingllm train-ray``: AT-GRPO training on Ray actors (docs/scaling.md).

Every ``pettingllm train`` option works unchanged (the run's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`);
the layout comes from ``--distributed FILE.yaml`` (a mapping of
:class:`~trainers.distributed.config.DistributedConfig` fields) and one ``--<field>`` option per
field, which override the file::

    pettingllm train-ray --config run.yaml --distributed layout.yaml --rollout-workers 4
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pettingllm_envs.commandline.commands import Command
from pettingllm_envs.extras import extra_hint
from trainers.cli.commands import MODEL_LIBRARIES

PROG = "pettingllm train-ray"
DESCRIPTION = ("Train LLM policies with AT-GRPO on Ray actors: rollout workers, generation engines and "
               "data-parallel training groups (docs/scaling.md).")


def add_distributed_options(parser: argparse.ArgumentParser) -> None:
    """``--distributed FILE`` and one ``--<field>`` option per :class:`DistributedConfig` field
    (strings here; :meth:`DistributedConfig.validate` coerces and checks them)."""
    from pettingllm_envs.commandline.options import add_field_options
    from trainers.distributed.config import DistributedConfig

    group = parser.add_argument_group("layout (DistributedConfig; docs/scaling.md)")
    group.add_argument("--distributed", dest="distributed_file", default=argparse.SUPPRESS, metavar="FILE.yaml",
                       help="YAML file with layout fields; the options below override it (default: none)")
    add_field_options(group, DistributedConfig, dest_prefix="distributed.")


def build_train_ray_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """Every option of ``pettingllm train`` plus the layout's (for ``--help`` and tools)."""
    from trainers.algorithms.atgrpo.options import build_parser

    parser = build_parser(prog, DESCRIPTION)
    add_distributed_options(parser)
    return parser


def parse(argv: Sequence[str]) -> tuple[Any, Any]:
    """The run's validated :class:`~trainers.algorithms.atgrpo.config.TrainConfig` and
    :class:`~trainers.distributed.config.DistributedConfig`."""
    from pettingllm_envs.commandline.errors import ArgumentParser
    from trainers.algorithms.atgrpo.options import load_run_config
    from trainers.distributed.config import distributed_config

    layout_parser = ArgumentParser(prog=PROG, add_help=False)
    add_distributed_options(layout_parser)
    layout, rest = layout_parser.parse_known_args(list(argv))
    if "-h" in rest or "--help" in rest:
        build_train_ray_parser().parse_args(["--help"])
    config = load_run_config(rest, prog=PROG, description=DESCRIPTION)
    overrides = {key.removeprefix("distributed."): value for key, value in vars(layout).items()
                 if key.startswith("distributed.")}
    return config, distributed_config(overrides, file=getattr(layout, "distributed_file", None), prog=PROG)


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train-ray [train options] [--distributed FILE.yaml] [--<layout field> VALUE ...]``."""
    from pettingllm_envs.commandline.checks import check_env_config, check_model

    config, layout = parse(argv or [])
    check_env_config(config.task.env, config.task.env_kwargs)
    check_model(config.model.model)
    from trainers.algorithms.atgrpo.train import run
    from trainers.distributed.trainer import DistributedTrainer

    with DistributedTrainer(config, layout) as trainer:
        return run(trainer, "train-ray", f"rollout_workers={layout.rollout_workers} "
                                         f"engines_per_policy={layout.engines_per_policy} ")


#: The plug-in: entry point ``train-ray`` of the group ``pettingllm.commands`` (pyproject.toml).
TRAIN_RAY = Command(summary="AT-GRPO on Ray actors: rollout workers, generation engines, data-parallel training "
                            "groups (docs/scaling.md)",
                    parser="trainers.cli.train_ray:build_train_ray_parser",
                    main="trainers.cli.train_ray:main", needs=(*MODEL_LIBRARIES, "ray"),
                    needs_hint=extra_hint("train", "ray"),
                    loads_models=True,
                    user_errors=("trainers.harness.errors:ConfigError", "trainers.models.spec:ModelSpecError",
                                 "trainers.distributed.cluster:ActorFailed"))
