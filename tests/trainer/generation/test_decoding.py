"""The decode step of the in-process sampler (trainers/generation/decoding.py).

:class:`SharedPrefixDecoder` must compute what the model's own forward computes (the reference,
:class:`ModelDecoder`) to float rounding, for every prompt layout the sampler produces: equal
prompts, left-padded ones, a prompt repeated among the requests (rows that do not form equal
groups), one completion per prompt, one-token prompts (whose prefix, all but the last token, is
empty); for the grouped-query tiny Llama and for a Qwen2 with
attention biases; in float32 and under bfloat16 autocast. Models it does not compute exactly are
refused and decode through their forward.
"""

from __future__ import annotations

import pytest
from qwen2_model import qwen2_with_biases

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainers.generation.decoding import ModelDecoder, SharedPrefixDecoder, decoder_for  # noqa: E402
from trainers.generation.transformers_backend import generate  # noqa: E402
from trainers.models.policy_set import PolicySet  # noqa: E402
from trainers.models.shared_prefix import supports_shared_prefix  # noqa: E402
from trainers.models.spec import ModelSpec  # noqa: E402

CPU = torch.device("cpu")
STEPS = 6
LAYOUTS = {
    "equal prompts": ([[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]], 3),
    "left-padded prompts": ([[5, 6, 7, 8, 9, 20, 21], [10, 11, 12], [13, 14, 15, 16]], 4),
    "a repeated prompt": ([[5, 6, 7], [8, 9], [5, 6, 7]], 2),
    "one completion each": ([[5, 6, 7], [8, 9, 10, 11]], 1),
    "a one-token prompt": ([[5], [6, 7, 8, 9]], 2),  # its prefix is empty: all pads
    "only one-token prompts": ([[5], [6]], 3),  # a prefix of width 0
}


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request, tiny_model_dir) -> torch.nn.Module:
    if request.param == "llama":
        return transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return qwen2_with_biases()


def decode_both(model: torch.nn.Module, prompts: list[list[int]], n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The logits of both decoders before each of ``STEPS`` identical tokens, paired."""
    rows = [p for p in prompts for _ in range(n)]
    shared = SharedPrefixDecoder(model, rows, pad_id=0, device=CPU, budget=STEPS + 1)
    reference = ModelDecoder(model, rows, pad_id=0, device=CPU, budget=STEPS + 1)
    pairs = [(shared.first, reference.first)]
    generator = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        token = torch.randint(3, 250, (len(rows),), generator=generator)
        pairs.append((shared.step(token), reference.step(token)))
    return pairs


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shared_prefix_decoding_is_the_models_own_forward(model, layout):
    prompts, n = LAYOUTS[layout]
    assert supports_shared_prefix(model)
    with torch.inference_mode():
        pairs = decode_both(model, prompts, n)
    for shared, reference in pairs:
        assert shared.shape == reference.shape == (len(prompts) * n, model.config.vocab_size)
        torch.testing.assert_close(shared, reference, rtol=0, atol=2e-5)


def test_the_rows_of_a_prompt_share_one_copy_of_its_keys(model):
    """Equal groups keep one copy per distinct prompt; rows that do not form them keep one each."""
    with torch.inference_mode():
        grouped = SharedPrefixDecoder(model, [[5, 6, 7]] * 4 + [[8, 9]] * 4, pad_id=0, device=CPU, budget=4)
        ungrouped = SharedPrefixDecoder(model, [[5, 6, 7], [8, 9], [5, 6, 7]], pad_id=0, device=CPU, budget=4)
    assert (grouped.prompts.groups, grouped.prompts.group_size) == (2, 4)
    assert grouped.prompts.keys[0].shape[0] == 2
    assert (ungrouped.prompts.groups, ungrouped.prompts.group_size) == (3, 1)


def test_an_empty_prompt_is_refused(model):
    with pytest.raises(ValueError, match="at least one token"):
        SharedPrefixDecoder(model, [[5, 6], []], pad_id=0, device=CPU, budget=4)


def test_shared_prefix_decoding_under_bfloat16_autocast(model):
    prompts, n = LAYOUTS["left-padded prompts"]
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        pairs = decode_both(model, prompts, n)
    for shared, reference in pairs:
        torch.testing.assert_close(shared.float(), reference.float(), rtol=0, atol=0.1)


def test_the_sampler_draws_the_same_completions_through_either_decoder(tiny_model_dir):
    spec = ModelSpec(model=str(tiny_model_dir), max_new_tokens=12, device="cpu")
    policies = PolicySet(spec, {"assistant": "shared"})
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12]]
    seeds = list(range(8))
    for temperature in (1.0, 0.0):
        shared = generate(policies, "shared", prompts, 4, seeds=seeds, temperature=temperature)
        reference = generate(policies, "shared", prompts, 4, seeds=seeds, temperature=temperature,
                             shared_prefix=False)
        assert [g.completion_ids for g in shared] == [g.completion_ids for g in reference]
        for a, b in zip(shared, reference, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_models_it_does_not_compute_exactly_decode_through_their_forward(tiny_model_dir):
    peft = pytest.importorskip("peft")
    llama = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    lora = peft.get_peft_model(transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                               peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    sliding = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=259, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=8, max_window_layers=0))
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=259, n_embd=32, n_layer=1, n_head=2))
    hooked = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    hooked.model.layers[0].mlp.register_forward_hook(lambda module, args, out: out * 2)
    assert supports_shared_prefix(llama)
    for refused in (lora, sliding, gpt2, hooked):
        assert not supports_shared_prefix(refused)
        with torch.inference_mode():
            decoder = decoder_for(refused.eval(), [[5, 6, 7]] * 2, pad_id=0, device=CPU, budget=3)
            assert isinstance(decoder, ModelDecoder)
            assert decoder.step(torch.tensor([8, 9])).shape[0] == 2


def test_the_spec_can_switch_the_shared_decoder_off(tiny_model_dir, monkeypatch):
    """``ModelSpec.shared_prefix=False`` samples through the model's own forward."""
    import trainers.generation.transformers_backend as backend

    kinds = []
    choose = backend.decoder_for

    def recorded(*args, **kwargs):
        decoder = choose(*args, **kwargs)
        kinds.append(type(decoder))
        return decoder

    monkeypatch.setattr(backend, "decoder_for", recorded)
    for flag in (True, False):
        spec = ModelSpec(model=str(tiny_model_dir), device="cpu", shared_prefix=flag)
        generate(PolicySet(spec, {"assistant": "shared"}), "shared", [[5, 6, 7]], 2, max_new_tokens=3)
    assert kinds == [SharedPrefixDecoder, ModelDecoder]

