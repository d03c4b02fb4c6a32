"""A core-only install (``pip install -e .``) says what it lacks: the envs each missing extra would
add, the extra an unknown-looking env needs, and the report file ``bench`` could not write.

Each test runs the command in a subprocess where the optional packages cannot be imported
(``sys.modules[name] = None``: ``import`` raises ImportError and ``importlib.util.find_spec``
finds nothing, as when the package is not installed), so the registry is built as on such an install.
"""

from __future__ import annotations

import subprocess
import sys

from pettingllm_envs.extras import install_command

#: The optional envs' packages as the core install lacks them.
BRIDGED = "textarena,reasoning_gym"


def run_without(packages: str, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    code = ("import sys\n"
            "for name in sys.argv[1].split(','):\n"
            "    sys.modules[name] = None  # not installed\n"
            "from pettingllm_envs.cli import main\n"
            "sys.exit(main(sys.argv[2:]))")
    return subprocess.run([sys.executable, "-c", code, packages, *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_list_names_the_envs_each_missing_extra_adds():
    proc = run_without(BRIDGED, "list")
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.splitlines()
    assert not any(line.startswith(("textarena_v0", "reasoning_gym_v0")) for line in listed)  # not in the table
    assert f"not installed: textarena_v0, which needs the textarena extra: {install_command('textarena')}" in listed
    assert (f"not installed: reasoning_gym_v0, which needs the reasoning-gym extra: "
            f"{install_command('reasoning-gym')}") in listed


def test_running_an_env_of_a_missing_extra_names_the_extra():
    for command in (["run", "textarena_v0"], ["play", "reasoning_gym_v0"], ["bench", "textarena_v0"]):
        proc = run_without(BRIDGED, *command)
        assert proc.returncode == 2
        env_id = command[1]
        extra = "textarena" if env_id == "textarena_v0" else "reasoning-gym"
        assert proc.stderr.strip() == (f"pettingllm: error: {env_id} is not installed: it needs the {extra} extra: "
                                       f"{install_command(extra)}")


def test_make_of_a_missing_extra_names_the_extra():
    code = ("import sys; sys.modules['textarena'] = None\n"
            "import pettingllm_envs\n"
            "try:\n    pettingllm_envs.make('textarena_v0')\n"
            "except ValueError as error:\n    print(error)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    assert out == f"textarena_v0 is not installed: it needs the textarena extra: {install_command('textarena')}"


def test_bench_without_matplotlib_says_it_skipped_the_plot(tmp_path):
    proc = run_without("matplotlib", "bench", "tictactoe_v0", "--episodes", "1", "--policy", "random",
                       "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert (f"success.png not written: the plot needs matplotlib, which comes with the train extra: "
            f"{install_command('train')}") in proc.stderr.splitlines()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "episodes.jsonl", "summary.csv", "summary.json", "summary.md"]


def test_bench_with_matplotlib_writes_the_plot_and_says_nothing_about_it(tmp_path):
    proc = run_without("", "bench", "tictactoe_v0", "--episodes", "1", "--policy", "random",
                       "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "success.png").is_file() and "success.png" not in proc.stderr
