"""Commands as plug-ins: discovery through the ``pettingllm.commands`` entry points of installed
distributions (real ``importlib.metadata``, a real dist-info on ``sys.path``), and the layering
it buys: no module of ``pettingllm_envs`` imports ``trainers``, and the env commands work
without it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pettingllm_envs

PACKAGE = Path(pettingllm_envs.__file__).parent
#: A module reference to ``trainers`` written as a string (``importlib.import_module("trainers.x")``,
#: ``"trainers.x:main"``): the lazy way to import it by name.
TRAINERS_REFERENCE = re.compile(r"trainers(\.\w+)*(:\w+(\.\w+)*)?")

HELLO_PLUGIN = '''
from pettingllm_envs.commandline.errors import ArgumentParser, UsageError
from pettingllm_envs.commandline.commands import Command


def build_parser(prog="pettingllm hello"):
    parser = ArgumentParser(prog=prog, description="Greet someone.")
    parser.add_argument("--name", default="world", help="who to greet")
    return parser


def main(argv):
    args = build_parser().parse_args(argv)
    if not args.name.strip():
        raise UsageError("--name must not be empty")
    print(f"hello, {args.name}")
    return 0


HELLO = Command(summary="greet someone (a third-party command)", main="hello_plugin:main",
                parser="hello_plugin:build_parser")
NEEDY = Command(summary="needs a library that is not installed", main="hello_plugin:main",
                needs=("no_such_library_anywhere",))
NOT_A_COMMAND = "a string"
'''

ENTRY_POINTS = """[pettingllm.commands]
hello = hello_plugin:HELLO
broken = no_such_module_anywhere:COMMAND
wrong-type = hello_plugin:NOT_A_COMMAND
needy = hello_plugin:NEEDY
run = hello_plugin:HELLO
"""


@pytest.fixture(scope="module")
def third_party_site(tmp_path_factory) -> Path:
    """A folder that holds a third-party distribution as pip installs one: its module and its
    ``.dist-info`` with ``METADATA`` and ``entry_points.txt``."""
    site = tmp_path_factory.mktemp("site")
    (site / "hello_plugin.py").write_text(HELLO_PLUGIN)
    info = site / "hello_cmd-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-cmd\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


#: Runs each argv list of a JSON list through ``pettingllm``'s main in this one interpreter and
#: prints, as JSON, each one's exit status, stdout and stderr (one process: every start costs seconds).
DRIVER = """
import contextlib, io, json, sys
from pettingllm_envs.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:  # --help
            status = exit_.code
    results.append([status, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def pettingllm(site: Path | None, *invocations: list[str], prelude: str = "") -> list[tuple[int, str, str]]:
    """(exit status, stdout, stderr) of each ``pettingllm`` invocation, run one after the other in
    one fresh interpreter with ``site`` on ``sys.path`` (PYTHONPATH, as an installed package is)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, "-c", prelude + DRIVER, json.dumps(invocations)], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    return [tuple(result) for result in json.loads(proc.stdout)]


@pytest.fixture(scope="module")
def third_party(third_party_site) -> dict[str, tuple[int, str, str]]:
    """What ``pettingllm`` does with the third-party distribution installed."""
    invocations = {"help": ["--help"], "hello": ["hello", "--name", "Ada"], "hello help": ["hello", "--help"],
                   "typo": ["hello", "--nme", "x"], "refused": ["hello", "--name", " "], "broken": ["broken"],
                   "needy": ["needy"],
                   "run": ["run", "tictactoe_v0", "--episodes", "1"]}
    return dict(zip(invocations, pettingllm(third_party_site, *invocations.values()), strict=True))


def test_a_third_party_command_is_discovered_listed_and_run(third_party):
    status, out, _ = third_party["help"]
    listing = " ".join(out.split())  # argparse wraps the summaries
    assert status == 0 and "hello greet someone (a third-party command)" in listing
    assert "train train LLM policies" in listing  # the trainer's commands are plug-ins too
    assert third_party["hello"][:2] == (0, "hello, Ada\n")
    status, out, _ = third_party["hello help"]
    assert status == 0 and out.startswith("usage: pettingllm hello") and "who to greet" in out


def test_a_third_party_commands_mistakes_are_one_line(third_party):
    for name, expected in (("typo", "did you mean '--name'"), ("refused", "--name must not be empty"),
                           ("needy", "this command needs no_such_library_anywhere, which is not installed")):
        status, _, err = third_party[name]
        *warnings, error = err.splitlines()  # the warning: this site also has a plug-in named "run"
        assert status == 2 and error.startswith("pettingllm: error: ") and expected in error, err
        assert all(w.startswith("pettingllm: warning: command 'run'") for w in warnings)


def test_broken_and_clashing_plugins_leave_every_other_command_working(third_party):
    _, out, err = third_party["help"]
    listing = " ".join(out.split())
    assert "broken (unavailable: cannot load no_such_module_anywhere:COMMAND (ModuleNotFoundError" in listing
    assert ("wrong-type (unavailable: hello_plugin:NOT_A_COMMAND is a str, "
            "not a pettingllm_envs.commandline.commands.Command)") in listing
    # A plug-in named like a built-in command is skipped, and says so; the built-in runs.
    assert "pettingllm: warning: command 'run' of hello_plugin:HELLO is skipped" in err
    status, out, _ = third_party["run"]
    assert status == 0 and "tictactoe_v0  1.00" in out
    status, _, err = third_party["broken"]
    assert status == 2 and err.splitlines()[-1].startswith(
        "pettingllm: error: command 'broken' is unavailable: cannot load no_such_module_anywhere:COMMAND")


def test_the_env_commands_work_with_trainers_unimportable():
    prelude = "import sys; sys.modules['trainers'] = None  # as if only the env package were installed\n"
    listed, ran, top, train = pettingllm(None, ["list"], ["run", "plan_path_v0", "--episodes", "2"], ["--help"],
                                         ["train", "--steps", "1"], prelude=prelude)
    assert listed[0] == 0 and "plan_path_v0" in listed[1], listed[2]
    assert ran[0] == 0 and "plan_path_v0  1.00" in ran[1], ran[2]
    assert "train (unavailable: cannot load trainers.cli.commands:TRAIN " in " ".join(top[1].split())
    assert train[0] == 2 and train[2].count("\n") == 1
    assert train[2].startswith("pettingllm: error: command 'train' is unavailable: cannot load trainers.cli.commands")


def test_listing_the_commands_loads_no_model_library():
    """Every plug-in's :class:`Command` is loaded on every start (for ``--help``): the module that
    declares it must not import torch or transformers, or ``pettingllm list`` would pay for them."""
    code = ("import sys\nfrom pettingllm_envs.cli.plugins import discover\nplugins = discover()\n"
            "assert all(p.command is not None for p in plugins), [p.error for p in plugins if p.command is None]\n"
            "heavy = {'torch', 'transformers', 'vllm'} & {name.split('.')[0] for name in sys.modules}\n"
            "assert not heavy, sorted(p.entry_point.value for p in plugins)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _trainer_references(path: Path) -> list[str]:
    """How ``path`` imports ``trainers`` (any import statement, at any depth) or names one of
    its modules in a string constant."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "trainers"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "trainers":
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and TRAINERS_REFERENCE.fullmatch(
                node.value):
            found.append(f"string {node.value!r}")
    return found


def test_no_module_of_the_env_package_imports_trainers():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40  # the scan sees the whole package
    found = {str(module.relative_to(PACKAGE.parent)): _trainer_references(module) for module in modules}
    assert {module: refs for module, refs in found.items() if refs} == {}


def test_the_scan_finds_every_way_of_importing_trainers(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import trainers.algorithms.atgrpo.train\ndef f():\n"
                      "    from trainers.harness.plot import plot_run\n"
                      "import importlib\nimportlib.import_module('trainers.algorithms.variants')\n"
                      "ENTRY = 'trainers.x:main'\n"
                      "DOC = 'the trainers package, trainers.algorithms.atgrpo.train'\nimport trainers_other\n")
    assert sorted(_trainer_references(sample)) == [
        "from trainers.harness.plot import ...", "import trainers.algorithms.atgrpo.train",
        "string 'trainers.algorithms.variants'",
        "string 'trainers.x:main'"]
