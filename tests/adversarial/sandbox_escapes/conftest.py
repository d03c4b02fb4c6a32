"""The check every sandbox escape test ends with (autouse): the parent and the same fork server are
alive, no process of the run is left, and the next run in the same slot starts clean and works."""

from __future__ import annotations

import os
import threading

import pytest

from adversarial.sandbox_escapes.support import assert_next_run_is_clean, leftovers
from pettingllm_envs.sandbox import execute, fork_server_info


@pytest.fixture(autouse=True)
def server_survives():
    execute("pass")
    before = fork_server_info()
    yield before
    assert os.getpid() > 0 and threading.main_thread().is_alive()
    assert leftovers() == []
    assert_next_run_is_clean()
    assert fork_server_info().pid == before.pid, "the fork server was replaced"
