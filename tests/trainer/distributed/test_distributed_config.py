"""The scale-out layout (trainers/distributed/config.py) and ``pettingllm train-ray``'s options:
every bad value is one line naming the field, refused before any actor starts."""

from __future__ import annotations

import pytest

from pettingllm_envs.cli import main
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.cli.train_ray import parse
from trainers.distributed.config import DistributedConfig, check_layout, distributed_config
from trainers.harness.errors import ConfigError


def test_defaults_are_valid_and_strings_are_coerced():
    config = distributed_config({"rollout_workers": "4", "engine_gpus": "0.5", "call_timeout_s": "30",
                                 "placement": "colocated", "train_workers_per_policy": 2, "engines_per_policy": 2})
    assert (config.rollout_workers, config.engine_gpus, config.call_timeout_s) == (4, 0.5, 30.0)
    assert isinstance(config.rollout_workers, int) and config.torch_backend() == "gloo"
    assert distributed_config({"train_worker_gpus": 1}).torch_backend() == "nccl"
    assert distributed_config(None) == DistributedConfig()


@pytest.mark.parametrize(("values", "message"), [
    ({"rollout_workers": 0}, r"field 'rollout_workers': got 0; allowed: >= 1"),
    ({"rollout_workers": "two"}, r"field 'rollout_workers': got 'two' .*an integer"),
    ({"rollout_workers": True}, r"field 'rollout_workers': got True"),
    ({"engines_per_policy": 1.5}, r"field 'engines_per_policy': got 1.5 .*an integer"),
    ({"call_timeout_s": 0}, r"field 'call_timeout_s': got 0; allowed: > 0"),
    ({"call_timeout_s": "nan"}, r"field 'call_timeout_s': got nan; allowed: > 0 and finite"),
    ({"engine_gpus": -1}, r"field 'engine_gpus': got -1; allowed: >= 0"),
    ({"placement": "mixed"}, r"field 'placement': got 'mixed' .*separate, colocated"),
    ({"address": " "}, r"'address' is empty"),
    ({"placement": "colocated", "engines_per_policy": 2}, r"engines_per_policy \(2\) must be <= "),
    ({"dist_backend": "nccl"}, r"'nccl' needs GPU training workers"),
    ({"rolout_workers": 2}, r"unknown distributed keys \['rolout_workers'\]; did you mean 'rollout_workers'\?"),
])
def test_bad_layouts_are_refused_naming_the_field(values, message):
    with pytest.raises(ConfigError, match=message):
        distributed_config(values)


@pytest.mark.parametrize(("train", "layout", "message"), [
    ({"generation_backend": "openai", "openai_base_url": "http://127.0.0.1:1/v1", "off_policy_generation": True},
     {}, r"'openai' cannot run in engine actors"),
    ({"generation_backend": "vllm"}, {}, r"'vllm' runs on GPUs: set the distributed field engine_gpus > 0"),
    ({"rollout": "independent"}, {}, r"runs tree rollouts"),
])
def test_train_configs_the_actors_cannot_run_are_refused(train, layout, message):
    config = TrainConfig.from_flat(model="m", **train)
    with pytest.raises(ConfigError, match=message):
        check_layout(config, distributed_config(layout))


def test_the_layout_comes_from_a_file_and_options_override_it(tmp_path):
    layout = tmp_path / "layout.yaml"
    layout.write_text("rollout_workers: 3\nengines_per_policy: 2\naddress: auto\n")
    config, dist = parse(["--model", "m", "--steps", "2", "--distributed", str(layout), "--engines-per-policy", "4"])
    assert (config.run.steps, dist.rollout_workers, dist.engines_per_policy, dist.address) == (2, 3, 4, "auto")
    with pytest.raises(ConfigError, match="no such file"):
        parse(["--model", "m", "--distributed", str(tmp_path / "missing.yaml")])
    layout.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a YAML mapping"):
        parse(["--model", "m", "--distributed", str(layout)])
    layout.write_text("rollout_worker: 3\n")
    with pytest.raises(ConfigError, match=r"unknown config keys .*'rollout_worker': did you mean 'rollout_workers'"):
        parse(["--model", "m", "--distributed", str(layout)])


def test_train_ray_reports_a_bad_layout_in_one_line(capsys):
    pytest.importorskip("ray")
    pytest.importorskip("torch")
    assert main(["train-ray", "--model", "m", "--rollout-workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "pettingllm: error: config field 'rollout_workers': got 0; allowed: >= 1"
    assert main(["train-ray", "--model", "m", "--lr", "-1"]) == 2
    assert "config field 'lr'" in capsys.readouterr().err
