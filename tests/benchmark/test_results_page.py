"""docs/results.md is what benchmarks/results_page.py renders from the committed figure files, so
no figure on it can be typed by hand, and the renderer reads what the benchmarks really write."""

from __future__ import annotations

import json
import shutil

from benchmarks import perf_envs, reasoning_gym_bridge
from benchmarks.results_page import BENCHMARKS, PAGE, RESULTS, main, render


def test_the_committed_page_is_what_the_committed_figure_files_render():
    assert PAGE.read_text() == render(), "run python -m benchmarks.results_page and commit docs/results.md"
    assert main(["--check"]) == 0


def test_a_changed_figure_changes_the_page(tmp_path):
    """The page follows the files: a figure edited in a results file shows up, a hand edit of the page does not pass."""
    shutil.copytree(RESULTS, tmp_path, dirs_exist_ok=True)
    learning = tmp_path / "learning" / "learning.json"
    figures = json.loads(learning.read_text())
    condition = next(iter(figures["envs"]["sudoku_v0"]["conditions"].values()))
    condition["summary"]["completions"] = 123_456_789
    learning.write_text(json.dumps(figures))
    assert "123456789" not in render() and "123456789" in render(tmp_path)


def test_every_benchmark_without_a_file_says_how_to_record_it(tmp_path):
    page = render(tmp_path)
    assert page.count("Not recorded in this checkout") == len(BENCHMARKS)
    assert all(f"`{bench.command}` writes `benchmarks/results/{bench.file}`" in page for bench in BENCHMARKS)


def test_the_page_renders_what_the_env_benchmarks_write(tmp_path):
    """Real (short) runs of two benchmarks: every env and dataset they measured is on the page, with its figures
    and the reason of each refused dataset."""
    envs = perf_envs.main(["--episodes", "1", "--copies", "5", "--out", str(tmp_path / "perf_envs.json")])
    datasets = reasoning_gym_bridge.main(["--datasets", "basic_arithmetic", "coin_flip", "--episodes", "1",
                                          "--copies", "5", "--out", str(tmp_path / "reasoning_gym_bridge.json")])
    page = render(tmp_path)
    for env_id, figures in envs["envs"].items():
        assert f"| `{env_id}` | {figures['steps_per_s']:,.0f} |" in page
    assert f"| `basic_arithmetic` | {datasets['datasets']['basic_arithmetic']['new_problem_ms']:,.1f} |" in page
    assert f"- `coin_flip`: {datasets['datasets']['coin_flip']['reason']}" in page
