"""How to install one of this package's optional extras (pyproject's ``optional-dependencies``).

The package is not on a package index: it is installed from a checkout (``pip install -e .``)
or from a wheel built from one: a hint that installs it by its name from an index fails. Every
message that tells a user to install an extra is worded here, for both ways; a test checks
that each extra named in a hint anywhere in the project exists in pyproject.toml.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "pettingllm-envs"


def wheel_name() -> str:
    """The file name of this version's wheel (setuptools' naming: dashes become underscores)."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "<version>"
    return f"{DISTRIBUTION.replace('-', '_')}-{version}-py3-none-any.whl"


def install_command(*extras: str) -> str:
    """The pip commands that add ``extras``, from a checkout and from the wheel."""
    names = ",".join(extras)
    return f"pip install -e '.[{names}]' in a checkout, or pip install '{wheel_name()}[{names}]' next to the wheel"


def extra_hint(*extras: str) -> str:
    """``the train extra: pip install -e '.[train]' in a checkout, or ...`` for error messages."""
    which = " and ".join(extras)
    return f"the {which} extra{'s' if len(extras) > 1 else ''}: {install_command(*extras)}"
