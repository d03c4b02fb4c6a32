"""benchmarks/trainer_memory.py: its TRL configuration trains the same update as ours, so the two
configurations' peaks and times compare like for like."""

from __future__ import annotations

import argparse

import torch

from benchmarks import trainer_memory


def test_trl_configuration_takes_the_gradient_of_our_update(tiny_model_dir):
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.models.policy_set import PolicySet

    args = argparse.Namespace(rows=3, prompt_tokens=5, completion_tokens=7)
    trainer, model, inputs = trainer_memory.trl_update(str(tiny_model_dir), args)
    trainer.compute_loss(model, inputs).backward()
    trl_grads = {name: p.grad for name, p in model.named_parameters()}

    config = TrainConfig.from_flat(model=str(tiny_model_dir), device="cpu", logprob_chunk_size=4)
    policies = PolicySet(config.model, config.policy_for_roles(["player"]))
    prompt, completions, advantages = trainer_memory.update_inputs(model.config.vocab_size, args)
    with policies.active("shared") as ours:
        logp, mask = policies.token_logprobs(ours, [prompt] * args.rows, completions)
        trainer_memory.policy_gradient_loss(logp, mask, advantages).backward()
        ours_grads = dict(ours.named_parameters())
    assert trl_grads.keys() == ours_grads.keys()
    for name, grad in trl_grads.items():
        assert torch.allclose(grad, ours_grads[name].grad, atol=1e-6, rtol=1e-4), name
    assert any(float(grad.abs().max()) > 0 for grad in trl_grads.values())
