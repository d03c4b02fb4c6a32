"""No import circles in the repo: the module import graph of ``pettingllm_envs``, ``trainers`` and
``benchmarks`` has no cycle.

A circle means neither module of it can be read, tested or reused without the other, and which one
finishes initialising first depends on who is imported first. The fix is always the same: move the
piece both need into a small module below both.

How the graph is built, from the AST of every module (nothing is imported):

- A node is a module: ``a/b/c.py`` is ``a.b.c`` and ``a/b/__init__.py`` is ``a.b``.
- Every ``import`` statement is an edge, at any depth: top level, inside a function or a class, inside
  ``try``. An import inside a function still runs, only later, so it does not break a circle.
- Imports under ``if TYPE_CHECKING:`` are edges too, although they never run: the module still needs
  the other one to be read and type-checked, and a circle of them is the same knot of layers, only
  hidden from the interpreter (``trainers.algorithms.atgrpo.config -> trainers.generation.factory ->
  trainers.models.policy_set -> trainers.algorithms.atgrpo.config`` was one).
- ``import a.b.c`` and ``from a.b.c import name`` point at ``a.b.c``; ``from a.b import c`` points at
  ``a.b.c`` when ``c`` is a submodule, otherwise at ``a.b`` (``c`` is then a name from its
  ``__init__``). Relative imports are resolved against the importing module's package first.
- The parent packages that Python initialises on the way to ``a.b.c`` are not edges: a package's
  ``__init__`` that re-exports from its own submodules would otherwise form a circle with each of them.
  An explicit ``from a.b import name`` that reads the ``__init__`` is an edge like any other.
- Dynamic imports (``importlib.import_module`` of a string, a ``module:attr`` table) are not edges: a
  string is not always a module name. The envs' layering test checks those strings separately.
- Only imports of the three packages count; the standard library and third parties are not nodes.

A cycle is a strongly connected component of two or more modules, or a module that imports itself.

A second check adds what the first leaves out: the package initialisations on the way
(:func:`with_package_inits`). ``import a.b.c`` from outside package ``a.b`` runs ``a/b/__init__.py``
first, so if that ``__init__`` re-exports from a module that imports the importer, the two are in a
circle that no single import statement shows (``pettingllm_envs.seats -> .evaluation.openai_policy``
ran ``evaluation/__init__``, which imported ``evaluation.suite -> seats``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from repo_paths import REPO as ROOT

PACKAGES = ("pettingllm_envs", "trainers", "benchmarks")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``node``, written in module ``importer``, imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if node.level:
        # The package a relative import starts from: the module's own package, one more level up per dot.
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        base_parts = package[:len(package) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    found = set()
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            found.add(submodule)
        elif base in modules:
            found.add(base)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module name -> the modules (of ``packages`` under ``root``) it imports, in any way the module
    docstring counts."""
    files = {module_name(path, root): path for package in packages for path in sorted((root / package).rglob("*.py"))}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= _targets(node, name, is_package, modules)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, and the modules that
    import themselves, each sorted (Tarjan's algorithm, iterative so that deep graphs cannot overflow)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = lowlink[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    lowlink[node] = min(lowlink[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowlink[parent] = min(lowlink[parent], lowlink[node])
                if lowlink[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(sorted(component))
    return sorted(found)


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "{" + ", ".join(component) + "}: " + "; ".join(edges)


def test_the_repo_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert len(graph) > 100  # the scan sees all three packages
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(graph, component) for component in found)


def with_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus an edge from each importer to every package that its imports initialise, except
    the packages it sits in (Python has run their ``__init__`` before the importer's first line)."""
    extended: dict[str, set[str]] = {}
    for importer, targets in graph.items():
        parts = importer.split(".")
        enclosing = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        inits = {".".join(target.split(".")[:i]) for target in targets for i in range(1, target.count(".") + 1)}
        extended[importer] = targets | {package for package in inits if package in graph and package not in enclosing}
    return extended


def test_no_import_runs_a_package_init_that_leads_back_to_the_importer():
    graph = with_package_inits(import_graph(ROOT))
    found = cycles(graph)
    assert not found, "import cycles through a package's __init__:\n" + "\n".join(
        _describe(graph, component) for component in found)


def test_a_circle_through_a_package_init_is_found(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/seats.py": "def f():\n    from pkg.evaluation.client import C\n",
                      "pkg/evaluation/__init__.py": "from pkg.evaluation.suite import run\n",
                      "pkg/evaluation/client.py": "", "pkg/evaluation/suite.py": "from pkg.seats import f\n"})
    graph = import_graph(tmp_path, ("pkg",))
    assert cycles(graph) == []  # no statement closes the circle
    assert cycles(with_package_inits(graph)) == [["pkg.evaluation", "pkg.evaluation.suite", "pkg.seats"]]


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_graph_resolves_every_way_of_importing(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.base import VALUE\n",
        "pkg/base.py": "VALUE = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "",
        "pkg/sub/relative.py": "from . import leaf\nfrom .. import base\nfrom ..sub.leaf import x\n"
                               "from ..base import y\n",
        "pkg/sub/absolute.py": "import pkg.sub.leaf\nfrom pkg.sub import leaf\nfrom pkg import VALUE\n"
                               "import os, json\n",
        "pkg/sub/nested.py": "def f():\n    import pkg.base\nclass C:\n    from pkg.sub import leaf\n"
                             "try:\n    from pkg.sub import relative\nexcept ImportError:\n    pass\n",
        "pkg/sub/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.base\n"
                            "else:\n    from pkg.sub import nested\n",
        "pkg/sub/package_relative/__init__.py": "from . import inner\nfrom .inner import z\n",
        "pkg/sub/package_relative/inner.py": "",
        "other/__init__.py": "",
    })
    graph = import_graph(tmp_path, ("pkg", "other"))
    assert graph == {
        "pkg": {"pkg.base"},
        "pkg.base": set(),
        "pkg.sub": set(),
        "pkg.sub.leaf": set(),
        "pkg.sub.relative": {"pkg.sub.leaf", "pkg.base"},
        "pkg.sub.absolute": {"pkg.sub.leaf", "pkg"},
        "pkg.sub.nested": {"pkg.base", "pkg.sub.leaf", "pkg.sub.relative"},
        "pkg.sub.typed": {"pkg.base", "pkg.sub.nested"},
        "pkg.sub.package_relative": {"pkg.sub.package_relative.inner"},
        "pkg.sub.package_relative.inner": set(),
        "other": set(),
    }


@pytest.mark.parametrize(("files", "expected"), [
    ({"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n", "pkg/b.py": "def f():\n    from . import a\n"},
     [["pkg.a", "pkg.b"]]),
    ({"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n", "pkg/b.py": "import pkg.c\n", "pkg/c.py": "import pkg.a\n",
      "pkg/d.py": "import pkg.a\n", "pkg/e.py": "import pkg.e\n"},
     [["pkg.a", "pkg.b", "pkg.c"], ["pkg.e"]]),
    ({"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n",
      "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"},
     [["pkg.a", "pkg.b"]]),
    ({"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n", "pkg/b.py": "import pkg.c\n", "pkg/c.py": ""}, []),
])
def test_cycles_are_found_and_only_cycles(tmp_path, files, expected):
    _write(tmp_path, files)
    assert cycles(import_graph(tmp_path, ("pkg",))) == expected
