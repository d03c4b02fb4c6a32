"""Checks of what a user typed, before any work starts; each raises a one-line :class:`UsageError`.

Shared by every command that takes an env, env config or a model (``run``, ``play``,
``bench``, and the trainer commands, which import this module when they run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import typing
from pathlib import Path
from typing import Any

from pettingllm_envs.commandline.errors import UsageError, did_you_mean
from pettingllm_envs.extras import extra_hint
from pettingllm_envs.registry import env_module, list_envs, make, missing_optional_envs

#: What a Hugging Face hub id looks like (``namespace/name``); anything else is a local path.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

ENV_KWARGS_HELP = ("env config as a JSON object, e.g. '{\"max_turns\": 2}' (YAML flow style '{max_turns: 2}' "
                   "also works when PyYAML is installed); fields: each env module's docstring")


def check_env_id(env_id: str) -> None:
    """``env_id`` is registered."""
    known = list_envs()
    missing = missing_optional_envs()
    if env_id in missing:
        raise UsageError(f"{env_id} is not installed: it needs {extra_hint(missing[env_id])}")
    if env_id not in known:
        raise UsageError(f"unknown env {env_id!r}{did_you_mean(env_id, known)} (known: {', '.join(known)})")


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """``--env-kwargs`` text as a mapping: JSON, or a YAML flow mapping when PyYAML is installed."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as json_error:
        try:
            import yaml
        except ImportError:
            raise UsageError(f"--env-kwargs {text!r} is not a JSON object ({json_error.msg}); "
                             'example: \'{"max_turns": 2}\'') from None
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise UsageError(f"--env-kwargs {text!r} is neither JSON nor YAML; "
                             'example: \'{"max_turns": 2}\'') from None
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"--env-kwargs must be a mapping of field names to values, got {text!r}; "
                         'example: \'{"max_turns": 2}\'')
    return value


def _type_matches(hint: Any, value: Any) -> bool:
    """Whether ``value`` fits a simple field type (int, float, str, bool); other types are not checked."""
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return True


def check_env_config(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """``env_id`` is registered and ``env_kwargs`` names only fields of its config, with values of
    the right type that pass the config's own ``validate`` and with which the env can be built
    (its dataset file exists and parses)."""
    check_env_id(env_id)
    config_class = getattr(getattr(env_module(env_id), "raw_env", None), "config_class", None)
    build_config: Any = config_class  # the env's own config class: it validates itself
    if config_class is None or not dataclasses.is_dataclass(config_class):
        _check_builds(env_id, env_kwargs)  # an env registered from outside: its constructor checks its config
        return
    fields = {f.name for f in dataclasses.fields(config_class)}
    hints = typing.get_type_hints(config_class)
    for key, value in env_kwargs.items():
        if key not in fields:
            raise UsageError(f"{env_id} has no config field {key!r}{did_you_mean(key, fields)} "
                             f"(fields: {', '.join(sorted(fields))})")
        if not _type_matches(hints.get(key), value):
            raise UsageError(f"{env_id} config field {key!r} must be {hints[key].__name__}, got {value!r}")
    try:
        build_config(**env_kwargs).validate()
    except (TypeError, ValueError) as error:
        raise UsageError(f"{env_id} config: {error}") from error
    # Constructing the env loads its data: a dataset path with a typo fails here, as one line.
    _check_builds(env_id, env_kwargs)


def _check_builds(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """``make(env_id, **env_kwargs)`` works; what the constructor refuses is one line."""
    try:
        make(env_id, **env_kwargs).close()
    except (OSError, TypeError, ValueError) as error:
        raise UsageError(f"{env_id} config: {' '.join(str(error).split())}") from error


def check_model(model: str, option: str = "--model") -> None:
    """``model`` is a local Hugging Face model folder (with ``config.json``) or looks like a hub id
    (``namespace/name``); a path that does not exist is named as such (transformers would blame
    the hub's repo-id format instead)."""
    if not model:
        raise UsageError(f"{option} is required: a local model folder (pettingllm tiny-model DIR writes one) "
                         "or a Hugging Face hub id namespace/name")
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"{option} {model}: the folder has no config.json, so it is not a Hugging Face model "
                             "folder (pettingllm tiny-model DIR writes one)")
        return
    if path.exists():
        raise UsageError(f"{option} {model} is a file; give the model's folder (the one with config.json)")
    if HUB_ID.match(model) and not os.environ.get("HF_HUB_OFFLINE"):
        return  # a hub id: transformers resolves it (and reports a missing repo itself)
    raise UsageError(f"{option} {model}: the folder does not exist (pettingllm tiny-model {model} writes a tiny "
                     "offline model there)")


def check_at_least(option: str, value: int, minimum: int) -> None:
    """``value`` of ``option`` is at least ``minimum``."""
    if value < minimum:
        raise UsageError(f"{option} must be >= {minimum}, got {value}")
