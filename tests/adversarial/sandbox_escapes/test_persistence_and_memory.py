"""Sandbox escapes that keep something for a later run or another slot (SysV and POSIX IPC, the
keyring, files in writable directories, concurrent runs) or use memory outside the limit."""

from __future__ import annotations

import ast
import contextlib
import errno
import os
import platform
import textwrap
import uuid

import pytest

from adversarial.sandbox_escapes.support import requires_root, run
from pettingllm_envs.sandbox import execute_many
from pettingllm_envs.sandbox.isolation import IS_ROOT

# -- 3. persistence across runs and slots ----------------------------------------------

SYSV_AND_MQ = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    KEY, CREATE = 0x5EC12E7, 0o1666
    flags = CREATE if os.environ.get("MODE", "{mode}") == "create" else 0o666
    out = []
    for name, call in (("shm", lambda: libc.shmget(KEY, 4096, flags)),
                       ("msg", lambda: libc.msgget(KEY, flags)),
                       ("sem", lambda: libc.semget(KEY, 1, flags)),
                       ("mq", lambda: libc.mq_open(b"/pettingllm-probe", (0o100 if flags & 0o1000 else 0) | 2,
                                                   0o666, None))):
        ret = call()
        out.append(f"{{name}}={{'ok' if ret >= 0 else ctypes.get_errno()}}")
    print(" ".join(out))
"""


def test_sysv_ipc_and_message_queues_do_not_carry_over():
    created = run(SYSV_AND_MQ.format(mode="create"))
    assert created.passed, created.stderr
    if created.syscalls_filtered:  # refused outright
        assert created.stdout.split() == [f"{k}={errno.EPERM}" for k in ("shm", "msg", "sem", "mq")]
    found = execute_many([textwrap.dedent(SYSV_AND_MQ.format(mode="open"))] * 3, workers=3)  # other slots too
    for result in found:
        assert result.passed and "ok" not in result.stdout, result.stdout
    if IS_ROOT:
        assert created.ipc_isolated


KEYRING = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    NR = {{"x86_64": (248, 250), "aarch64": (217, 219)}}[os.uname().machine]  # add_key, keyctl
    KEY_SPEC_USER_KEYRING, KEYCTL_SEARCH = -4, 10
    if "{mode}" == "add":
        ret = libc.syscall(NR[0], b"user", b"pettingllm-probe", b"answer=42", 9, KEY_SPEC_USER_KEYRING)
    else:
        ret = libc.syscall(NR[1], KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", b"pettingllm-probe", 0)
    print(ret, ctypes.get_errno() if ret < 0 else 0)
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="raw syscall numbers")
def test_keyring_does_not_carry_over():
    added = run(KEYRING.format(mode="add"))
    if added.syscalls_filtered:
        assert added.stdout.split() == ["-1", str(errno.EPERM)]
    for result in execute_many([textwrap.dedent(KEYRING.format(mode="search"))] * 3, workers=3):
        assert result.stdout.split()[0] == "-1", result.stdout


WRITABLE_PLACES = """
    import os, stat
    found = []
    for top in ("/",):
        for root, dirs, files in os.walk(top):
            if root in ("/proc", "/sys") or root.startswith(("/proc/", "/sys/")):
                dirs[:] = []
                continue
            here = os.path.realpath(root)
            if here == os.getcwd() or here.startswith(os.getcwd() + "/"):
                continue
            if os.access(root, os.W_OK) or os.stat(root).st_mode & stat.S_IWOTH:
                found.append(root)
    for path in ("/tmp/x", "/var/tmp/x", "/dev/shm/x", "/run/lock/x", "/x"):
        try:
            open(path, "w").close()
            found.append(path)
        except OSError:
            pass
    print(found)
"""


@requires_root
@pytest.mark.slow
def test_no_writable_directory_outside_its_own():
    """The whole visible filesystem is walked: no directory but the run's own is writable
    (no world-writable host directory such as /tmp, /var/tmp, /dev/shm, /run/lock)."""
    result = run(WRITABLE_PLACES, timeout=60.0)
    assert result.filesystem_isolated and result.passed, result.stderr
    assert result.stdout == "[]\n"


def test_files_do_not_carry_over_to_later_runs_or_other_slots(tmp_path):
    token = uuid.uuid4().hex
    writer = run(f"""
        import os
        for d in ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "."):
            try:
                with open(os.path.join(d, "{token}"), "w") as f:
                    f.write("left for later")
            except OSError:
                pass
    """)
    assert writer.passed
    readers = execute_many([f"""
import os
hits = []
for d in ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "."):
    try:
        hits += [d for name in os.listdir(d) if name == "{token}"]
    except OSError:
        pass
print(hits)
"""] * 3, workers=3)
    for reader in readers:
        if reader.filesystem_isolated:
            assert reader.stdout == "[]\n", reader.stdout
        else:  # the host's /tmp is shared without root (documented); the working directory is not
            assert "'.'" not in reader.stdout
    for directory in ("/tmp", "/var/tmp", "/dev/shm"):  # what it could leave on the host without the view
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, token))


def test_concurrent_runs_in_other_slots_cannot_reach_each_other():
    """Abstract Unix sockets need no file: two runs at once would share them, and netlink, in
    one network namespace. Each slot has its own."""
    listener = """
import socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0pettingllm-cross-run-probe")
s.listen(1)
s.settimeout(1.5)
try:
    s.accept()
    print("reached")
except OSError:
    print("alone")
"""
    caller = """
import socket, time
for _ in range(100):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect("\\0pettingllm-cross-run-probe")
        print("reached")
        break
    except OSError:
        time.sleep(0.01)
else:
    print("alone")
"""
    results = execute_many([listener, caller], workers=2, timeout=5.0)
    assert all(r.passed for r in results), [r.stderr for r in results]
    if all(r.network_isolated for r in results):
        assert [r.stdout for r in results] == ["alone\n", "alone\n"]


# -- 4. memory outside the limit --------------------------------------------------------

@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="raw syscall numbers")
def test_shared_memory_cannot_exceed_the_memory_limit():
    """With a 64 MB limit, no channel holds more than the working directory's 64 MiB cap:
    SysV shm, POSIX shm (/dev/shm), memfds and files in the working directory."""
    result = run("""
        import ctypes, mmap, os
        libc = ctypes.CDLL(None, use_errno=True)
        MB = 1 << 20
        got = {}
        shm = libc.shmget(0, ctypes.c_size_t(512 * MB), 0o1600)
        got["sysv"] = 0 if shm < 0 else 512
        try:
            fd = os.open("/dev/shm/big", os.O_CREAT | os.O_RDWR, 0o600)
            os.ftruncate(fd, 512 * MB)
            got["posix"] = 512
        except OSError:
            got["posix"] = 0
        try:
            fd = os.memfd_create("big")
            chunk = b"x" * MB
            for i in range(512):
                os.write(fd, chunk)
            got["memfd"] = 512
        except OSError:
            got["memfd"] = 0
        written = 0
        try:
            for i in range(64):
                with open(f"f{i}", "wb") as f:
                    for _ in range(16):
                        f.write(b"y" * MB)
                        written += 1
        except OSError:
            pass
        got["files"] = written
        print(got)
    """, memory_mb=64, timeout=20.0)
    got = ast.literal_eval(result.stdout)
    assert got["files"] <= 64, got
    if result.syscalls_filtered:
        assert got["sysv"] == 0 and got["memfd"] == 0, got
    if result.filesystem_isolated:
        assert got["posix"] == 0, got
