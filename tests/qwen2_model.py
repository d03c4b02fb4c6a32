"""A tiny random Qwen2 causal LM with attention biases, for the tests of the shared-prefix paths
(trainers/models/shared_prefix.py): the other architecture those paths take besides the tiny Llama,
and the one with q/k/v biases."""

from __future__ import annotations

from typing import Any


def qwen2_with_biases() -> Any:
    """Two layers, hidden 64, 4 query heads over 2 key-value heads, byte vocabulary of 259; the
    q/k/v biases (initialised at zero) drawn at random so that they count."""
    import torch
    import transformers

    config = transformers.Qwen2Config(vocab_size=259, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(1)
    model = transformers.Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(std=0.5)
    return model
