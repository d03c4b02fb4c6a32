"""tests/ mirrors the packages: a reader who knows where a module lives knows where its tests are.

================================  ===============================================================
``tests/envs/<subpackage>/``      ``pettingllm_envs/<subpackage>`` (core, code, math, planning, ...)
``tests/trainers/<layer>/``       ``trainers/<layer>`` (maths, models, generation, ... distributed)
``tests/adversarial/``            reward-integrity attacks on every env (a policy's view, not a module's)
``tests/benchmarks/``             ``benchmarks/`` (the scripts' own logic and the results page)
``tests/project/``                the repository as a whole: layering, import graph, docs, README, extras
================================  ===============================================================

Support modules shared across folders (the toy env, run configs, servers) sit at the top of tests/,
which ``conftest.py`` puts on ``sys.path``; test files hold tests only, so no test imports another
test file from a different folder.
"""

from __future__ import annotations

import ast

from repo_paths import REPO, TESTS

TOP_FOLDERS = {"envs", "trainers", "adversarial", "benchmarks", "project"}


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
        elif parts[0] == "trainers" and not (len(parts) == 3 and (REPO / "trainers" / parts[1]).is_dir()):
            misplaced.append(f"{path.relative_to(REPO)} (not in a trainers/<layer> folder)")
    assert not misplaced, f"test files outside the mirrored layout: {misplaced}"


def test_every_trainer_layer_has_its_tests():
    layers = {p.name for p in (REPO / "trainers").iterdir() if (p / "__init__.py").is_file()}
    tested = {p.relative_to(TESTS / "trainers").parts[0] for p in (TESTS / "trainers").rglob("test_*.py")}
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
