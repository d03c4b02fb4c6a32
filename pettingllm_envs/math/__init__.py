"""Math environments: ``math_v0`` (a reasoner and a tool agent) and the answer checker
``verify``. Modules import each other absolutely, so the stdlib ``math`` is never shadowed."""

from pettingllm_envs.math import math_env as math_v0
from pettingllm_envs.math.verify import verify

__all__ = ["math_v0", "verify"]
