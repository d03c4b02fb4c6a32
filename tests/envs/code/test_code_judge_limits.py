"""The judge's limits as one value: each bad limit is refused with an error naming it, code_v0's
config fields build it, and a verdict's cache key holds every limit but the parallelism."""

from __future__ import annotations

import dataclasses

import pytest

from pettingllm_envs.code.code_env import CodeConfig, raw_env
from pettingllm_envs.code.judge.limits import DEFAULT_LIMITS, JudgeLimits


@pytest.mark.parametrize(("field", "value", "message"), [
    ("timeout", 0, r"timeout must be a finite number of seconds > 0, got 0"),
    ("timeout", -1.5, r"timeout must be .* got -1.5"),
    ("timeout", float("nan"), r"timeout must be .* got nan"),
    ("timeout", float("inf"), r"timeout must be .* got inf"),
    ("timeout", "5", r"timeout must be .* got '5'"),
    ("timeout", True, r"timeout must be .* got True"),
    ("memory_mb", 8, r"memory_mb must be an integer >= 16, got 8"),
    ("memory_mb", 512.0, r"memory_mb must be an integer >= 16, got 512.0"),
    ("workers", 0, r"workers must be an integer >= 1, got 0"),
    ("workers", True, r"workers must be an integer >= 1, got True"),
    ("shown_chars", 19, r"shown_chars must be an integer >= 20, got 19"),
    ("shown_chars", None, r"shown_chars must be an integer >= 20, got None"),
])
def test_a_bad_limit_is_refused_with_an_error_that_names_it(field, value, message):
    with pytest.raises(ValueError, match=message):
        JudgeLimits(**{field: value})


def test_the_limits_are_frozen_and_default_to_code_v0s_config():
    assert JudgeLimits(timeout=5.0, memory_mb=512, workers=2, shown_chars=400) == DEFAULT_LIMITS
    assert CodeConfig().judge_limits() == DEFAULT_LIMITS
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_LIMITS.timeout = 1.0  # type: ignore[misc]


def test_code_v0s_config_fields_build_the_limits_and_its_errors_name_the_field():
    env = raw_env(test_timeout=2.5, memory_mb=256, workers=1, shown_chars=100)
    assert env.config.judge_limits() == JudgeLimits(timeout=2.5, memory_mb=256, workers=1, shown_chars=100)
    with pytest.raises(ValueError, match=r"test_timeout .*timeout must be .* got -1"):
        raw_env(test_timeout=-1)
    with pytest.raises(ValueError, match=r"workers must be an integer >= 1, got 0"):
        raw_env(workers=0)
    with pytest.raises(ValueError, match=r"cache_size must be >= 0, got -1"):
        raw_env(cache_size=-1)


def test_the_verdict_key_holds_every_limit_a_verdict_depends_on():
    limits = JudgeLimits(timeout=1.0, memory_mb=256, workers=1, shown_chars=100)
    assert dataclasses.replace(limits, workers=4).verdict_key() == limits.verdict_key()
    for change in ({"timeout": 2.0}, {"memory_mb": 512}, {"shown_chars": 200}):
        assert dataclasses.replace(limits, **change).verdict_key() != limits.verdict_key(), change
