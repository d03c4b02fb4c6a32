"""Test helpers for the M-GRPO store tests: a real local redis-server, started per module."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server")
NO_REDIS_REASON = "the redis-server binary is not installed (.ci/run installs it: apt-get install redis-server)"


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """Start ``redis-server`` on a unix socket in ``directory`` (no TCP port, no persistence);
    yield its ``unix://`` URL; stop it."""
    socket = directory / "redis.sock"
    proc = subprocess.Popen([str(REDIS_SERVER), "--port", "0", "--unixsocket", str(socket), "--save", "",
                             "--appendonly", "no", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start (exit code {proc.poll()})")
            time.sleep(0.02)
        yield f"unix://{socket}"
    finally:
        proc.terminate()
        proc.wait(10)
