"""benchmarks/gpu_memory.py, the GPU memory estimate: its arithmetic is right on a hand-computed case,
its Qwen shapes are the real models' (parameter counts as transformers and PEFT build them), and the
memory table of recipes/gpu/README.md is its output."""

from __future__ import annotations

import pytest

from benchmarks.gpu_memory import (
    MARKERS,
    QWEN3_1_7B,
    QWEN25_1_5B,
    RECIPE_DIR,
    RECIPE_ROWS,
    ModelShape,
    engine_memory,
    table,
    training_memory,
)
from trainers.algorithms.atgrpo.config import TrainConfig

#: h=4, i=8, 2 layers, 2 heads of 2 (q: 4), 1 KV head (kv: 2), vocabulary 10, tied, q/k/v biases.
HAND = ModelShape(name="hand", hidden_size=4, intermediate_size=8, num_layers=2, num_heads=2, num_kv_heads=1,
                  head_dim=2, vocab_size=10, tie_word_embeddings=True, qkv_bias=True, qk_norm=False,
                  model_type="qwen2", source="by hand")


def test_arithmetic_on_a_hand_computed_case():
    # layer: q 4x4 + k 4x2 + v 4x2 + o 4x4 + gate/up 4x8 each + down 8x4 = 144, biases 4+2+2, norms 2x4
    assert HAND.layer_parameters() == 160
    assert HAND.root_parameters() == 10 * 4 + 4 and HAND.parameters() == 2 * 160 + 44 == 364
    assert HAND.lora_parameters(1) == 2 * (8 + 6 + 6 + 8 + 12 + 12 + 12) == 128
    assert HAND.kv_bytes_per_token() == 2 * 2 * 1 * 2 * 2  # K and V, 2 layers, 1 head of 2, bf16
    # per token and layer: norms 16h + casts 4h + attention 2(3q + 3kv) + MLP 8i = 64 + 16 + 36 + 64
    assert HAND.activation_bytes_per_token_layer() == 180
    config = TrainConfig.from_flat(micro_batch_size=1, max_prompt_tokens=3, max_new_tokens=2,
                                   gradient_checkpointing=True, problems_per_step=3, n_samples=2,
                                   vllm_gpu_memory_utilization=0.5)
    assert training_memory(HAND, config, 2) == {
        "weights": 364 * 4 // 2, "gradients": 364 * 4 // 2, "adamw": 364 * 8 // 2, "compute_copies": 364 * 2,
        "gathered": 44 * 4 * 2 + 2 * 160 * 4, "frozen_base": 0,
        "activations": 2 * 5 * 4 * 4 + 2 * 180 * 5,  # every layer's float32 input + two layers, 5 tokens
        "logits": 2 * 10 * (2 + 4 + 4)}  # 2 completion tokens: bf16 logits, float32 copy, exponentials
    lora = config.replace(lora=True, lora_r=1, gradient_checkpointing=False)
    assert training_memory(HAND, lora, 1) == {
        "weights": 128 * 4, "gradients": 128 * 4, "adamw": 128 * 8, "compute_copies": 128 * 2, "gathered": 0,
        "frozen_base": 364 * 2, "activations": 3 * (180 + 7 * 2) * 5, "logits": 200}
    # 2 engines share 3 prompts: 2 prompts each of 3 tokens + 2 completions of 2, 16 bytes a token
    assert engine_memory(HAND, config, 2, 0, 10_000) == {"weights": 728, "kv_budget": 5000 - 728, "kv_needed": 224,
                                                        "total": 5000}
    # a fixed KV cache instead of a share of the GPU; two adapters of r=1 add 2 x 128 bf16 parameters;
    # one engine takes all 3 prompts
    fixed = lora.replace(vllm_kv_cache_gib=0.5)
    assert engine_memory(HAND, fixed, 1, 2, 10_000) == {"weights": 728 + 512, "kv_budget": 2**29,
                                                        "kv_needed": 3 * (3 + 2 * 2) * 16,
                                                        "total": 728 + 512 + 2**29}


@pytest.mark.parametrize("shape", [QWEN25_1_5B, QWEN3_1_7B], ids=lambda s: s.name)
def test_shapes_are_the_real_models(shape):
    """Counted on the model transformers builds from the shape's config (meta device: no memory) and
    on PEFT's all-linear adapters; the model cards say 1.54B (1.31B without embeddings) and 1.7B (1.4B)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**shape.transformers_config()))
    assert sum(p.numel() for p in model.parameters()) == shape.parameters()
    card = {QWEN25_1_5B.name: (1.54, 1.31), QWEN3_1_7B.name: (1.72, 1.41)}[shape.name]
    non_embedding = shape.parameters() - shape.vocab_size * shape.hidden_size
    assert (round(shape.parameters() / 1e9, 2), round(non_embedding / 1e9, 2)) == card
    adapters = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    assert sum(p.numel() for p in adapters.parameters() if p.requires_grad) == shape.lora_parameters(16)


def test_the_recipe_table_is_the_estimate():
    readme = (RECIPE_DIR / "README.md").read_text()
    committed = readme.split(MARKERS[0])[1].split(MARKERS[1])[0].strip()
    assert committed == table(RECIPE_ROWS, RECIPE_DIR)
