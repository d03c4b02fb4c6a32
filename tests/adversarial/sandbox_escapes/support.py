"""Helpers of the sandbox escape tests: where the repository is, which isolation layers the
running fork server has, a run of dedented code, and the checks that a run left nothing behind."""

from __future__ import annotations

import os
import textwrap

import pytest

from pettingllm_envs.sandbox import ExecutionResult, execute, fork_server_info
from pettingllm_envs.sandbox.isolation import IS_ROOT, uid_processes

#: The repository root (this file is tests/adversarial/sandbox_escapes/support.py).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
requires_root = pytest.mark.skipif(not IS_ROOT, reason="this layer needs root (see docs/security.md)")


def layer(name: str) -> bool:
    """Whether the running fork server has this layer (an ExecutionResult field name)."""
    info = fork_server_info()
    return info is not None and bool(info.isolation and info.isolation.get(name))


def run(code: str, **options) -> ExecutionResult:
    return execute(textwrap.dedent(code), **options)


def leftovers() -> list[int]:
    info = fork_server_info()
    if info is None:
        return []
    found = []
    for pid in (info.pid, info.zygote):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                found += [int(p) for p in handle.read().split() if int(p) != info.zygote]
        except OSError:
            pass
    if info.uids is not None:
        found += uid_processes(info.uids, include_zombies=False)
    return found


def assert_next_run_is_clean() -> None:
    """The next run (the same slot: runs one at a time reuse the slot just freed) sees an
    empty, writable working directory, and the server works."""
    result = run("""
        import os
        print(sorted(os.listdir(".")))
        with open("probe", "w") as f:
            f.write("x")
        print(os.path.getsize("probe"))
    """)
    assert result.stdout == "[]\n1\n", result.stderr
