"""Sandboxed execution of untrusted, model-written Python programs.

``execute(code, stdin=..., timeout=..., memory_mb=...)`` runs one program and returns an
:class:`ExecutionResult`; ``execute_many`` runs a batch on a pool of workers. A program
*passes* when ``returncode == 0`` and it did not time out (``result.passed``).
"""

from pettingllm_envs.sandbox.executor import ExecutionResult, execute, execute_many

__all__ = ["ExecutionResult", "execute", "execute_many"]
