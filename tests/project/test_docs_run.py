"""Docs that run: every Python and shell code block of README.md and docs/ is executed here, the
output each shows is checked, and every YAML config block is loaded into the config class it is
for, so a renamed API, option or changed result fails a test instead of a reader. (The scripts
of examples/ run in ``tests/project/test_examples.py``.)

Python blocks are found and run by pytest-examples. A block shows what it prints as ``#> ``
lines under the ``print`` (pytest-examples' form); such a block runs with
``EvalExample.run_print_check``, so any change of that output fails, and
``pytest tests/project/test_docs_run.py --update-examples`` writes the lines in place (for every block
that prints: a block whose output is not stable, e.g. timings, shows none). Shell blocks
use the same marker: ``#> `` lines under a command (comments, so the block still pastes into a
shell) must appear in the block's output (stdout and stderr), in order, other lines may come
between; runs of spaces compare as one and ``...`` stands for any text (timings, paths).

A block that cannot run in a test (it installs packages, needs a GPU, a cluster, a server or a
hub download) says so in its fence, ``test="skip" reason="..."`` (pytest-examples' prefix
settings, read the same way for the shell blocks); ``test_every_block_is_run_or_says_why_not``
keeps each such marker honest about its reason. A block that takes more than a few seconds
says ``test="slow"``: it runs with the ``slow`` tests. Diagrams, trees and pseudocode are
``text`` blocks: prose, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples
from repo_paths import REPO as ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # docs/ and its subfolders
#: ```lang settings\n body ``` (the settings: ``key="value"`` pairs, as pytest-examples reads them)
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: what the suite does with each block language; a block of any other language fails the suite
HANDLED = {"python": "run, shown output checked", "bash": "run, shown output checked",
           "yaml": "loaded into its config class", "text": "prose (diagrams, trees, pseudocode), not run"}
#: pytest-examples' output marker, used the same way in shell blocks
OUTPUT_MARKER = "#> "


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    settings: dict[str, str]
    body: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(language: str | None = None) -> list[Block]:
    """The fenced blocks of the docs, of one language (``""`` for an unlabelled fence) or all."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            if language is None or match.group(1) == language:
                settings = dict((k, v) for k, _, v in re.findall(r"(\w+)=([\"'])(.+?)\2", match.group(2)))
                found.append(Block(path, text.count("\n", 0, match.start()) + 1, match.group(1), settings,
                                   match.group(3)))
    return found


def fence_settings(block: CodeExample | Block) -> dict[str, str]:
    return block.prefix_settings() if isinstance(block, CodeExample) else block.settings


def runnable(examples: list) -> list:
    return [e for e in examples if fence_settings(e).get("test") != "skip"]


def as_params(examples: list) -> list:
    """The runnable blocks as test parameters, ``test="slow"`` ones marked slow."""
    return [pytest.param(e, id=str(e), marks=[pytest.mark.slow] if fence_settings(e).get("test") == "slow" else [])
            for e in runnable(examples)]


PYTHON = list(find_examples(*map(str, DOCS)))
SHELL = blocks("bash")


def test_every_block_is_run_or_says_why_not():
    unhandled = [f"{b} ```{b.language}" for b in blocks() if b.language not in HANDLED]
    assert not unhandled, f"label each fence with one of {HANDLED}: {unhandled}"
    misspelt = [str(b) for b in [*PYTHON, *SHELL] if fence_settings(b).get("test", "slow") not in ("skip", "slow")]
    assert not misspelt, f'test="..." is "skip" or "slow": {misspelt}'
    skipped = [(str(b), fence_settings(b)) for b in [*PYTHON, *SHELL] if fence_settings(b).get("test") == "skip"]
    assert skipped  # the installs and GPU recipes are marked
    assert all(len(settings.get("reason", "")) > 10 for _, settings in skipped), skipped
    assert len(runnable(PYTHON)) >= 2 and len(runnable(SHELL)) >= 2
    # the checked outputs are in place: a lost marker would turn its block's check into a plain run
    assert sum(OUTPUT_MARKER in e.source for e in runnable(PYTHON)) >= 1
    assert sum(OUTPUT_MARKER in b.body for b in runnable(SHELL)) >= 2


@pytest.mark.parametrize("example", as_params(PYTHON))
def test_python_block_runs(example: CodeExample, eval_example: EvalExample, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    eval_example.set_config(line_length=120)  # the project's line length: output up to ~110 characters stays one line
    if eval_example.update_examples:
        eval_example.run_print_update(example)
    elif OUTPUT_MARKER in example.source:
        eval_example.run_print_check(example)
    else:
        eval_example.run(example)  # it shows no output (none, or none that is stable)


def expected_output(body: str) -> list[str]:
    """The ``#> `` lines of a shell block, without the marker."""
    return [line.strip().removeprefix(OUTPUT_MARKER.strip()).removeprefix(" ") for line in body.splitlines()
            if line.strip() == OUTPUT_MARKER.strip() or line.strip().startswith(OUTPUT_MARKER)]


def line_pattern(expected: str) -> re.Pattern:
    """A whole output line like ``expected``: runs of spaces as one, ``...`` as any text."""
    parts = [r"\s+".join(map(re.escape, part.split())) for part in expected.split("...")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*")


def missing_output(expected: list[str], output: str) -> list[str]:
    """The expected lines ``output`` lacks, each looked for after the previous one's match."""
    lines = output.splitlines()  # also splits progress bars' carriage returns
    position, missing = 0, []
    for wanted in expected:
        pattern = line_pattern(wanted)
        found = next((i for i in range(position, len(lines)) if pattern.fullmatch(lines[i])), None)
        if found is None:
            missing.append(wanted)
        else:
            position = found + 1
    return missing


def test_output_matching_rules():
    output = "env  success\n------\nrun: 50%\rrun: 100%\ntictactoe_v0  1.00   12.3 ms\nsudoku_v0  1.00  4.0 ms\n"
    assert missing_output(["env success", "tictactoe_v0 1.00 ... ms", "sudoku_v0 1.00 ..."], output) == []
    assert missing_output(["tictactoe_v0 0.50 ... ms"], output) == ["tictactoe_v0 0.50 ... ms"]
    assert missing_output(["sudoku_v0 1.00 ...", "tictactoe_v0 1.00 ..."], output) == ["tictactoe_v0 1.00 ..."]
    assert missing_output(["success"], output) == ["success"]  # a whole line, not a piece of one
    assert missing_output(["run: 100%"], output) == []


@pytest.mark.parametrize("block", as_params(SHELL))
def test_shell_block_runs(block: Block, tmp_path):
    """Each command as a reader types it, from a fresh directory (relative paths land there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout's packages, as after pip install -e .
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, f"{block}\n{proc.stdout[-5000:]}"
    missing = missing_output(expected_output(block.body), proc.stdout)
    assert not missing, f"{block}: the output lacks {missing}\n{proc.stdout[-5000:]}"


def yaml_configs() -> list[tuple[str, str, dict]]:
    """(where, config class, mapping) for every YAML block of the docs: a block may hold
    several files, each headed ``# run.yaml`` (TrainConfig) or ``# layout.yaml`` (DistributedConfig)."""
    import yaml

    found = []
    for block in blocks("yaml"):
        parts = re.split(r"^# (run|layout)\.yaml.*$", block.body, flags=re.MULTILINE)
        for kind, text in zip(parts[1::2], parts[2::2], strict=True):
            found.append((f"{block} {kind}.yaml", kind, yaml.safe_load(text) or {}))
    return found


@pytest.mark.parametrize(("where", "kind", "values"), yaml_configs(), ids=[c[0] for c in yaml_configs()])
def test_yaml_block_is_a_valid_config(where, kind, values):
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.distributed.config import DistributedConfig
    from trainers.harness.fields import check_field

    if kind == "run":  # by section or by name; an unknown key or a bad value raises ConfigError naming it
        TrainConfig().with_values(values, source=where).check_fields()
        return
    fields = set(DistributedConfig.__dataclass_fields__)
    assert set(values) <= fields, f"{where}: unknown fields {sorted(set(values) - fields)}"
    for name, value in values.items():
        check_field(name, value, DistributedConfig)  # raises ConfigError naming the field
