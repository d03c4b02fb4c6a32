"""Docs that run: every Python and shell code block of README.md and docs/ is executed here, and
every YAML config block is loaded into the config class it is for, so a renamed API or option
fails a test instead of a reader. (The scripts of examples/ run in ``tests/test_examples.py``.)

Python blocks are found and run by pytest-examples. A block that cannot run in a test (it
installs packages, needs a GPU, a cluster, a server or a hub download) says so in its fence,
``test="skip" reason="..."`` (pytest-examples' prefix settings, used for the shell blocks too),
and ``test_every_skipped_block_says_why`` keeps each such marker honest about its reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ```lang settings\n body ``` (the settings: ``key="value"`` pairs, as pytest-examples reads them)
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    settings: dict[str, str]
    body: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(language: str) -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == language:
                settings = dict((k, v) for k, _, v in re.findall(r"(\w+)=([\"'])(.+?)\2", match.group(2)))
                found.append(Block(path, text.count("\n", 0, match.start()) + 1, language, settings, match.group(3)))
    return found


def runnable(examples: list) -> list:
    return [e for e in examples if (e.prefix_settings() if isinstance(e, CodeExample) else e.settings).get("test")
            != "skip"]


PYTHON = list(find_examples(*map(str, DOCS)))
SHELL = blocks("bash")


def test_every_skipped_block_says_why():
    skipped = [(str(e.path), e.prefix_settings()) for e in PYTHON if e.prefix_settings().get("test") == "skip"]
    skipped += [(str(b), b.settings) for b in SHELL if b.settings.get("test") == "skip"]
    assert skipped  # the installs and GPU recipes are marked
    assert all(len(settings.get("reason", "")) > 10 for _, settings in skipped), skipped
    # every block that runs is a block the suite runs: nothing is left out unmarked
    assert len(runnable(PYTHON)) >= 2 and len(runnable(SHELL)) >= 1


@pytest.mark.parametrize("example", runnable(PYTHON), ids=str)
def test_python_block_runs(example: CodeExample, eval_example: EvalExample, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    eval_example.run(example)


@pytest.mark.slow
@pytest.mark.parametrize("block", runnable(SHELL), ids=str)
def test_shell_block_runs(block: Block, tmp_path):
    """Each command as a reader types it, from a fresh directory (relative paths land there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout's packages, as after pip install -e .
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{block}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


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
    from trainers.config import TrainConfig, check_field
    from trainers.distributed.config import DistributedConfig

    cls = TrainConfig if kind == "run" else DistributedConfig
    fields = set(cls.__dataclass_fields__)
    assert set(values) <= fields, f"{where}: unknown fields {sorted(set(values) - fields)}"
    for name, value in values.items():
        check_field(name, value, cls)  # raises ConfigError naming the field
