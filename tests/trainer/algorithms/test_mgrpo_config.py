"""M-GRPO's configuration on the trainers' config machinery, and the env capability it needs:
every field documented, literal fields and ranges refused with one clear line (YAML and
command line alike), and an env without the Delegation capability refused at the start."""

from __future__ import annotations

import dataclasses
import typing

import pytest

import pettingllm_envs.research.research_env as research_env
from pettingllm_envs import cli
from pettingllm_envs.capabilities import Delegation, MissingCapability
from pettingllm_envs.commandline.options import dataclass_field_docs
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import config_from_args
from trainers.algorithms.mgrpo.config import MODES, MGRPOConfig
from trainers.algorithms.mgrpo.train import build_parser, env_delegation, run_local, run_two_process
from trainers.harness.config_tree import section_types, setting_sections
from trainers.harness.errors import ConfigError
from trainers.harness.fields import field_types
from trainers.learning.settings import UpdateSettings


def setting_types(cls: type) -> dict[str, object]:
    return {name: field_types(section_types(cls)[section])[name] for name, section in setting_sections(cls).items()}


@pytest.mark.parametrize("cls", [TrainConfig, MGRPOConfig])
def test_every_setting_says_what_it_does(cls):
    undocumented = [f"{name}.{f.name}" for name, section in section_types(cls).items()
                    for f in dataclasses.fields(section) if len(dataclass_field_docs(section).get(f.name, "")) < 10]
    assert not undocumented, f"{cls.__name__} settings without a docstring: {undocumented}"


def test_every_numeric_setting_has_a_range():
    numeric = {name for name, tp in setting_types(MGRPOConfig).items() if tp in (int, float)}
    assert numeric == set(MGRPOConfig.bounds)


def test_literal_fields_are_typed_and_modes_defined_once():
    types = setting_types(MGRPOConfig)
    for name in ("mode", "trim", "normalize", "aggregation"):
        assert typing.get_origin(types[name]) is typing.Literal, name
    assert MODES == ("mgrpo", "frozen_sub", "single") == typing.get_args(types["mode"])
    from benchmarks import mgrpo_comparison

    assert mgrpo_comparison.MODES is MODES


@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("mode", "mgrp", "one of mgrpo, frozen_sub, single; did you mean 'mgrpo'?"),
    ("trim", "first", "one of random, last"),
    ("normalize", "std", "one of mean_std, mean"),
    ("aggregation", "sum", "one of token_mean, sequence_mean, dr_grpo"),
    ("rollouts", 1, ">= 2"),  # one rollout per question: every group degenerate
    ("max_grad_norm", 0, "> 0"),
    ("timeout_s", "soon", "a number"),
    ("prefill", {"main": ""}, "non-empty strings"),
])
def test_bad_values_are_refused_with_one_line_naming_the_field(field, value, allowed):
    with pytest.raises(ConfigError) as error:
        MGRPOConfig.from_flat(model="m", **{field: value}).validate()
    message = str(error.value)
    assert "\n" not in message and f"'{field}'" in message and allowed in message, message


def test_yaml_and_command_line_share_the_rules(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("model: m\nmode: frozen_sub\nlr: 1e-6\nmax_grad_norm: 0.5\nppo_epochs: 2\n")
    args = vars(build_parser().parse_args(["--config", str(path), "--eps-high", "0.3"]))
    assert (args.pop("role"), args.pop("overwrite")) == ("both", False)
    cfg = config_from_args(args, cls=MGRPOConfig)
    assert (cfg.mgrpo.mode, cfg.model.lr, cfg.update.max_grad_norm, cfg.update.ppo_epochs,
            cfg.update.eps_high) == ("frozen_sub", 1e-6, 0.5, 2, 0.3)
    path.write_text("model: m\nrolouts: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'rollouts'"):
        config_from_args({"config": str(path)}, cls=MGRPOConfig, prog="pettingllm train-mgrpo")
    args = vars(build_parser().parse_args(["--model", "m", "--trim", "first", "--role", "local"]))
    del args["role"], args["overwrite"]
    with pytest.raises(ConfigError, match=r"'trim': got 'first'.*random, last"):
        config_from_args(args, cls=MGRPOConfig)


def test_the_shared_fields_reach_the_policies_and_the_update():
    cfg = MGRPOConfig.from_flat(model="m", eps_low=0.1, eps_high=0.4, max_grad_norm=0.25, ppo_epochs=3, kl_coef=0.02,
                                micro_batch_size=5, aggregation="dr_grpo", max_new_tokens=9, lr=3e-4, lora=True,
                                lora_r=4)
    spec = cfg.model
    assert (spec.lr, spec.lora, spec.lora_r, spec.max_new_tokens) == (3e-4, True, 4, 9)
    # M-GRPO samples with the trained model itself: truncated IS has nothing to correct
    assert cfg.update_settings() == UpdateSettings(
        eps_low=0.1, eps_high=0.4, aggregation="dr_grpo", ppo_epochs=3, micro_batch_size=5,
        max_grad_norm=0.25, kl_coef=0.02, importance_sampling="none")


def test_a_run_on_an_env_without_delegation_fails_at_its_start(tmp_path):
    """plan_path_v0 has no main agent and sub-agent: the run is refused before any model loads
    (the model path does not even exist), naming the env and the missing capability."""
    cfg = MGRPOConfig.from_flat(model=str(tmp_path / "no-model"), env="plan_path_v0", run_dir=str(tmp_path / "run"))
    for runner in (run_local, run_two_process):
        with pytest.raises(MissingCapability, match=r"plan_path_v0 does not declare delegation.*research_v0"):
            runner(cfg)
    assert not (tmp_path / "run").exists()


def test_the_command_refuses_such_an_env_in_one_line(capsys, tiny_model_dir, tmp_path):
    code = cli.main(["train-mgrpo", "--model", str(tiny_model_dir), "--env", "plan_path_v0", "--role", "local",
                     "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "plan_path_v0 does not declare delegation" in err, err


def test_declared_roles_must_be_the_envs_roles_and_prefill_keys_roles(monkeypatch):
    assert env_delegation(MGRPOConfig.from_flat(model="m")) == research_env.delegation
    monkeypatch.setattr(research_env, "delegation", dataclasses.replace(research_env.delegation, manager="boss"))
    with pytest.raises(ConfigError, match=r"from 'boss' to 'sub', but its roles are \['main', 'sub'\]"):
        env_delegation(MGRPOConfig.from_flat(model="m"))
    monkeypatch.undo()
    with pytest.raises(ConfigError, match=r"'prefill': roles \['planner'\] are not roles of research_v0"):
        env_delegation(MGRPOConfig.from_flat(model="m", prefill={"planner": "x"}))
    assert isinstance(research_env.delegation, Delegation)
