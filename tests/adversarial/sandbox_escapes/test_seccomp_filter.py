"""The sandbox's seccomp filter: dangerous calls are refused, another ABI kills the program,
ordinary programs keep working, and the filter program is well formed."""

from __future__ import annotations

import errno
import platform
import signal

import pytest

from adversarial.sandbox_escapes.support import run
from pettingllm_envs.sandbox.seccomp import REFUSED, build_filter

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
