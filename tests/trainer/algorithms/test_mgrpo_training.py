"""M-GRPO training with the tiny model on research_v0: two processes through both stores, modes."""

from __future__ import annotations

import json

import pytest
from mgrpo_helpers import NO_REDIS_REASON, REDIS_SERVER, redis_server
from run_configs import small_config

from trainers.algorithms.mgrpo.policy import RolePolicy
from trainers.algorithms.mgrpo.train import run_local, run_two_process

# Small episodes: the main delegates once (prefill), the sub must report at once, then the main is truncated.


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_two_process_run_completes_through_the_store(tiny_model_dir, tmp_path, backend):
    if backend == "redis" and REDIS_SERVER is None:
        pytest.skip(NO_REDIS_REASON)
    if backend == "redis":
        with redis_server(tmp_path) as url:
            history = run_two_process(small_config(tiny_model_dir, tmp_path / "run", store=url))
    else:
        history = run_two_process(small_config(tiny_model_dir, tmp_path / "run"))
    (metrics,) = history
    # A delegation whose random argument is empty is invalid; the rest get one sub action each.
    delegated = round(metrics["delegations/mean"] * 3)
    assert delegated >= 1  # the sub side served requests (deterministic under the seed: 3)
    assert metrics["alignment/slots"] == 3 * 2 and metrics["alignment/padded"] == delegated
    assert metrics["alignment/empty"] == 2 * (3 - delegated)
    assert metrics["samples/sub"] == 2 * delegated  # one sub action per delegation, duplicated once by padding
    assert metrics["samples/main"] == 3 * 2
    # the sub side's update statistics travel through the store into the same vocabulary as run_local's
    assert metrics["samples/trained"] == metrics["samples/trained/main"] + metrics["samples/trained/sub"]
    assert "grad_norm/sub" in metrics and metrics["tokens"] > 3 * 2
    assert json.loads((tmp_path / "run" / "metrics.jsonl").read_text()) == metrics


def test_frozen_sub_keeps_the_sub_weights_and_single_trains_one_policy(tiny_model_dir, tmp_path):
    cfg = small_config(tiny_model_dir, tmp_path / "frozen_sub", mode="frozen_sub")
    (metrics,) = run_local(cfg)
    assert "samples/trained/sub" not in metrics and "grad_norm/sub" not in metrics and "alignment/slots" in metrics
    assert metrics["samples/trained"] == metrics["samples/trained/main"]
    # AT-GRPO's names for the same quantities: every action's own reward, overall and per role
    assert {"reward/mean", "reward/agent/main", "reward/agent/sub", "rollout/success_rate", "kl",
            "clip_frac", "groups/degenerate_frac", "tokens", "time/update"} <= set(metrics)
    (single,) = run_local(small_config(tiny_model_dir, tmp_path / "single", mode="single"))
    assert "samples/shared" in single and "samples/sub" not in single
    assert 3 * 2 <= single["samples/shared"] <= 3 * 3  # main, (sub when the delegation was valid), main


def test_prefill_is_part_of_prompt_and_action(tiny_model_dir, tmp_path):
    policy = RolePolicy(small_config(tiny_model_dir, tmp_path), ["main"], "main", str(tiny_model_dir))
    (action,) = policy.sample("main", [[{"role": "user", "content": "hi"}]])
    assert action.text.startswith("DELEGATE: ")
    prefill = list(b"DELEGATE: ")
    assert [t - 3 for t in action.generation.prompt_ids[-len(prefill):]] == prefill  # ByT5: byte + 3
    assert len(action.generation.logprobs) == len(action.generation.completion_ids)
