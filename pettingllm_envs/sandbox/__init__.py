"""Sandboxed execution of untrusted, model-written Python programs.

``execute(code, stdin=..., timeout=..., memory_mb=...)`` runs one program and returns an
:class:`ExecutionResult`; ``execute_many`` runs a batch, ``workers`` at a time. A program
*passes* when ``returncode == 0`` and it did not time out (``result.passed``). Programs
are forked from a warm fork server (no interpreter start-up per run); the isolation
layers, and what is lost without root, are described in
:mod:`pettingllm_envs.sandbox.isolation`.
"""

from pettingllm_envs.sandbox.executor import (
    ExecutionResult,
    SandboxUnavailable,
    ServerInfo,
    execute,
    execute_many,
    fork_server_info,
)

__all__ = ["ExecutionResult", "SandboxUnavailable", "ServerInfo", "execute", "execute_many", "fork_server_info"]
