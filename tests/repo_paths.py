"""Where the repository and the test support modules are, for tests at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

#: The tests/ folder: the shared support modules (toy env, helpers) live at its top.
TESTS = Path(__file__).resolve().parent
#: The repository root (pyproject.toml, docs/, benchmarks/, recipes/).
REPO = TESTS.parent
