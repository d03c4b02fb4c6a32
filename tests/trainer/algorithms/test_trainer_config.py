"""Config validation: every field is coerced to its type and checked against its range, from
YAML and from the command line, with one clear error naming the field, the value and the range."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import load_config
from trainers.harness.config_tree import section_types, setting_sections
from trainers.harness.errors import ConfigError
from trainers.harness.fields import _NON_EMPTY, field_types

BOUNDS = TrainConfig.bounds
FIELDS = list(setting_sections(TrainConfig))
FIELD_TYPES = {name: field_types(section_types(TrainConfig)[section])[name]
               for name, section in setting_sections(TrainConfig).items()}


def checked(**values) -> TrainConfig:
    config = TrainConfig.from_flat(**{"model": "m", **values})
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
    assert (config.model.lr, config.run.steps, config.run.resume) == (1e-6, 1000, True)
    assert type(config.model.lr) is float and type(config.run.steps) is int


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
    assert checked(max_grad_norm="inf").update.max_grad_norm == math.inf
    with pytest.raises(ConfigError, match="'lr'"):
        checked(lr="inf")


def test_every_numeric_field_has_a_bound():
    numeric = {name for name in FIELDS if FIELD_TYPES[name] in (int, float)}
    assert numeric == set(BOUNDS), "add the new setting's range to trainers.harness.sections.BOUNDS or the tree's"


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
    default = checked().flat()[name]
    assert checked(**{name: default}).flat()[name] == default
    tp = FIELD_TYPES[name]
    if tp in (int, float, bool):
        assert checked(**{name: str(default)}).flat()[name] == default
    for bad in _bad_values(name):
        values = {name: bad}
        with pytest.raises(ConfigError, match=f"'{name}'|{name} is required"):
            TrainConfig.from_flat(**{"model": "m", **values}).validate()


def test_model_is_required_and_vllm_takes_every_regime():
    with pytest.raises(ConfigError, match="model is required"):
        TrainConfig.from_flat().validate()
    assert checked(generation_backend="vllm", regime="per_role").rollout.regime == "per_role"
    mapped = checked(generation_backend="vllm", policy_map={"a": "x", "b": "y"})
    assert mapped.rollout.policy_map == {"a": "x", "b": "y"}


def test_truncated_importance_sampling_is_on_by_default_with_vllm_only():
    assert checked(generation_backend="vllm").uses_truncated_is()
    assert not checked().uses_truncated_is()
    assert checked(importance_sampling="truncated").uses_truncated_is()
    assert not checked(generation_backend="vllm", importance_sampling="none").uses_truncated_is()


def test_yaml_takes_sections_or_settings_by_name_and_the_command_line_overrides_both(tmp_path):
    path = write(tmp_path, "model: {model: m, lora: true}\nupdate: {eps_high: 0.3}\nlr: 1e-6\nsteps: 3\n")
    config = load_config(["--config", path, "--steps", "4"])
    assert (config.model.model, config.model.lora, config.update.eps_high) == ("m", True, 0.3)
    assert (config.model.lr, config.run.steps) == (1e-6, 4)
    with pytest.raises(ConfigError, match=r"unknown config keys .*\['update.lr'\]; 'update.lr'"):
        load_config(["--config", write(tmp_path, "model: m\nupdate: {lr: 1e-6}\n")])


def test_every_setting_is_declared_in_one_section_only():
    """The command line, YAML and ``from_flat`` name settings without their section, so a name
    must mean one setting; a tree that declared one twice could not even be built."""
    from trainers.algorithms.mgrpo.config import MGRPOConfig

    for tree in (TrainConfig, MGRPOConfig):
        owners = setting_sections(tree)
        declared = [f.name for section in section_types(tree).values() for f in dataclasses.fields(section)]
        assert sorted(declared) == sorted(owners)
    assert setting_sections(TrainConfig)["model"] == "model" and setting_sections(TrainConfig)["lr"] == "model"


def test_help_lists_the_settings_by_section_with_the_trees_defaults(capsys):
    from trainers.algorithms.mgrpo.train import build_parser as mgrpo_parser

    text = mgrpo_parser().format_help()
    assert "run (RunConfig):" in text and "mgrpo (MGRPOSettings):" in text
    options = text[text.index("run (RunConfig):"):]
    steps_help = options[options.index("--steps STEPS"):options.index("--seed SEED")]
    assert "(default: 2)" in " ".join(steps_help.split())  # M-GRPO's default, not RunConfig's 100
