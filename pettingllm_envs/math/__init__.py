"""Math environments: ``math_v0`` (a reasoner and a tool agent) and the answer checker
``verify``. Modules import each other absolutely, so the stdlib ``math`` is never shadowed.

``math_v0`` is imported on first use, so that the answer-comparison process
(``python -m pettingllm_envs.math.bounded``) loads only the checker, not the env and its sandbox.
"""

from __future__ import annotations

import importlib
from typing import Any

from pettingllm_envs.math.verify import verify

__all__ = ["math_v0", "verify"]


def __getattr__(name: str) -> Any:
    if name == "math_v0":
        return importlib.import_module("pettingllm_envs.math.math_env")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
