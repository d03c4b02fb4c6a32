"""Warm starts kept by content: a supervised warm start trained once is reused wherever the same
inputs would train it again.

A warm start is a pure function of what goes into it: the SFT settings, the tokenized
demonstrations, the initial weights, the training loop's source and the torch version. Its key
is the SHA-256 of exactly those, so an env whose prompts change, a different mistake rate or a
new training loop misses the cache, while a rerun on the same checkout (the CI learning check,
the same experiment in another work dir) copies the result instead of training for minutes.

Entries live under ``$PETTINGLLM_CACHE/warm-starts/<key>`` (``PETTINGLLM_CACHE`` defaults to
``~/.cache/pettingllm``, as for the converted SmolLM2), are written to a temporary folder and renamed
into place, so a crash or a concurrent writer never leaves a partial entry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

#: The file that marks a complete entry (written last, inside the staging folder).
SUMMARY = "sft.json"


def default_cache_dir() -> Path:
    """``$PETTINGLLM_CACHE/warm-starts`` (:func:`trainers.models.pretrained.cache_root`)."""
    from trainers.models.pretrained import cache_root

    return cache_root() / "warm-starts"


def content_key(settings: Mapping[str, Any], examples: Iterable[tuple[str, list[int], list[int]]],
                base_model: Path, trainer_source: Path) -> str:
    """The SHA-256 of everything a warm start's weights depend on (pure in its inputs): the
    settings that change training (not where it is written), every (policy, prompt ids, target
    ids) example in order, the files of the initial model, the training loop's source and the
    torch version."""
    digest = hashlib.sha256()
    digest.update(json.dumps(dict(settings), sort_keys=True).encode())
    for policy, prompt, target in examples:
        digest.update(json.dumps([policy, prompt, target]).encode())
    for path in sorted(p for p in base_model.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(base_model)).encode())
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    digest.update(trainer_source.read_bytes())
    digest.update(torch.__version__.encode())
    return digest.hexdigest()


def lookup(cache_dir: Path, key: str) -> Path | None:
    """The complete entry for ``key``, or None."""
    entry = cache_dir / key
    return entry if (entry / SUMMARY).is_file() else None


def store(cache_dir: Path, key: str, trained: Path) -> None:
    """Copy the warm start in ``trained`` into the cache under ``key`` (atomically; a concurrent
    writer of the same key wins harmlessly: both wrote the same content)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    if lookup(cache_dir, key) is not None:
        return
    staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=cache_dir))
    try:
        shutil.copytree(trained, staging, dirs_exist_ok=True)
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary directory
        try:
            staging.rename(cache_dir / key)
        except OSError:  # another writer renamed first
            if lookup(cache_dir, key) is None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def restore(entry: Path, out: Path) -> dict[str, Any]:
    """Copy a cached warm start into ``out``; returns its stored summary."""
    shutil.copytree(entry, out, dirs_exist_ok=True)
    return json.loads((entry / SUMMARY).read_text())
