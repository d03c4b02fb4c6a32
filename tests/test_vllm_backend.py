"""The vLLM generation backend: runs where vLLM and a CUDA GPU are present, skips elsewhere."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from trainers.vllm_backend import VLLMGenerator, vllm_available  # noqa: E402

pytestmark = pytest.mark.skipif(not vllm_available(), reason="needs `pip install vllm` and a CUDA GPU")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from trainers.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=128)


def greedy_hf(model, prompt, tokens):
    ids = torch.tensor([prompt], device=model.device)
    out = model.generate(ids, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
    return out[0, len(prompt):].tolist()


def test_generates_n_completions_per_prompt_with_logprobs(tiny):
    generator = VLLMGenerator(str(tiny), temperature=1.0, max_new_tokens=8, dtype="float32")
    prompts = [[10, 11, 12], [20, 21]]
    generations = generator.generate(prompts, n=4)
    assert [g.prompt_ids for g in generations] == [prompts[0]] * 4 + [prompts[1]] * 4
    for g in generations:
        assert 1 <= len(g.completion_ids) <= 8 and len(g.logprobs) == len(g.completion_ids)
        assert all(lp <= 0 for lp in g.logprobs)


def test_sync_weights_makes_the_engine_follow_the_trainer_model(tiny):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny, torch_dtype=torch.float32).cuda()
    generator = VLLMGenerator(str(tiny), temperature=0.0, max_new_tokens=12, dtype="float32")
    prompt = [30, 31, 32, 33]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    before = generator.generate([prompt], n=1)[0].completion_ids
    expected = greedy_hf(model, prompt, 12)
    generator.sync_weights(model)
    after = generator.generate([prompt], n=1)[0].completion_ids
    assert after[: len(expected)] == expected[: len(after)]
    assert before != after


def test_trainer_samples_with_vllm_and_syncs_after_each_update(tiny, tmp_path):
    from trainers.config import TrainConfig
    from trainers.train import Trainer

    config = TrainConfig(env="plan_path_v0", model=str(tiny), run_dir=str(tmp_path / "run"), steps=2,
                         problems_per_step=2, n_samples=4, max_new_tokens=16, progress=False, tensorboard=False,
                         checkpoint_every=0, generation_backend="vllm", device="cuda", lr=1e-2,
                         drop_degenerate=False)
    trainer = Trainer(config)
    synced = []
    original = trainer.generator.load_state
    trainer.generator.load_state = lambda weights: (synced.append(1), original(weights))
    history = trainer.train()
    assert len(history) == 2 and all(m["tokens"] > 0 for m in history)
    assert len(synced) == 2  # one weight sync per update
