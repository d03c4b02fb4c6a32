"""Sandboxed execution of untrusted, model-written Python programs.

``execute(code, stdin=..., timeout=..., memory_mb=...)`` runs one program and returns an
:class:`ExecutionResult`; ``execute_many`` runs a batch, ``workers`` at a time. A program
*passes* when ``returncode == 0`` and it did not time out (``result.passed``). Programs
are forked from a warm fork server (no interpreter start-up per run). The layers, and
what is lost without root (every result says which held), are described in
:mod:`pettingllm_envs.sandbox.isolation` (processes), :mod:`pettingllm_envs.sandbox.filesystem`
(what a program sees) and :mod:`pettingllm_envs.sandbox.seccomp` (system calls), and the
threat model in ``docs/security.md``.
"""

from pettingllm_envs.sandbox.executor import (
    ExecutionResult,
    SandboxUnavailable,
    ServerInfo,
    execute,
    execute_many,
    fork_server_info,
    seconds_waited,
)

__all__ = ["ExecutionResult", "SandboxUnavailable", "ServerInfo", "execute", "execute_many", "fork_server_info",
           "seconds_waited"]
