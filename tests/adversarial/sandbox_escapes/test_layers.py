"""The sandbox's isolation layers: every layer the machine allows is on, and without root they
degrade and each run says so."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import textwrap

import pytest

from adversarial.sandbox_escapes.support import REPO, requires_root
from pettingllm_envs.sandbox import execute
from pettingllm_envs.sandbox.isolation import IS_ROOT

# -- layers: all that the machine allows holds, and each run says so ----------------------

def test_every_layer_the_machine_allows_is_on():
    result = execute("pass")
    if platform.machine() in ("x86_64", "aarch64"):
        assert result.syscalls_filtered
    if not IS_ROOT:
        assert not (result.filesystem_isolated or result.uid_isolated or result.pid_isolated or result.ipc_isolated)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - probe whether this machine lets root make namespaces
        os._exit(0 if libc.unshare(0x00020000 | 0x20000000 | 0x08000000 | 0x40000000) == 0 else 1)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0:
        assert result.filesystem_isolated and result.uid_isolated and result.pid_isolated and result.ipc_isolated
        assert result.network_isolated


@requires_root
@pytest.mark.slow
def test_without_root_the_layers_degrade_and_say_so():
    """The fork server started by an unprivileged user: no view, uids or namespaces (each
    reported off), the filter still on, hostile working directories still cleaned, and a
    process left behind still killed."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if python is None or subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 11)"]).returncode:
        pytest.skip("no interpreter outside /root that an unprivileged user can run")
    script = textwrap.dedent(f"""
        import sys, types
        for name, sub in (("pettingllm_envs", ""), ("pettingllm_envs.sandbox", "/sandbox")):
            module = types.ModuleType(name)
            module.__path__ = [{REPO!r} + "/pettingllm_envs" + sub]
            sys.modules[name] = module
        from pettingllm_envs.sandbox.executor import execute, fork_server_info
        first = execute("pass")
        server = fork_server_info().pid
        for attack in ("import os; os.mkdir('main.py')",
                       "import os\\nfor _ in range(2000):\\n os.mkdir('d'); os.chdir('d')",
                       "import os; os.makedirs('a/b'); os.chmod('a/b', 0); os.chmod('a', 0)"):
            execute(attack)
        execute("import os, time\\nif os.fork() == 0:\\n os.setsid(); time.sleep(60)")  # left behind
        last = execute("import os; print(os.listdir('.'))")
        info = fork_server_info()
        def children(pid):
            with open(f"/proc/{{pid}}/task/{{pid}}/children") as f:
                return f.read().split()
        left = [p for p in children(info.pid) if int(p) != info.zygote] + children(info.zygote)
        print(first.filesystem_isolated, first.uid_isolated, first.pid_isolated, first.ipc_isolated,
              first.network_isolated, first.syscalls_filtered, last.stdout.strip(), info.pid == server, left)
    """)
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=120, cwd="/",
                         user="nobody", group="nogroup", extra_groups=[], env={"PATH": "/usr/bin:/bin"})
    filtered = str(platform.machine() in ("x86_64", "aarch64"))
    assert out.stdout.split() == ["False"] * 5 + [filtered, "[]", "True", "[]"], out.stdout + out.stderr
