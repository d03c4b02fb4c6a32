"""Sandbox escapes through the working directory (nothing a program leaves there stops the
server, and the cleaning removes any tree) and through processes that outlive their run."""

from __future__ import annotations

import errno
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import textwrap

import pytest

from adversarial.sandbox_escapes.support import layer, requires_root, run
from pettingllm_envs.sandbox.filesystem import remove_tree

# -- 1. the working directory: nothing a program leaves there stops the server ------------

HOSTILE_WORKDIRS = {
    "a directory named like the program's source": "os.mkdir('main.py'); os.mkdir('main.py/sub')",
    "a FIFO named like the source": "os.mkfifo('main.py')",
    "a link named like the source": "os.symlink('/etc/passwd', 'main.py')",
    "a dangling link loop": "os.symlink('loop', 'loop')",
    "a tree deeper than any recursion": """
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        open("leaf", "w").close()
    """,
    "unreadable directories": """
        os.makedirs("a/b/c")
        open("a/b/c/f", "w").close()
        os.chmod("a/b", 0)
        os.chmod("a", 0)
    """,
    "its own directory made inaccessible": "os.mkdir('x'); os.chmod('.', 0)",
    "thousands of entries": """
        for i in range(5000):
            open(f"f{i}", "w").close()
    """,
    "a failing program next to other files": "open('keep', 'w').close(); raise SystemExit('failed on purpose')",
    "the source made unwritable before failing": "os.chmod('.', 0o500); raise ValueError('traceback needs main.py')",
}


@pytest.mark.parametrize("attack", HOSTILE_WORKDIRS.values(), ids=HOSTILE_WORKDIRS.keys())
def test_hostile_working_directory(attack):
    run("import os\n" + textwrap.dedent(attack), timeout=10.0)


@pytest.mark.parametrize("attack", HOSTILE_WORKDIRS.values(), ids=HOSTILE_WORKDIRS.keys())
def test_remove_tree_removes_any_hostile_tree(attack):
    """The cleaning used without root (a fresh directory per run), on the same trees (made
    in memory where possible: removing 3,000 nested directories from a journaled disk takes
    seconds, whoever does it)."""
    scratch = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=scratch) as directory:
        _remove_hostile_tree(pathlib.Path(directory), attack)


def _remove_hostile_tree(tmp_path: pathlib.Path, attack: str) -> None:
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("not the program's")
    code = "import os\nos.chdir(os.environ['WORKDIR'])\n" + textwrap.dedent(attack)
    code = code.replace("/etc/passwd", str(outside))
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "WORKDIR": str(workdir)}, timeout=60,
                   capture_output=True)
    remove_tree(str(workdir))
    assert not workdir.exists() and outside.read_text() == "not the program's"


# -- 2. processes that outlive their run ------------------------------------------------

CLONE_PARENT_ESCAPE = """
    import ctypes, os, time
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_PARENT, SIGCHLD = 0x8000, 17
    NR_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
    r, w = os.pipe()
    pid = libc.syscall(NR_CLONE, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:  # a sibling of this process, outside its process tree
        os.setsid()
        os.write(w, os.readlink("/proc/self").encode())
        for _ in range(600):  # would read the later runs' files
            time.sleep(0.1)
        os._exit(0)
    os.close(w)
    print("clone", pid, ctypes.get_errno() if pid < 0 else 0, os.read(r, 32).decode() if pid > 0 else "")
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="raw clone numbers")
def test_clone_parent_and_setsid_does_not_outlive_the_run():
    result = run(CLONE_PARENT_ESCAPE)
    assert result.passed, result.stderr
    words = result.stdout.split()
    if layer("syscalls_filtered"):
        assert words[:3] == ["clone", "-1", str(errno.EPERM)]
    if len(words) == 4:  # it was created (no filter): it must be gone now
        assert not os.path.exists(f"/proc/{words[3]}")


@requires_root
def test_pid_namespace_kills_what_the_run_left():
    """A daemon that left by every ordinary route (double fork, setsid, ignoring SIGHUP and
    SIGTERM) dies with the run's init, before the result comes back."""
    result = run("""
        import os, signal, time
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                os.write(w, os.readlink("/proc/self").encode())
                time.sleep(60)
            os._exit(0)
        os.close(w)
        print(os.getpid(), os.read(r, 32).decode())
    """)
    assert layer("pid_isolated") and result.pid_isolated
    init, daemon = result.stdout.split()
    assert init == "1" and not os.path.exists(f"/proc/{daemon}")
