"""A seccomp filter for sandboxed programs, written as raw classic BPF (no library needed).

The filter refuses the system calls that a Python program never needs and that reach
kernel state outliving the run or shared with other processes: namespaces, mounts,
keyrings, tracing other processes, BPF, kernel modules, SysV and POSIX IPC, memfds, io_uring.
Refused calls fail with ``EPERM`` (the program sees an ordinary ``PermissionError``), except:

* ``clone3`` fails with ``ENOSYS``: its flags sit in a struct in memory, which a filter cannot
  read, and ENOSYS makes glibc fall back to ``clone`` (threads, ``posix_spawn``), whose flags
  are a register the filter inspects;
* ``clone`` with ``CLONE_PARENT`` (a child that is its caller's sibling, escaping the run's
  process tree) or any ``CLONE_NEW*`` flag fails with ``EPERM``; plain ``fork``, threads and
  ``vfork`` pass;
* ``unshare`` passes only for ``CLONE_NEWPID``/``CLONE_NEWIPC`` and ``setns`` only for a PID or
  network namespace: the sandbox's own per-run setup (see below). Both still need
  ``CAP_SYS_ADMIN``, which a program never holds (as root it runs under a dropped uid, and it
  cannot get capabilities from a user namespace, since ``CLONE_NEWUSER`` is refused), so the
  kernel refuses them to the program, also with ``EPERM``;
* a system call made through another ABI (x86-64's i386 ``int 0x80`` or x32 numbers, whose
  numbering differs) kills the process or fails with ``ENOSYS``, so that no call slips past the
  table under another number.

Installing a filter costs about 25 us plus 0.5 us per instruction (the kernel checks and
compiles it), about 100 us for this one: a tenth of a trivial run. So the fork server's
zygote installs it **once**, on itself, before it forks any run; every run inherits it (a
filter is shared, not copied, on fork), as does every process a run creates, and nothing can
remove it. That is why the zygote's and the run's own setup calls above must pass. It is
installed with ``PR_SET_NO_NEW_PRIVS`` (required without root, and it also stops set-uid
binaries from gaining privileges).

Supported: x86-64 and AArch64, little-endian. Elsewhere there is no filter and runs go
without it (reported as ``syscalls_filtered=False``).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from functools import cache

from pettingllm_envs.sandbox.isolation import _libc

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
_LD_W_ABS = 0x00 | 0x00 | 0x20
_JEQ_K = 0x05 | 0x10
_JGE_K = 0x05 | 0x30
_JSET_K = 0x05 | 0x40
_RET_K = 0x06
# Return values (linux/seccomp.h).
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# Offsets in struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments.
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0, _OFFSET_ARG1 = 0, 4, 16, 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_X32_SYSCALL_BIT = 0x40000000

#: ``clone`` flags refused: a sibling of the caller (leaving the run's process tree) and
#: every new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET).
CLONE_REFUSED = 0x00008000 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

#: Architectures: machine name -> (AUDIT_ARCH value, index into each row of REFUSED).
_ARCHES = {"x86_64": (0xC000003E, 0), "amd64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1), "arm64": (0xC00000B7, 1)}

#: System calls refused with EPERM, with their numbers on (x86-64, AArch64); None where the
#: architecture has no such call. From the kernel's unistd tables.
REFUSED: dict[str, tuple[int | None, int | None]] = {
    # mounts: the run's view of the filesystem must stay as the sandbox made it
    "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    # keyrings outlive the process that filled them
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    # reading or changing other processes
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    # SysV and POSIX IPC: objects that outlive the run, and memory outside its limit
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    # anonymous shared memory files, outside the address-space limit unless mapped
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    # kernel attack surface no program needs
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "swapon": (167, 224), "swapoff": (168, 225),
    "reboot": (169, 142), "acct": (163, 89), "quotactl": (179, 60), "quotactl_fd": (443, 443),
    "syslog": (103, 116), "lookup_dcookie": (212, 18), "vhangup": (153, 58), "fanotify_init": (300, 262),
    "iopl": (172, None), "ioperm": (173, None), "uselib": (134, None),
}
_CLONE = (56, 220)
_CLONE3 = 435
_UNSHARE = (272, 97)
_SETNS = (308, 268)
CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWNET = 0x20000000, 0x08000000, 0x40000000
#: ``unshare`` flags the sandbox's setup uses (a PID namespace per run, made by the zygote,
#: and an IPC namespace per run, made by the run's process before it drops root).
UNSHARE_ALLOWED = CLONE_NEWPID | CLONE_NEWIPC


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str) -> bytes | None:
    """The filter program for ``machine`` (``platform.machine()``), or None if unsupported."""
    if machine not in _ARCHES:
        return None
    audit_arch, column = _ARCHES[machine]
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    program = [
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        _insn(_JEQ_K, 1, 0, audit_arch),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI: its numbers mean other calls
        _insn(_LD_W_ABS, 0, 0, _OFFSET_NR),
    ]
    if column == 0:  # x86-64's x32 calls share the architecture value, with this bit set
        program += [_insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT), _insn(_RET_K, 0, 0, enosys)]
    program += [
        _insn(_JEQ_K, 0, 1, _CLONE3), _insn(_RET_K, 0, 0, enosys),
        # clone: refuse the flags in CLONE_REFUSED (the low 32 bits of the first argument,
        # on both architectures), allow the rest.
        _insn(_JEQ_K, 0, 4, _CLONE[column]),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARG0),
        _insn(_JSET_K, 0, 1, CLONE_REFUSED),
        _insn(_RET_K, 0, 0, eperm),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        # unshare: only the setup's own flags (then the kernel's capability check applies).
        _insn(_JEQ_K, 0, 4, _UNSHARE[column]),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARG0),
        _insn(_JSET_K, 0, 1, ~UNSHARE_ALLOWED & 0xFFFFFFFF),
        _insn(_RET_K, 0, 0, eperm),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        # setns: only into a PID or network namespace (the second argument), ditto.
        _insn(_JEQ_K, 0, 5, _SETNS[column]),
        _insn(_LD_W_ABS, 0, 0, _OFFSET_ARG1),
        _insn(_JEQ_K, 2, 0, CLONE_NEWPID),
        _insn(_JEQ_K, 1, 0, CLONE_NEWNET),
        _insn(_RET_K, 0, 0, eperm),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    for numbers in REFUSED.values():
        number = numbers[column]
        if number is not None:  # two instructions each keep every jump short
            program += [_insn(_JEQ_K, 0, 1, number), _insn(_RET_K, 0, 0, eperm)]
    program.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@cache
def _compiled() -> tuple[_SockFprog, ctypes.Array[ctypes.c_char]] | None:
    program = build_filter(platform.machine().lower())
    if program is None:
        return None
    buffer = ctypes.create_string_buffer(program, len(program))
    return _SockFprog(len(program) // 8, ctypes.addressof(buffer)), buffer


#: Whether this machine's architecture has a filter (whether the kernel accepts it is
#: only known when a run installs it: see :func:`install`).
FILTER_SUPPORTED = _compiled() is not None


def install() -> bool:
    """Install the filter on the calling process (and all it will create). Returns False,
    changing nothing, where the architecture is unsupported or the kernel refuses it."""
    compiled = _compiled()
    if compiled is None:
        return False
    prog, _ = compiled
    zero = ctypes.c_ulong(0)  # the kernel refuses these calls unless the unused arguments are 0
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0:
        return False
    return _libc().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), zero, zero) == 0
