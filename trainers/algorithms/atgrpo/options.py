"""A trainer config from YAML and the command line: the parser, the loader, and a run's config on resume.

:func:`build_parser` gives a command ``--config FILE.yaml`` plus one ``--setting-name VALUE`` per
setting of a config tree (AT-GRPO's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`,
M-GRPO's config: :class:`~trainers.harness.config_tree.ConfigTree`), grouped by section in
``--help``; :func:`config_from_args` applies defaults < a base < the YAML file < the options and
validates the result (:func:`~trainers.harness.fields.check_field`), so the command line and
YAML share one set of rules and one kind of error. :func:`load_run_config` does the same for a
command that runs in a run dir: with ``--resume`` the base is the run's saved config and an
option that contradicts it is refused (:mod:`trainers.harness.run_history`).
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
from trainers.harness.config_tree import ConfigTree, TreeT, flat_json, section_types, unknown_keys
from trainers.harness.errors import ConfigError
from trainers.harness.fields import ValidatedConfig
from trainers.harness.run_history import given_options, refuse_contradictions, saved_settings

AT_GRPO = "Train LLM policies on an env with AT-GRPO."


def build_parser(prog: str = "pettingllm train", description: str = AT_GRPO,
                 cls: type[ConfigTree] = TrainConfig) -> argparse.ArgumentParser:
    """``--config FILE.yaml`` plus one ``--setting-name VALUE`` option per setting of config tree
    ``cls``, in one help group per section. Values stay strings here; :func:`config_from_args`
    coerces and checks them, so the command line and YAML share one set of rules and one kind of
    error (:class:`ConfigError`)."""
    parser = ArgumentParser(prog=prog, description=description, argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="YAML file with settings, by section (model: {lr: 1e-6}) or by name "
                                         "(lr: 1e-6); command-line options override it (default: none, the "
                                         "defaults below)")
    defaults = cls()
    for name, section in section_types(cls).items():
        group = parser.add_argument_group(f"{name} ({section.__name__})", (section.__doc__ or "").split("\n\n")[0])
        add_field_options(group, section, defaults=getattr(defaults, name))
    return parser


ConfigT = typing.TypeVar("ConfigT", bound=ValidatedConfig)


def with_values(config: ConfigT, values: dict[str, Any], source: str) -> ConfigT:
    """``config`` with ``values`` applied: a config tree's settings by name or by section
    (:meth:`~trainers.harness.config_tree.ConfigTree.with_values`), or the fields of a config of
    one level (the distributed layout); an unknown key is one :class:`ConfigError` line."""
    if isinstance(config, ConfigTree):
        return config.with_values(values, source=source)
    known = [f.name for f in dataclasses.fields(config)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise unknown_keys(unknown, known, source)
    return dataclasses.replace(config, **values)


def load_config(argv: Sequence[str] | None = None, *, base: dict[str, Any] | None = None,
                prog: str = "pettingllm train", description: str = AT_GRPO) -> TrainConfig:
    """Defaults < ``base`` < ``--config`` YAML < command-line options; validated. ``prog`` and
    ``description`` name the command in ``--help`` and errors."""
    args = vars(build_parser(prog, description).parse_args(list(argv or [])))
    return config_from_args(args, base=base, cls=TrainConfig, prog=prog)


def read_yaml(config_file: str, file_option: str = "--config") -> dict[str, Any]:
    """The mapping a YAML config file holds; :class:`ConfigError` when it is missing or holds another thing."""
    import yaml

    if not Path(config_file).is_file():
        raise ConfigError(f"{file_option} {config_file}: no such file")
    try:
        loaded = yaml.safe_load(Path(config_file).read_text()) or {}
    except yaml.YAMLError as error:
        reason = " ".join(str(error).split())
        raise ConfigError(f"{file_option} {config_file} is not valid YAML: {reason}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{config_file} must hold a YAML mapping of config settings, got {type(loaded).__name__}")
    return loaded


def config_from_args(args: dict[str, Any], *, cls: type[ConfigT], base: dict[str, Any] | None = None,
                     prog: str = "pettingllm train", file_option: str = "--config") -> ConfigT:
    """The validated ``cls`` of :func:`build_parser`'s parsed options ``args`` (``config``: the
    YAML file, given as ``file_option`` on the command line, which the errors name): defaults
    < ``base`` < the YAML file < the options."""
    args = dict(args)
    config_file = args.pop("config", None)
    config = with_values(cls(), base or {}, "the base config")
    if config_file:
        config = with_values(config, read_yaml(config_file, file_option), f"{config_file} ({prog} --help lists them)")
    config = with_values(config, args, "the options")
    config.validate()
    return config


def load_run_config(argv: Sequence[str] | None = None, *, prog: str = "pettingllm train",
                    description: str = AT_GRPO, cls: type[ConfigTree] = TrainConfig) -> Any:
    """:func:`load_config` for a command that runs in a run dir: with ``--resume``, defaults < the
    run's ``config.json`` < ``--config`` YAML < options, and an option that contradicts the run
    is refused, naming it (:mod:`trainers.harness.run_history`)."""
    args = vars(build_parser(prog, description, cls).parse_args(list(argv or [])))
    return run_config_from_args(args, prog=prog, cls=cls)


def given_settings(cls: type[ConfigTree], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (options and YAML keys) by setting name: a section given as a mapping in the YAML
    file gives each setting in it, so a resume checks each of them against the run."""
    sections = section_types(cls)
    flat: dict[str, Any] = {}
    for key, value in given.items():
        if key in sections and isinstance(value, dict):
            flat.update(value)
        else:
            flat[key] = value
    return flat


def run_config_from_args(args: dict[str, Any], *, prog: str, cls: type[TreeT]) -> TreeT:
    """:func:`load_run_config` on options already parsed (``args``: the settings of ``cls`` a
    :func:`build_parser` parser read, a command's own flags taken out)."""
    given = given_settings(cls, given_options(args))
    if not cls.check_setting("resume", given.get("resume", False)):
        return config_from_args(args, cls=cls, prog=prog)
    run_dir = Path(cls.check_setting("run_dir", given.get("run_dir", cls().flat()["run_dir"])))
    saved = saved_settings(run_dir, cls)
    config = config_from_args(args, base=saved, cls=cls, prog=prog)
    refuse_contradictions(run_dir, saved, flat_json(config), given)
    return config


__all__ = ["build_parser", "config_from_args", "given_settings", "load_config", "load_run_config", "read_yaml",
           "run_config_from_args"]
