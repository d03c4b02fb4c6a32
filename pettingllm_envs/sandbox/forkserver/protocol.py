"""The fork server's two wire protocols: how the client starts the server and speaks to it
(length-prefixed JSON frames over the server's stdin/stdout), and the fixed-size messages
between the server and its zygote (over a ``SOCK_SEQPACKET`` pair, with file descriptors
passed as ``SCM_RIGHTS``).

Frames (client -> server): ``{"id", "code", "stdin", "timeout", "memory_mb",
"max_output_bytes", "max_processes", "isolate_network"}``, plus ``"batch"`` and
``"batch_workers"`` for the runs of one ``execute_many`` call: at most that many of their
programs run at once (the next one starts as soon as a program's main process has exited,
while what it left is cleaned up). Server -> client: first a hello
``{"pid", "network", "block", "zygote", "isolation"}`` (``isolation``: which of the layers
``filesystem``, ``uid``, ``pid``, ``ipc``, ``syscalls`` hold; or ``{"fatal": message}``), then one
``{"id", "stdout", "stderr", "returncode", "timed_out", "overflow", "duration",
"network_isolated"}`` per run (or ``{"id", "error"}`` when the run could not start). End of
input (the parent closed the pipe or died) shuts the server down after killing every run.
"""

from __future__ import annotations

import array
import json
import struct
from typing import Any

#: Environment of every sandboxed program (and of the server): nothing inherited from the parent.
SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

#: Started as ``python -I -B -c BOOTSTRAP PACKAGE_PARENT_DIR CONFIG``, where ``CONFIG`` is
#: ``{"block": preferred uid block or null, "packages": [allowed import names]}`` in JSON. It makes
#: ``pettingllm_envs`` and ``pettingllm_envs.sandbox`` importable without running their
#: ``__init__`` (which loads every env and its dependencies), keeping the server small.
BOOTSTRAP = """
import sys, types
root = sys.argv[1]
for name, sub in (("pettingllm_envs", ""), ("pettingllm_envs.sandbox", "/sandbox")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/pettingllm_envs" + sub]
    sys.modules[name] = module
from pettingllm_envs.sandbox.forkserver.server import main
main(sys.argv[2:])
"""

#: Client <-> server: each frame is its JSON body's length, then the body.
HEADER = struct.Struct(">I")

#: Server -> zygote: fork a run (fds: code memfd, stdin, stdout, stderr and, with network
#: isolation, the network namespace to join; then the working directory): kind, uid (-1:
#: none), CPU seconds, memory MB, processes, code size, new IPC namespace.
SPAWN = struct.Struct("=ciiiii?")
#: Server -> zygote: reap this pid (``R``); zygote -> server: its wait status (``W``).
REAP = struct.Struct("=ci")
#: Zygote -> server: the pid of a run it forked (``P``), or minus the errno of the fork.
PID = struct.Struct("=ci")
#: Size of one file descriptor in an ``SCM_RIGHTS`` message.
FD_SIZE = array.array("i").itemsize


def encode_frame(message: dict[str, Any]) -> bytes:
    """One client <-> server frame."""
    body = json.dumps(message).encode()
    return HEADER.pack(len(body)) + body


def take_frames(buffer: bytearray) -> list[dict[str, Any]]:
    """The complete frames at the start of ``buffer``, removed from it (a partial frame stays)."""
    frames = []
    while len(buffer) >= HEADER.size:
        (size,) = HEADER.unpack_from(buffer)
        if len(buffer) < HEADER.size + size:
            break
        frames.append(json.loads(buffer[HEADER.size:HEADER.size + size]))
        del buffer[:HEADER.size + size]
    return frames
