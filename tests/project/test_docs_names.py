"""Every name the docs give a reader exists: each repository path and each dotted name of
``trainers``/``pettingllm_envs`` in README.md, docs/ and the docstrings of the packages resolves, so
a moved module or a renamed class fails here instead of sending a reader to nothing. Every name the
README gives a user is accepted as written, and a game that docs/bridges.md says is left out is
refused with its reason, not as an unknown name."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from repo_paths import REPO as ROOT

import pettingllm_envs
from pettingllm_envs.cli import main

README = (ROOT / "README.md").read_text()
BRIDGES = (ROOT / "docs" / "bridges.md").read_text()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: a path inside the repository as the docs write it (``trainers/models/spec.py``, ``code/stdio_*_problems.py``)
REPO_PATH = re.compile(r"(?<![\w/.-])((?:trainers|pettingllm_envs|benchmarks|tests|scripts|examples|recipes)"
                       r"/[\w./*-]*\w)")
#: a dotted name of the two packages (``trainers.generation.protocol.Generation``)
DOTTED = re.compile(r"(?<![\w.])((?:trainers|pettingllm_envs)(?:\.\w+)+)")
#: ``PolicySet.encode_prompt``, ``TrainConfig.seats``: a class's attribute named by the class alone
CLASS_ATTRIBUTE = re.compile(r"(?<![\w.])([A-Z]\w*[a-z]\w*)\.([a-z_]\w*)\b")
#: written by the benchmarks when they run (git-ignored), so not in a checkout
GENERATED = "benchmarks/results/"


def docstrings(package: str) -> list[tuple[str, str]]:
    """(``path:line``, docstring) of every module, class and function of a package, read without importing it."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    found.append((f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc))
    return found


def path_exists(path: str, near: Path) -> bool:
    """``path`` from the repository root or, for a relative link, from the doc's own folder; a ``*``
    matches as in a shell and a module may be named without ``.py``."""
    for base in (ROOT, near):
        if "*" in path and any(base.glob(path)):
            return True
        if (base / path).exists() or (base / f"{path}.py").exists():
            return True
    return False


def module_file(module: str) -> Path | None:
    """The source file of a module of this repository (``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``)."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@functools.cache
def module_names(module: str) -> dict[str, ast.AST]:
    """What a module of the repository defines or imports at its top level: name -> its node."""
    path = module_file(module)
    return names_in(ast.parse(path.read_text()).body) if path else {}


def names_in(body: list[ast.stmt]) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING imports, optional imports
            names.update(names_in(node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])))
    return names


def class_has(module: str, node: ast.ClassDef, attr: str) -> bool:
    """``attr`` is defined in the class body, assigned as ``self.<attr>`` in a method, or found the
    same way in a base class of this repository; a base from elsewhere (torch, the standard
    library) is not read, and then the name is accepted."""
    if attr in names_in(node.body):
        return True
    for sub in ast.walk(node):
        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
            sub, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
               and t.attr == attr for t in targets):
            return True
    for base in node.bases:
        if isinstance(base, ast.Subscript):  # Generic[T], Protocol[T]
            base = base.value
        if not isinstance(base, ast.Name):
            return True
        found = lookup(module, base.id)
        if found is None:
            return True
        if class_has(*found, attr):
            return True
    return False


def lookup(module: str, name: str) -> tuple[str, ast.ClassDef] | None:
    """The class ``name`` means in ``module`` (defined there, or imported from a module of the
    repository), or None when it comes from elsewhere."""
    node = module_names(module).get(name)
    if isinstance(node, ast.ClassDef):
        return module, node
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and module_file(node.module):
        original = next(a.name for a in node.names if (a.asname or a.name) == name)
        return lookup(node.module, original)
    return None


def resolves(name: str) -> bool:
    """The longest prefix of ``name`` that is a module of the repository, then each further part
    defined in it, read from the source (nothing imported): a module-level name (an imported one
    counts), then a class's attribute, method, field or ``self.<name>`` assignment (its bases of
    this repository included)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module_file(module) is not None:
            break
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    node = module_names(module).get(rest[0])
    if node is None:
        return False
    if len(rest) == 1:
        return True
    found = lookup(module, rest[0])
    if found is None:  # a function, a value or a class from elsewhere: its attributes are not read here
        return True
    return class_has(*found, rest[1])  # a class's attribute; deeper parts are not read


@functools.cache
def repository_classes() -> dict[str, tuple[str, ast.ClassDef]]:
    """Every class of the two packages whose name is defined once: name -> (module, its node)."""
    found: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for package in ("pettingllm_envs", "trainers"):
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for node in module_names(module).values():
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append((module, node))
    return {name: places[0] for name, places in found.items() if len({m for m, _ in places}) == 1}


def stale_names(sources: list[tuple[str, str, Path]]) -> list[str]:
    """``where: name`` for each path, dotted name or ``Class.attribute`` of a class of the packages
    in ``sources`` ((where, text, folder)) that does not resolve."""
    stale = []
    for where, text, folder in sources:
        for path in REPO_PATH.findall(text):
            if not path.startswith(GENERATED) and not path_exists(path, folder):
                stale.append(f"{where}: {path}")
        stale += [f"{where}: {name}" for name in DOTTED.findall(text) if not resolves(name)]
        for cls, attr in CLASS_ATTRIBUTE.findall(text):
            if cls in repository_classes() and not class_has(*repository_classes()[cls], attr):
                stale.append(f"{where}: {cls}.{attr}")
    return stale


def test_every_path_and_dotted_name_in_the_docs_exists():
    assert stale_names([(str(doc.relative_to(ROOT)), doc.read_text(), doc.parent) for doc in DOCS]) == []


@pytest.mark.parametrize("package", ["pettingllm_envs", "trainers", "benchmarks"])
def test_every_path_and_dotted_name_in_the_docstrings_exists(package):
    assert stale_names([(where, doc, ROOT) for where, doc in docstrings(package)]) == []


def _env_row(env_id: str) -> str:
    return next(line for line in README.splitlines() if line.startswith(f"| `{env_id}`"))


def readme_textarena_games() -> list[str]:
    """The games the env table names for textarena_v0 (``game=``: ConnectFour, Othello, ...)."""
    listed = re.search(r"`game=`: ([^;]+)", _env_row("textarena_v0")).group(1)
    return [name.strip() for name in listed.split(",") if name.strip() not in ("", "...")]


def readme_left_out_games() -> list[str]:
    """The games docs/bridges.md lists as left out (``Left out (32 ...): 6 do not import ... (Checkers, ...)``)."""
    section = BRIDGES[BRIDGES.index("Left out (32"):BRIDGES.index("BabyAiText has no")]
    return [name.strip() for group in re.findall(r"\(([A-Z][^)]*)\)", section) for name in group.split(",")]


def test_the_readme_lists_the_games_it_names():
    assert len(readme_textarena_games()) == 8 and "ConnectFour" in readme_textarena_games()
    assert len(readme_left_out_games()) == 6 + 9 + 4 + 2 + 3


@pytest.mark.parametrize("game", readme_textarena_games())
def test_a_game_named_as_in_the_readme_plays(game):
    env = pettingllm_envs.make("textarena_v0", game=game)
    assert env.unwrapped.config.game == f"{game}-v0"  # the same env as the versioned id, so the same episodes
    env.reset(seed=0)
    env.close()


def test_the_readme_name_runs_from_the_command_line(capsys):
    assert main(["run", "textarena_v0", "--episodes", "1", "--env-kwargs", '{"game": "ConnectFour"}']) == 0
    assert "textarena_v0" in capsys.readouterr().out


@pytest.mark.parametrize("game", readme_left_out_games())
def test_a_left_out_game_is_refused_with_its_reason(game):
    with pytest.raises(ValueError, match=rf"TextArena game '{game}-v0' is not available: \S+"):
        pettingllm_envs.make("textarena_v0", game=game)


def test_a_one_player_puzzle_is_refused_with_the_reason(capsys):
    assert main(["run", "textarena_v0", "--env-kwargs", '{"game": "Sudoku"}']) == 2
    assert capsys.readouterr().err.strip() == (
        "pettingllm: error: textarena_v0 config: TextArena game 'Sudoku-v0' is not available: it is a one-player "
        "puzzle, and textarena_v0 plays games between two players")


def test_a_misspelt_game_still_gets_the_close_match(capsys):
    assert main(["run", "textarena_v0", "--env-kwargs", '{"game": "ConectFour"}']) == 2
    assert "did you mean ConnectFour-v0?" in capsys.readouterr().err
