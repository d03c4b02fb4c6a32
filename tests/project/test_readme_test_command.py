"""The README's test command says what it needs from the system and offers a quick subset;
CI (``.ci/run``) runs the README's full command (``scripts/run-tests.sh``), verbatim."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from repo_paths import REPO as ROOT

README = (ROOT / "README.md").read_text()


def quick_start() -> list[str]:
    section = README[README.index("## Quick start"):README.index("## Environments")]
    block = re.search(r"```bash[^\n]*\n(.*?)```", section, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_quick_start_is_two_commands_and_ci_runs_the_test_command_verbatim():
    commands = quick_start()
    assert len(commands) == 2
    test_command = commands[1].split("  #")[0].strip()
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()
    script = (ROOT / test_command).read_text().splitlines()
    # the main suite, whole
    assert any(line.split("python -m pytest ")[0].strip() in ("", 'OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"')
               and "python -m pytest " in line and line.endswith('"$@"') for line in script)
    assert any("tests/envs/integrations/test_integration_openenv.py" in line for line in script)  # its own environment
    assert any("tests/trainer/generation/test_vllm_backend.py" in line for line in script)  # likewise


def test_the_readme_names_the_system_needs_of_the_test_command():
    section = README[README.index("## Quick start"):README.index("## Environments")]
    assert "C compiler" in section and "pycosat" in section  # reasoning-gym's pycosat builds from source
    assert "`redis-server`" in section and ".ci/run" in section  # the store tests skip without it
    # the reason each need is there still holds
    assert "pycosat needs a C compiler" in (ROOT / "pyproject.toml").read_text()
    assert "apt-get install" in (ROOT / ".ci" / "run").read_text() and "redis-server" in (ROOT / ".ci/run").read_text()


def test_the_quick_subset_the_readme_offers_runs_fewer_tests_and_not_the_slow_ones():
    section = README[README.index("## Quick start"):README.index("## Environments")]
    quick = re.search(r"`(python -m pytest [^`]+)`", section).group(1)
    argv = shlex.split(quick)[1:]  # after "python"
    collected = subprocess.run([sys.executable, *argv, "--collect-only", "-q", "tests/project/test_examples.py",
                                "tests/envs/cli/test_cli_slips.py", "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert "tests/project/test_examples.py::test_every_example_is_run" in ids  # quick tests stay in
    assert not any("test_example_runs_and_prints_its_results" in i for i in ids)  # slow ones are left out
