"""tests/ mirrors the packages: a reader who knows where a module lives knows where its tests are.

================================  ===============================================================
``tests/envs/<subpackage>/``      ``pettingllm_envs/<subpackage>`` (core, code, math, planning, ...)
``tests/trainer/<layer>/``       ``trainers/<layer>`` (profiling, maths, models, ... distributed)
``tests/adversarial/``            reward-integrity attacks on every env (a policy's view, not a module's)
``tests/benchmark/``             ``benchmarks/`` (the scripts' own logic and the results page)
``tests/project/``                the repository as a whole: layering, import graph, docs, README, extras
================================  ===============================================================

No folder takes a package's own name (``trainers``, ``benchmarks``): with tests/ on ``sys.path`` and
the package installed in editable mode, a folder of that name is found first, as a namespace
package, and ``import trainers.distributed`` fails in a subprocess or a Ray worker.

Support modules shared across folders (the toy env, run configs, servers) sit at the top of tests/,
which ``conftest.py`` puts on ``sys.path``; test files hold tests only, so no test imports another
test file from a different folder.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from repo_paths import REPO, TESTS

TOP_FOLDERS = {"envs", "trainer", "adversarial", "benchmark", "project"}


def all_test_files() -> list:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_sits_in_the_folder_of_what_it_tests():
    misplaced = []
    for path in all_test_files():
        parts = path.relative_to(TESTS).parts
        if parts[0] not in TOP_FOLDERS:
            misplaced.append(str(path.relative_to(REPO)))
        elif parts[0] == "envs" and len(parts) == 3 and not (REPO / "pettingllm_envs" / parts[1]).is_dir():
            misplaced.append(f"{path.relative_to(REPO)} (no pettingllm_envs/{parts[1]})")
        elif parts[0] == "trainer" and not (len(parts) == 3 and (REPO / "trainers" / parts[1]).is_dir()):
            misplaced.append(f"{path.relative_to(REPO)} (not in a tests/trainer/<layer> folder)")
    assert not misplaced, f"test files outside the mirrored layout: {misplaced}"


def test_every_trainer_layer_has_its_tests():
    layers = {p.name for p in (REPO / "trainers").iterdir() if (p / "__init__.py").is_file()}
    tested = {p.relative_to(TESTS / "trainer").parts[0] for p in (TESTS / "trainer").rglob("test_*.py")}
    assert layers - tested == set()


def test_test_file_names_are_unique_and_no_test_imports_a_test_from_another_folder():
    """Test folders are not packages (pytest puts each file's folder on sys.path), so two files of
    one name would shadow each other, and an import of a test file from another folder works only
    in some collection orders."""
    plain = [p for p in all_test_files() if "adversarial" not in p.parts]
    names = [p.name for p in plain]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    crossing = []
    for path in plain:
        for node in ast.walk(ast.parse(path.read_text())):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("test_") and not (path.parent / f"{module}.py").is_file():
                crossing.append(f"{path.relative_to(REPO)} imports {module}")
    assert not crossing, crossing


def test_no_test_folder_shadows_a_package():
    """A folder named like an importable package would be imported in its place (see the module docstring)."""
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert not folders & packages
    shadowing = []
    for name in sorted(folders - {"adversarial"}):  # adversarial/ is a package itself (its own __init__)
        found = subprocess.run([sys.executable, "-c", f"import importlib.util as u; print(u.find_spec({name!r}))"],
                               cwd="/", capture_output=True, text=True, check=True).stdout.strip()
        if found != "None":
            shadowing.append(f"{name}: {found}")
    assert not shadowing, shadowing
