"""The policy's fast paths against the plain computation they replace, on the tiny model.

``PolicySet.token_logprobs`` encodes each distinct prompt once and scores the completions
on the expanded KV cache; ``PolicySet.generate`` does the same for sampling. Both must give
what a plain forward over ``prompt + completion`` of each row on its own gives: the same
log-probs and, through the shared prompt, the same gradients.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainers.config import TrainConfig
from trainers.policy import PolicySet


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from trainers.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))


def plain_logprobs(policies: PolicySet, model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """One row, no padding, no cache: log-probs of ``completion`` after ``prompt``."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1]
    logp = F.log_softmax(logits.float() / policies.config.temperature, dim=-1)
    return logp.gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def rows() -> tuple[list[list[int]], list[list[int]]]:
    """Two groups sharing prompts, a prompt of another length, completions of lengths 1 to 5."""
    a, b, c = list(range(3, 20)), list(range(30, 40)), list(range(50, 73))
    prompts = [a, a, a, b, b, c]
    completions = [[5, 6, 7, 8, 9], [10, 11], [12], [13, 14, 15], [16, 17, 18, 19, 20], [21, 22]]
    return prompts, completions


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_shared_prompt_scoring_equals_plain_per_row_scoring(tiny_model_dir, lora):
    config = TrainConfig(model=str(tiny_model_dir), temperature=0.7, lora=lora)
    policies = PolicySet(config, ["first"])
    params = policies.parameters("shared")
    prompts, completions = rows()
    advantages = torch.linspace(-1.0, 1.0, len(prompts))
    with policies.active("shared") as model:
        logp, mask = policies.token_logprobs(model, prompts, completions)
        assert logp.shape == mask.shape == (len(prompts), 5)
        assert mask.sum(dim=1).tolist() == [len(c) for c in completions]
        fast = ((logp * mask).sum(dim=1) * advantages).sum()
        fast_grads = torch.autograd.grad(fast, params)
        expected = [plain_logprobs(policies, model, p, c) for p, c in zip(prompts, completions, strict=True)]
        plain = sum(e.sum() * a for e, a in zip(expected, advantages, strict=True))
        plain_grads = torch.autograd.grad(plain, params)
    for row, e in enumerate(expected):
        assert torch.allclose(logp[row, :len(e)], e, atol=1e-5)
    for fast_grad, plain_grad in zip(fast_grads, plain_grads, strict=True):
        assert torch.allclose(fast_grad, plain_grad, atol=1e-5, rtol=1e-4)


def test_generation_logprobs_match_plain_scoring_and_are_seeded(tiny_model_dir):
    config = TrainConfig(model=str(tiny_model_dir), max_new_tokens=6)
    policies = PolicySet(config, ["first"])
    prompts = [list(range(3, 20)), list(range(30, 40))]  # different lengths: the padded path
    torch.manual_seed(1)
    generations = policies.generate("shared", prompts, 3)
    torch.manual_seed(1)
    again = policies.generate("shared", prompts, 3)
    assert [g.completion_ids for g in generations] == [g.completion_ids for g in again]
    assert [g.prompt_ids for g in generations] == [p for p in prompts for _ in range(3)]
    with torch.no_grad(), policies.active("shared") as model:
        for g in generations:
            expected = plain_logprobs(policies, model, g.prompt_ids, g.completion_ids)
            assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-5)


def test_inverse_cdf_sampling_draws_from_the_distribution():
    from trainers.policy import sample_categorical

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]]).expand(40_000, -1)
    generator_state = torch.get_rng_state()
    torch.manual_seed(0)
    draws = sample_categorical(probs)
    torch.set_rng_state(generator_state)
    counts = torch.bincount(draws, minlength=6).float() / len(draws)
    assert counts[[0, 2, 5]].sum() == 0  # zero-probability tokens, including the last, never come up
    assert torch.allclose(counts, probs[0], atol=0.01)
