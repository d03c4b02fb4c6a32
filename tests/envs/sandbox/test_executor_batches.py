"""A batch whose requests overflow the server's input pipe while its results overflow the client's:
``execute_many`` sends the requests while its reader thread keeps taking results, so neither side
waits on the other for good (the client once held the results' lock while blocked on writing a request,
and the server, blocked on sending a result, never read the rest)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from repo_paths import REPO

BATCH = textwrap.dedent("""
    from pettingllm_envs.sandbox import execute_many

    programs = ["import sys; sys.stdout.write('x' * 60000)"] * 40
    results = execute_many(programs, stdins=["y" * 200_000] * 40, workers=2, timeout=10)
    print(sum(r.passed and r.stdout == "x" * 60000 for r in results))
""")


def test_a_batch_larger_than_both_pipes_completes():
    # In a child process: the old client never returned, and a hung test would leave its server behind.
    try:
        done = subprocess.run([sys.executable, "-c", BATCH], cwd=REPO, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("execute_many hung: client and server each waited on the other") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["40"]
