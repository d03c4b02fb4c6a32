"""A run's own process, from the zygote's fork to its exit: take the run's pipes, read the
program from its memfd, confine the process (:func:`pettingllm_envs.sandbox.isolation.confine_current_process`),
then run the program as ``__main__`` the way ``python -I main.py`` would.

Everything here runs in a freshly forked child of the zygote, where the first touch of each
page of the interpreter's memory is a copy-on-write fault: what it needs is imported at
module level (in the server, before the zygote is forked), and it calls C functions rather
than their Python wrappers where that is the same thing.
"""

from __future__ import annotations

import _random
import _signal
import _thread
import atexit
import builtins
import contextlib
import gc
import linecache
import os
import random
import signal
import sys
import tempfile
import threading
import traceback
import types

from pettingllm_envs.sandbox.forkserver.protocol import SPAWN
from pettingllm_envs.sandbox.isolation import Limits, confine_current_process

SIGINT, SIGTERM = int(signal.SIGINT), int(signal.SIGTERM)
#: atexit callbacks registered before any program ran (a program's own come on top).
_ATEXIT_INHERITED = atexit._ncallbacks()
#: Exit code of a child whose isolation could not be set up (the program never ran).
SETUP_FAILED = 125


def run_child(message: bytes, fds: list[int]) -> None:  # pragma: no cover - the child
    """In a run's freshly forked process: take the run's pipes, read the program, confine
    the process, run the program. Never returns."""
    try:
        # What ``random``'s at-fork hook does (see ``zygote.zygote_loop``), without the Python
        # wrapper of ``Random.seed`` (its only other work is clearing ``gauss_next``).
        _random.Random.seed(random._inst)  # type: ignore[attr-defined]
        random._inst.gauss_next = None  # type: ignore[attr-defined]
        code_fd, stdin_r, stdout_w, stderr_w = fds[:4]
        network = fds[4] if len(fds) > 4 else None
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        _, uid, cpu_seconds, memory_mb, max_processes, size, new_ipc = SPAWN.unpack_from(message)
        workdir = message[SPAWN.size:].decode()
        chunks = []
        offset = 0
        while offset < size:
            chunk = os.pread(code_fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        source = b"".join(chunks).decode("utf-8")
        limits = Limits(cpu_seconds=cpu_seconds, memory_mb=memory_mb, max_processes=max_processes)
        confine_current_process(limits, None if uid < 0 else uid, workdir, network, new_ipc)
        os.closerange(3, 1 << 16)
    except BaseException as exc:  # report any setup failure, then exit
        with contextlib.suppress(BaseException):
            os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    run_program(source, workdir)

def run_program(source: str, workdir: str) -> None:  # pragma: no cover - runs in the child
    """Run ``source`` as ``__main__`` the way ``python -I main.py`` would (``__file__`` and
    ``sys.argv[0]`` name ``main.py`` in the working directory), then exit the
    process. Called in the forked child after it was confined; never returns.

    Written for a fresh child of the zygote, where the first touch of each page of the
    interpreter's memory is a copy-on-write fault: what it needs is imported at module
    level, and it calls C functions rather than their Python wrappers where that is the
    same thing."""
    # The C functions, with plain ints: ``signal.signal`` and ``os.environ.update`` go through
    # enum and ABC machinery, whose first use in a child copies dozens of pages.
    _signal.signal(SIGINT, _signal.default_int_handler)
    _signal.signal(SIGTERM, _signal.SIG_DFL)
    path = workdir + "/main.py"
    os.environ["HOME"] = workdir  # the rest is SCRUBBED_ENV already
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = None
    # The source is never written to disk (creating a file costs about 0.5 ms, a tenth of a
    # typical check); ``inspect``, ``warnings`` and tracebacks read it from here.
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    # sys.stdin/stdout/stderr are the server's own, made by the same ``python -I`` start-up
    # (so with the same encodings and buffering) and never used by it; fds 0-2 now are the
    # run's pipes.
    sys.argv = [path]
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    gc.enable()
    code = 0
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # the program's own failure, reported like Python does
        code = 1
        # Drop this frame from the traceback so that it starts at the program.
        if exc.__traceback__ is not None:
            exc.__traceback__ = exc.__traceback__.tb_next
        # Report it from the source in linecache. Python's own hook would read the lines from
        # a file, and writing one would change the working directory, which then had to be
        # replaced before the slot's next run (see ``server.ForkServer._reset_workdir``).
        if sys.excepthook is sys.__excepthook__:
            try:
                traceback.print_exception(type(exc), exc, exc.__traceback__)
            except BaseException:  # e.g. out of memory while formatting: the C hook, without source lines
                sys.__excepthook__(type(exc), exc, exc.__traceback__)
        else:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    try:
        # Wait for non-daemon threads and run threading's exit hooks, as Python does; with
        # no other thread alive and no hook of threading's or the program's, it would only
        # mark the main thread stopped, which nothing could see.
        if _thread._count() or threading._threading_atexits or atexit._ncallbacks() > _ATEXIT_INHERITED:
            threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = _exit_code(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # Python exits with 120 when flushing fails
            code = code or 120
    os._exit(code)


def _exit_code(exc: SystemExit) -> int:  # pragma: no cover - runs in the child
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(BaseException):
        print(exc.code, file=sys.stderr)
    return 1

