"""The vLLM generation backend.

The engine tests run where vLLM and a CUDA GPU are present and skip elsewhere. Everything the
trainer decides for the engine is tested everywhere without vLLM: per-request seeds (distinct
across prompts, branches, calls and steps, checkpointed), the request layout and stop ids, the
directory the engine loads on resume (never an adapter-only one), the merged LoRA weights it is
sent, and the truncated importance-sampling correction in the update.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.generation.vllm_backend import (  # noqa: E402
    VLLMGenerator,
    _merged_state,
    engine_init_path,
    needs_initial_sync,
    sampling_kwargs,
    sampling_requests,
    vllm_available,
)
from trainers.maths.seeding import SEED_BITS, RequestSeeds, derive_seed  # noqa: E402

needs_vllm = pytest.mark.skipif(not vllm_available(), reason="needs `pip install vllm` and a CUDA GPU")
TOY = "toy_bytes_v0"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from trainers.models.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=128)


def toy_config(model, run_dir, **overrides) -> TrainConfig:
    half = "".join(chr(c) for c in range(128))
    values = {"env": TOY, "model": str(model), "run_dir": str(run_dir), "max_new_tokens": 2, "problems_per_step": 2,
              "n_samples": 4, "lr": 5e-2, "progress": False, "tensorboard": False, "eval_every": 0,
              "env_kwargs": {"targets": {"first": half, "second": half}}}
    values.update(overrides)
    return TrainConfig(**values)


# ------------------------------------------------------------------ seeds
def test_request_seeds_differ_across_prompts_branches_calls_steps_and_streams():
    """With one seed per call (before), branch i of every problem shared a random stream; now
    every (stream, step, call, prompt, sample) has its own seed."""
    seeds = RequestSeeds(7)
    drawn = []
    for stream, step in (("train", 0), ("train", 1), ("eval", 1)):
        seeds.begin(stream, step)
        for _ in range(3):  # calls within the step (agents, turns)
            drawn.append(seeds.next_call(prompts=4, n=5))
    flat = [s for call in drawn for s in call]
    assert len(flat) == 3 * 3 * 4 * 5 and len(set(flat)) == len(flat)
    assert all(0 <= s < 2**SEED_BITS for s in flat)
    again = RequestSeeds(7)
    again.begin("train", 1)
    assert again.next_call(4, 5) == drawn[3]  # a pure function of the position: resume derives the same
    other = RequestSeeds(8)
    other.begin("train", 0)
    assert not set(other.next_call(4, 5)) & set(flat)
    assert derive_seed(1, "a") == derive_seed(1, "a") != derive_seed(1, "b")


def test_the_seed_state_is_checkpointed_and_restored(toy, tiny, tmp_path):
    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, checkpoint_every=1))
    trainer.train()
    trainer.request_seeds.next_call(2, 4)  # mid-step position: after step 0's two agent calls (toy: 2 roles), call 3
    trainer.save_checkpoint()
    state = json.loads((trainer.latest_checkpoint() / "state.json").read_text())["request_seeds"]
    assert state == {"base_seed": 0, "stream": "train", "step": 0, "call": 3}
    resumed = Trainer(toy_config(tiny, tmp_path, steps=2, resume=True))
    assert resumed.request_seeds.state_dict() == trainer.request_seeds.state_dict()
    assert resumed.request_seeds.next_call(2, 4) == trainer.request_seeds.next_call(2, 4)


# --------------------------------------------------------------- requests
def test_one_request_per_completion_with_its_own_seed_and_the_stop_ids():
    requests = sampling_requests([[1, 2], [3]], 2, [10, 11, 12, 13])
    assert requests == [([1, 2], 10), ([1, 2], 11), ([3], 12), ([3], 13)]  # prompt-major, the protocol's order
    assert sampling_requests([[1]], 2, None) == [([1], None), ([1], None)]  # no seeds: the engine's own stream
    with pytest.raises(ValueError, match="3 seeds for 2 prompts x 2"):
        sampling_requests([[1], [2]], 2, [1, 2, 3])
    kwargs = sampling_kwargs(temperature=0.7, max_new_tokens=5, stop_token_ids=[49152, 2, 2], seed=99)
    assert kwargs == {"n": 1, "temperature": 0.7, "max_tokens": 5, "logprobs": 0, "seed": 99,
                      "stop_token_ids": [2, 49152]}


# ------------------------------------------------------------- LoRA resume
@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_the_engine_never_loads_an_adapter_only_directory(toy, tiny, tmp_path, lora):
    """``--lora --resume`` used to point vLLM at ``policies/shared``, which holds only the
    adapter: the engine must load a complete model (the base, then receive the merged weights)."""
    from transformers import AutoModelForCausalLM

    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, checkpoint_every=1, lora=lora))
    trainer.train()
    checkpoint = trainer.latest_checkpoint()
    shared = checkpoint / "policies" / "shared"
    path = engine_init_path(str(tiny), checkpoint, lora=lora)
    if lora:
        assert (shared / "adapter_config.json").exists() and not (shared / "config.json").exists()
        assert path == str(tiny) and needs_initial_sync(checkpoint, lora=True)
    else:
        assert path == str(shared) and not needs_initial_sync(checkpoint, lora=False)
    AutoModelForCausalLM.from_pretrained(path)  # what the engine will load: a complete model
    assert engine_init_path(str(tiny), None, lora=lora) == str(tiny)
    assert not needs_initial_sync(None, lora=lora)


def test_merged_lora_weights_use_the_base_names_and_equal_merge_and_unload(toy, tiny, tmp_path):
    import copy

    from transformers import AutoModelForCausalLM

    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, lora=True, drop_degenerate=False))
    trainer.train()
    with trainer.policies.active("shared") as model:
        merged = dict(_merged_state(model))
        reference = copy.deepcopy(model).merge_and_unload().state_dict()
        probe = torch.tensor([[5, 6, 7]])
        logits_before = model(input_ids=probe).logits
    base_names = set(AutoModelForCausalLM.from_pretrained(tiny).state_dict())
    assert set(merged) == base_names == set(reference)
    assert all(torch.allclose(merged[k], reference[k]) for k in merged)
    lora_changed = any(not torch.equal(merged[k], v) for k, v in
                       AutoModelForCausalLM.from_pretrained(tiny).state_dict().items())
    assert lora_changed  # the adapters were trained, so merging changed some weights
    with trainer.policies.active("shared") as model:  # and the PEFT model is unmerged again
        assert torch.equal(model(input_ids=probe).logits, logits_before)


# ------------------------------------------------------- truncated IS in the update
def test_truncated_is_metrics_in_a_real_update(toy, tiny, tmp_path):
    """Forced on with the transformers backend, where the sampler *is* the scorer: every weight
    is 1 up to float rounding (KV-cache vs full forward), none is truncated; the update runs."""
    from trainers.algorithms.atgrpo.train import Trainer

    history = Trainer(toy_config(tiny, tmp_path, steps=2, importance_sampling="truncated",
                                 drop_degenerate=False)).train()
    for m in history:
        assert m["tis/weight_mean"] == pytest.approx(1.0, abs=1e-4)
        assert m["tis/clip_frac"] == 0.0
    plain = Trainer(toy_config(tiny, tmp_path / "plain", steps=1)).train()
    assert not any(k.startswith("tis/") for k in plain[0])


# ----------------------------------------------------------- the engine itself
@needs_vllm
def test_generates_n_completions_per_prompt_with_logprobs(tiny):
    generator = VLLMGenerator(str(tiny), temperature=1.0, max_new_tokens=8, stop_token_ids=[0], dtype="float32")
    prompts = [[10, 11, 12], [20, 21]]
    generations = generator.generate("shared", prompts, 4, seeds=list(range(8)))
    assert [g.prompt_ids for g in generations] == [prompts[0]] * 4 + [prompts[1]] * 4
    for g in generations:
        assert 1 <= len(g.completion_ids) <= 8 and len(g.logprobs) == len(g.completion_ids)
        assert all(lp <= 0 for lp in g.logprobs)
    again = generator.generate("shared", prompts, 4, seeds=list(range(8)))
    assert [g.completion_ids for g in again] == [g.completion_ids for g in generations]  # seeded per request


@needs_vllm
def test_sync_weights_makes_the_engine_follow_the_trainer_model(tiny):
    from transformers import AutoModelForCausalLM

    def greedy_hf(model, prompt, tokens):
        ids = torch.tensor([prompt], device=model.device)
        out = model.generate(ids, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
        return out[0, len(prompt):].tolist()

    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).cuda()
    generator = VLLMGenerator(str(tiny), temperature=0.0, max_new_tokens=12, stop_token_ids=[0], dtype="float32")
    prompt = [30, 31, 32, 33]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    before = generator.generate("shared", [prompt], 1, seeds=[0])[0].completion_ids
    expected = greedy_hf(model, prompt, 12)
    generator.sync("shared", model)
    after = generator.generate("shared", [prompt], 1, seeds=[0])[0].completion_ids
    assert after[: len(expected)] == expected[: len(after)]
    assert before != after


@needs_vllm
def test_trainer_samples_with_vllm_and_syncs_after_each_update(tiny, tmp_path):
    from trainers.algorithms.atgrpo.train import Trainer

    config = TrainConfig(env="plan_path_v0", model=str(tiny), run_dir=str(tmp_path / "run"), steps=2,
                         problems_per_step=2, n_samples=4, max_new_tokens=16, progress=False, tensorboard=False,
                         checkpoint_every=0, generation_backend="vllm", device="cuda", lr=1e-2,
                         drop_degenerate=False, eval_every=0)
    trainer = Trainer(config)
    synced = []
    original = trainer.generator.load_state
    trainer.generator.load_state = lambda weights: (synced.append(1), original(weights))
    history = trainer.train()
    assert len(history) == 2 and all(m["tokens"] > 0 for m in history)
    assert len(synced) == 2  # one weight sync per update
    assert all("tis/weight_mean" in m for m in history)  # on by default with vLLM
