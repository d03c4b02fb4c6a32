"""Scoring through the shared prompt (trainers/models/shared_prefix.py via scoring.token_logprobs).

The update's log-probs and their gradients must be those of the model's own forward on the
prompt cache expanded to every row (the reference path, taken when the shared path is switched
off), to float rounding: for equal and left-padded prompts, a prompt repeated among the rows,
ragged completions, one- and two-token completions, one-token prompts (an empty prefix); for the
grouped-query tiny Llama and a Qwen2 with attention biases. Past the attention-weight budget, and
for models it does not compute exactly, the reference path runs.
"""

from __future__ import annotations

import pytest
from qwen2_model import qwen2_with_biases

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import trainers.models.scoring as scoring  # noqa: E402

CPU = torch.device("cpu")
LAYOUTS = {
    "equal prompts": ([[5, 6, 7, 8]] * 3 + [[9, 10, 11, 12]] * 3,
                      [[20, 21, 22], [23, 24], [25], [26, 27, 28], [29], [30, 31]]),
    "left-padded prompts": ([[5, 6, 7, 8, 9, 10]] * 2 + [[11, 12]] * 2,
                            [[20, 21, 22, 23], [24, 25], [26], [27, 28, 29]]),
    "a repeated prompt": ([[5, 6, 7], [8, 9], [5, 6, 7]], [[20, 21], [22, 23, 24], [25]]),
    "one-token completions": ([[5, 6, 7]] * 2 + [[8, 9]] * 2, [[20], [21], [22], [23]]),
    "two-token completions": ([[5, 6, 7]] * 2 + [[8, 9]] * 2, [[20, 21], [22, 23], [24, 25], [26]]),
    "a one-token prompt": ([[5]] * 2 + [[8, 9, 10]] * 2, [[20, 21], [22], [23, 24, 25], [26]]),
    "only one-token prompts": ([[5]] * 2 + [[8]] * 2, [[20, 21], [22], [23, 24, 25], [26]]),
}


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request, tiny_model_dir) -> torch.nn.Module:
    if request.param == "llama":
        return transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return qwen2_with_biases()


def score(model, prompts, completions, *, shared: bool, monkeypatch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Log-probs and the gradient of their masked sum, through the shared path or the reference."""
    monkeypatch.setattr(scoring, "SHARED_PREFIX_MAX_WEIGHTS", 1 << 24 if shared else 0)
    model.zero_grad(set_to_none=True)
    logp, mask = scoring.token_logprobs(model, prompts, completions, pad_id=0, device=CPU,
                                        compute_dtype=torch.float32, temperature=0.7, chunk_size=0, checkpointed=False)
    (logp * mask * torch.linspace(-1, 1, logp.numel()).view(logp.shape)).sum().backward()
    return logp.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scoring_through_the_shared_prompt_is_the_models_own_forward(model, layout, monkeypatch):
    prompts, completions = LAYOUTS[layout]
    shared_logp, shared_grads = score(model, prompts, completions, shared=True, monkeypatch=monkeypatch)
    reference_logp, reference_grads = score(model, prompts, completions, shared=False, monkeypatch=monkeypatch)
    torch.testing.assert_close(shared_logp, reference_logp, rtol=0, atol=1e-5)
    for shared, reference in zip(shared_grads, reference_grads, strict=True):
        torch.testing.assert_close(shared, reference, rtol=1e-4, atol=1e-6)


def test_the_shared_path_runs_only_within_its_budget_and_on_models_it_computes(tiny_model_dir, monkeypatch):
    """The path taken is observable: the shared one never builds the expanded prompt cache."""
    llama = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=259, n_embd=32, n_layer=1, n_head=2))
    prompts, completions = LAYOUTS["equal prompts"]
    expanded = []
    original = scoring.encode_prompts
    monkeypatch.setattr(scoring, "encode_prompts", lambda *a, **k: expanded.append(1) or original(*a, **k))
    config = llama.config
    needed = len(prompts) * config.num_attention_heads * 3 * (4 + 3) * config.num_hidden_layers
    for model, budget, takes_shared in ((llama, needed, True), (llama, needed - 1, False), (gpt2, 1 << 24, False)):
        monkeypatch.setattr(scoring, "SHARED_PREFIX_MAX_WEIGHTS", budget)
        expanded.clear()
        logp, mask = scoring.token_logprobs(model, prompts, completions, pad_id=0, device=CPU,
                                            compute_dtype=torch.float32, temperature=1.0, chunk_size=0,
                                            checkpointed=False)
        assert logp.shape == mask.shape == (len(prompts), 3)
        assert bool(expanded) is not takes_shared


def test_the_config_can_switch_the_shared_path_off(tiny_model_dir, monkeypatch):
    """``shared_prefix: false`` (TrainConfig, through the model spec) scores through the model's own forward."""
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.models.policy_set import PolicySet

    calls = []
    shared_states = scoring.completion_states
    monkeypatch.setattr(scoring, "completion_states", lambda *args: calls.append(args) or shared_states(*args))
    shared_calls = {}
    for flag in (True, False):
        spec = TrainConfig.from_flat(model=str(tiny_model_dir), device="cpu", shared_prefix=flag).model
        assert spec.shared_prefix is flag
        policies = PolicySet(spec, {"assistant": "shared"})
        before = len(calls)
        with policies.active("shared") as model:
            policies.token_logprobs(model, [[5, 6, 7]] * 2, [[20, 21], [22]])
        shared_calls[flag] = len(calls) - before
    assert shared_calls == {True: 1, False: 0}

