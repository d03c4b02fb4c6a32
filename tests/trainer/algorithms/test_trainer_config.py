"""Config validation: every field is coerced to its type and checked against its range, from
YAML and from the command line, with one clear error naming the field, the value and the range."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from trainers.algorithms.atgrpo.config import BOUNDS, TrainConfig
from trainers.algorithms.atgrpo.field_checks import _NON_EMPTY, field_types
from trainers.algorithms.atgrpo.options import load_config
from trainers.harness.errors import ConfigError

FIELDS = [f.name for f in dataclasses.fields(TrainConfig)]
FIELD_TYPES = field_types(TrainConfig)


def checked(**values) -> TrainConfig:
    config = TrainConfig(**{"model": "m", **values})
    config.validate()
    return config


def write(tmp_path, text: str) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return str(path)


def test_yaml_scientific_notation_is_a_float(tmp_path):
    """PyYAML reads ``1e-6`` (no dot) as the *string* '1e-6'; it used to reach AdamW as a string."""
    import yaml

    assert yaml.safe_load("lr: 1e-6") == {"lr": "1e-6"}
    config = load_config(["--config", write(tmp_path, "model: m\nlr: 1e-6\nsteps: 1e3\nresume: yes\n")])
    assert (config.lr, config.steps, config.resume) == (1e-6, 1000, True)
    assert type(config.lr) is float and type(config.steps) is int


@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("max_grad_norm", -1.0, "> 0"),  # clip_grad_norm_ would flip the update into ascent
    ("max_grad_norm", 0, "> 0"),  # ... or zero every update
    ("n_samples", 1, ">= 2"),  # a group of one is degenerate: nothing would ever train
    ("kl_coef", -0.1, ">= 0"),
    ("adv_eps", -1e-3, ">= 0"),
    ("dtype", "float17", "float32, bfloat16, float16"),
    ("lora_r", 0, ">= 1"),
    ("vllm_gpu_memory_utilization", 3.0, "in (0, 1]"),
    ("lr", "1e-6x", "a number"),
    ("steps", 2.5, "an integer"),
    ("steps", True, "an integer"),  # bool is an int in Python; `steps: true` is a mistake
    ("temperature", math.nan, "> 0"),
    ("tis_cap", 0.5, ">= 1"),
    ("device", "gpu", "cuda:<index>"),
])
def test_the_listed_bad_values_are_refused_with_one_clear_line(tmp_path, field, value, allowed):
    with pytest.raises(ConfigError) as error:
        checked(**{field: value})
    message = str(error.value)
    assert "\n" not in message
    assert f"'{field}'" in message and repr(value) in message and allowed in message, message
    assert isinstance(error.value, ValueError)


def test_bad_values_from_the_command_line_and_yaml_give_the_same_error(tmp_path):
    # The number typed on the command line is the number in the message, as from YAML (not '-1' (str)).
    with pytest.raises(ConfigError, match=r"^config field 'max_grad_norm': got -1; allowed: > 0"):
        load_config(["--model", "m", "--max-grad-norm", "-1"])
    with pytest.raises(ConfigError, match=r"^config field 'max_grad_norm': got -1; allowed: > 0"):
        load_config(["--config", write(tmp_path, "model: m\nmax_grad_norm: -1\n")])
    with pytest.raises(ConfigError, match=r"^config field 'steps': got -1; allowed: >= 0$"):
        load_config(["--model", "m", "--steps", "-1"])
    with pytest.raises(ConfigError, match=r"'rollout': got 'bfs'.*tree, independent"):
        load_config(["--model", "m", "--rollout", "bfs"])
    with pytest.raises(ConfigError, match="YAML mapping"):
        load_config(["--config", write(tmp_path, "- model\n- m\n")])


def test_infinity_disables_gradient_clipping_and_is_allowed():
    assert checked(max_grad_norm="inf").max_grad_norm == math.inf
    with pytest.raises(ConfigError, match="'lr'"):
        checked(lr="inf")


def test_every_numeric_field_has_a_bound():
    numeric = {name for name in FIELDS if FIELD_TYPES[name] in (int, float)}
    assert numeric == set(BOUNDS), "add the new field's range to trainers.algorithms.atgrpo.config.BOUNDS"


def _bad_values(name: str) -> list[object]:
    """Values of the wrong type or out of range for field ``name``."""
    tp = FIELD_TYPES[name]
    if typing.get_origin(tp) is typing.Literal:
        return ["nonsense", 3]
    if tp is bool:
        return ["maybe", 2]
    if tp in (int, float):
        bound = BOUNDS[name]
        outside = [bound.low if bound.low_open else bound.low - 1]
        if bound.high != math.inf:
            outside.append(bound.high if bound.high_open else bound.high + 1)
        wrong_type = ["three", None, [1]]
        return [v for v in outside if math.isfinite(v)] + wrong_type + ([1.5] if tp is int else [])
    if tp is str:
        return [3, None] + ([""] if name in _NON_EMPTY else [])  # model's "" has its own test below
    if tp == str | None:
        return [3, ""]
    if typing.get_origin(tp) is dict:
        return ["[1, 2]", 7, {1: "x"}]
    if typing.get_origin(tp) is list:
        return ["{a: 1}", 7, [""]]
    raise AssertionError(f"no bad values for {name}: {tp}")


@pytest.mark.parametrize("name", FIELDS)
def test_every_field_refuses_bad_values_and_coerces_strings(name):
    """A table over all fields: the default passes, its string form (the command line's) is
    coerced back to the same typed value, and every bad value raises a ConfigError naming the field."""
    default = getattr(checked(), name)
    assert getattr(checked(**{name: default}), name) == default
    tp = FIELD_TYPES[name]
    if tp in (int, float, bool):
        assert getattr(checked(**{name: str(default)}), name) == default
    for bad in _bad_values(name):
        values = {name: bad}
        with pytest.raises(ConfigError, match=f"'{name}'|{name} is required"):
            TrainConfig(**{"model": "m", **values}).validate()


def test_model_is_required_and_vllm_takes_every_regime():
    with pytest.raises(ConfigError, match="model is required"):
        TrainConfig().validate()
    assert checked(generation_backend="vllm", regime="per_role").regime == "per_role"
    assert checked(generation_backend="vllm", policy_map={"a": "x", "b": "y"}).policy_map == {"a": "x", "b": "y"}


def test_truncated_importance_sampling_is_on_by_default_with_vllm_only():
    assert checked(generation_backend="vllm").uses_truncated_is()
    assert not checked().uses_truncated_is()
    assert checked(importance_sampling="truncated").uses_truncated_is()
    assert not checked(generation_backend="vllm", importance_sampling="none").uses_truncated_is()
