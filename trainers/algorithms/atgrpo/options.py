"""A trainer config from YAML and the command line: the parser, the loader, and a run's config on resume.

:func:`build_parser` gives a command ``--config FILE.yaml`` plus one ``--field-name VALUE`` per
field of a config class (AT-GRPO's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`,
M-GRPO's config, any :class:`~trainers.algorithms.atgrpo.field_checks.ValidatedConfig`);
:func:`config_from_args` merges defaults < a base < the YAML file < the options and validates
the result (:func:`~trainers.algorithms.atgrpo.field_checks.check_field`), so the command line
and YAML share one set of rules and one kind of error. :func:`load_run_config` does the same
for a command that runs in a run dir: with ``--resume`` the base is the run's saved config and
an option that contradicts it is refused (:mod:`trainers.harness.run_history`).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pettingllm_envs.commandline.errors import ArgumentParser  # one-line errors, plain-text help
from pettingllm_envs.commandline.options import add_field_options
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.field_checks import ValidatedConfig, check_field
from trainers.harness.errors import ConfigError
from trainers.harness.run_history import config_json, given_options, refuse_contradictions, saved_config


def build_parser(prog: str = "pettingllm train", description: str = "Train LLM policies on an env with AT-GRPO.",
                 cls: type = TrainConfig) -> argparse.ArgumentParser:
    """``--config FILE.yaml`` plus one ``--field-name VALUE`` option per field of config class
    ``cls``. Values stay strings here; :func:`config_from_args` coerces and checks them, so the
    command line and YAML share one set of rules and one kind of error (:class:`ConfigError`)."""
    parser = ArgumentParser(prog=prog, description=description, argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="YAML file with config fields; command-line options override it "
                                         "(default: none, the defaults below)")
    add_field_options(parser, cls)
    return parser


ConfigT = typing.TypeVar("ConfigT", bound=ValidatedConfig)


def load_config(argv: Sequence[str] | None = None, *, base: dict[str, Any] | None = None,
                prog: str = "pettingllm train", description: str = "Train LLM policies on an env with AT-GRPO.",
                ) -> TrainConfig:
    """Defaults < ``base`` < ``--config`` YAML < command-line options; validated. ``prog`` and
    ``description`` name the command in ``--help`` and errors."""
    args = vars(build_parser(prog, description).parse_args(list(argv or [])))
    return config_from_args(args, base=base, cls=TrainConfig, prog=prog)


def config_from_args(args: dict[str, Any], *, cls: type[ConfigT], base: dict[str, Any] | None = None,
                     prog: str = "pettingllm train", file_option: str = "--config") -> ConfigT:
    """The validated ``cls`` of :func:`build_parser`'s parsed options ``args`` (``config``: the
    YAML file, given as ``file_option`` on the command line, which the errors name): defaults
    < ``base`` < the YAML file < the options."""
    args = dict(args)
    values: dict[str, Any] = dict(base or {})
    config_file = args.pop("config", None)
    if config_file:
        import yaml

        if not Path(config_file).is_file():
            raise ConfigError(f"{file_option} {config_file}: no such file")
        try:
            loaded = yaml.safe_load(Path(config_file).read_text()) or {}
        except yaml.YAMLError as error:
            reason = " ".join(str(error).split())
            raise ConfigError(f"{file_option} {config_file} is not valid YAML: {reason}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{config_file} must hold a YAML mapping of config fields, got {type(loaded).__name__}")
        unknown = set(loaded) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            import difflib

            close = {k: difflib.get_close_matches(k, [f.name for f in dataclasses.fields(cls)], n=1)
                     for k in sorted(unknown)}
            hints = "".join(f"; {k!r}: did you mean {m[0]!r}?" for k, m in close.items() if m)
            raise ConfigError(f"unknown config keys in {config_file}: {sorted(unknown)}{hints} "
                              f"({prog} --help lists the fields)")
        values.update(loaded)
    values.update(args)
    config = cls(**values)
    config.validate()
    return config


def load_run_config(argv: Sequence[str] | None = None, *, prog: str = "pettingllm train",
                    description: str = "Train LLM policies on an env with AT-GRPO.", cls: type = TrainConfig) -> Any:
    """:func:`load_config` for a command that runs in a run dir: with ``--resume``, defaults < the
    run's ``config.json`` < ``--config`` YAML < options, and an option that contradicts the run
    is refused, naming it (:mod:`trainers.harness.run_history`)."""
    args = vars(build_parser(prog, description, cls).parse_args(list(argv or [])))
    return run_config_from_args(args, prog=prog, cls=cls)


def run_config_from_args(args: dict[str, Any], *, prog: str, cls: type[ConfigT]) -> ConfigT:
    """:func:`load_run_config` on options already parsed (``args``: the fields of ``cls`` a
    :func:`build_parser` parser read, a command's own flags taken out)."""
    given = given_options(args)
    if not check_field("resume", given.get("resume", False), cls):
        return config_from_args(args, cls=cls, prog=prog)
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    run_dir = Path(check_field("run_dir", given.get("run_dir", defaults["run_dir"]), cls))
    saved = saved_config(run_dir)
    known = {f.name for f in dataclasses.fields(cls)}
    config = config_from_args(args, base={name: value for name, value in saved.items() if name in known},
                              cls=cls, prog=prog)
    refuse_contradictions(run_dir, saved, config_json(config), given)
    return config


__all__ = ["build_parser", "config_from_args", "load_config", "load_run_config",
           "run_config_from_args"]
