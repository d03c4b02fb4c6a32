"""Every install hint a user can read works: it names an extra that pyproject.toml defines, and
it installs from a checkout or a wheel, never from a package index this project is not on."""

from __future__ import annotations

import re

from repo_paths import REPO as ROOT

from pettingllm_envs.extras import extra_hint, install_command, wheel_name

#: What a user reads: the packages' messages and docstrings, the examples, benchmarks and docs.
SCANNED = [*ROOT.glob("pettingllm_envs/**/*.py"), *ROOT.glob("trainers/**/*.py"), *ROOT.glob("examples/*.py"),
           *ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md",
           *ROOT.glob("benchmarks/**/*.md")]
#: ``[extras]`` in a pip command: ``'.[train]'``, ``".[all]"``, ``'<wheel>[ray]'``, ``pettingllm-envs[trl]``
PIP_EXTRAS = re.compile(r"pip install[^\n`]*?[.\w'\"-]\[([\w,-]+)\]")
#: prose: ``the train extra``, ``the `ray` extra``
NAMED_EXTRA = re.compile(r"\bthe `?([a-z][\w-]*)`? extra\b")


def defined_extras() -> set[str]:
    """The extras of pyproject.toml's ``[project.optional-dependencies]`` table (``name = [``)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+) = \[", table, re.MULTILINE))


def hints() -> list[tuple[str, str]]:
    """(where, extra) for every extra a hint names."""
    found = []
    for path in SCANNED:
        text = path.read_text()
        for pattern in (PIP_EXTRAS, NAMED_EXTRA):
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found += [(f"{path.relative_to(ROOT)}:{line}", extra) for extra in match.group(1).split(",")]
    return found


def test_every_extra_named_in_a_hint_exists():
    found = hints()
    assert {"train", "ray", "trl", "textarena", "reasoning-gym", "all"} <= defined_extras()
    assert len(found) > 10  # the scan sees the hints (README, bridges, commands, examples)
    undefined = [(where, extra) for where, extra in found if extra not in defined_extras()]
    assert not undefined, f"hints name extras pyproject.toml does not define: {undefined}"


def test_no_hint_installs_the_package_from_an_index():
    """``pettingllm-envs`` is not on PyPI: ``pip install 'pettingllm-envs[train]'`` fails for every user."""
    from_index = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path in SCANNED
                  for m in re.finditer(r"pip install [^\n]*?\bpettingllm-envs\b", path.read_text())]
    assert not from_index


def test_the_hint_gives_the_checkout_and_the_wheel_command():
    assert re.fullmatch(r"pettingllm_envs-\d+\.\d+\.\d+.*-py3-none-any\.whl", wheel_name())
    assert install_command("train", "ray") == (f"pip install -e '.[train,ray]' in a checkout, "
                                               f"or pip install '{wheel_name()}[train,ray]' next to the wheel")
    assert extra_hint("train").startswith("the train extra: pip install -e '.[train]' in a checkout")
    assert extra_hint("train", "ray").startswith("the train and ray extras: pip install -e '.[train,ray]'")
