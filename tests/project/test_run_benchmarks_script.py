"""``scripts/run-benchmarks.sh``, the one command docs/benchmarks.md gives for reproducing the figures,
reruns every benchmark whose results file is committed and then renders the results page. Checked with its
``--dry-run`` (it prints the commands and runs none), so no benchmark runs here."""

from __future__ import annotations

import subprocess

from repo_paths import REPO

from benchmarks.results_page import BENCHMARKS, RESULTS

SCRIPT = REPO / "scripts" / "run-benchmarks.sh"


def dry_run(*args: str) -> tuple[list[str], str]:
    """The commands the script would run, in order, and all it printed (a benchmark whose environment is
    missing, vllm_rollout without .venv-vllm, is named in a line that says how to make it)."""
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")], done.stdout + done.stderr


def test_the_script_reruns_every_benchmark_with_a_committed_results_file_then_renders_the_page():
    commands, printed = dry_run("--with-learning")
    recorded = [bench for bench in BENCHMARKS if (RESULTS / bench.file).exists()]
    assert recorded, "no results file committed"
    # "python -m benchmarks.x" or "python benchmarks/x.py": the script may run it with another interpreter
    missing = [bench.command for bench in recorded if bench.command.removeprefix("python ") not in printed]
    assert not missing, f"committed results files whose benchmark scripts/run-benchmarks.sh does not run: {missing}"
    assert commands[-1] == "python -m benchmarks.results_page"
    assert "-e .[all]" in commands[0]  # a fresh clone gets what the benchmarks import


def test_the_learning_experiment_and_the_install_are_left_out_on_request():
    commands, _ = dry_run("--no-install")
    assert not any("pip install" in command for command in commands)
    assert not any(command.endswith("-m benchmarks.learning") for command in commands)


def test_the_benchmarks_page_gives_the_script():
    assert "scripts/run-benchmarks.sh" in (REPO / "docs" / "benchmarks.md").read_text()
