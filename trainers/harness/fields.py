"""Checking one config field: the coercion and range rules every trainer config shares.

A value comes from YAML (``1e-6`` read as a string, ``yes`` as a bool) or the command line
(always a string); :func:`check_field` turns it into the field's declared type (read from the
class's annotations, :func:`field_types`) and checks it against the field's :class:`Bound`
(the class's ``bounds``) or its set of choices (a ``Literal``), raising one
:class:`~trainers.harness.errors.ConfigError` line that names the field, the value and what is
allowed. AT-GRPO's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`, M-GRPO's config and
the distributed layout's config all validate through it, so one mistake reads the same
whichever command made it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from pettingllm_envs.commandline.options import bool_word
from trainers.harness.errors import ConfigError
from trainers.models.spec import DEVICE_PATTERN, DTYPES


@dataclass(frozen=True)
class Bound:
    """An interval for a numeric field: ``low <= value <= high`` (``<`` on an open side).
    ``math.inf`` as ``high`` with ``high_open=False`` admits infinity (``max_grad_norm: .inf``:
    no clipping); NaN is never inside."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = True

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self, *, integer: bool = False) -> str:
        if self.high == math.inf:
            text = f"{'>' if self.low_open else '>='} {self.low:g}"
            if integer:
                return text
            return text + (" and finite" if self.high_open else " (inf allowed)")
        if self.low == -math.inf:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The declared type of every field of config dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


#: String fields that must not be empty (``model`` has its own message in ``validate``).
_NON_EMPTY = ("env", "split", "eval_split", "run_dir", "lora_target_modules")


def _fail(name: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"config field {name!r}: got {value!r} ({type(value).__name__}); allowed: {allowed}")


def _out_of_range(name: str, value: Any, allowed: str) -> ConfigError:
    """A number outside its range, shown as written: ``--steps -1`` and ``steps: -1`` both read
    "got -1" (the command line's text is a number, not the string '-1')."""
    shown = value.strip() if isinstance(value, str) else repr(value)
    return ConfigError(f"config field {name!r}: got {shown}; allowed: {allowed}")


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and (word := bool_word(value)) is not None:
        return word
    raise _fail(name, value, "true or false (also yes/no, on/off, 1/0)")


def _as_number(name: str, value: Any, tp: type) -> float | int:
    number: float | int | None = None
    if isinstance(value, bool):  # bool is an int subclass; `steps: true` is a mistake, not 1
        number = None
    elif isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = int(text) if tp is int else float(text)
        except ValueError:
            try:
                number = float(text)  # "1e3" for an int field
            except ValueError:
                number = None
    if number is None:
        raise _fail(name, value, "an integer" if tp is int else "a number such as 1e-6")
    if tp is float:
        return float(number)
    if isinstance(number, float) and not number.is_integer():
        raise _fail(name, value, "an integer")
    return int(number)


def _as_yaml(name: str, value: Any, kind: type) -> Any:
    """A mapping or list given as YAML text (the command line) is parsed first."""
    if isinstance(value, str):
        import yaml

        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as error:
            raise _fail(name, value, f"YAML ({' '.join(str(error).split())})") from None
        if value is None:
            value = kind()
    if not isinstance(value, kind):
        raise _fail(name, value, "a YAML mapping like '{rows: 4}'" if kind is dict else "a YAML list like '[a, b]'")
    return value


class BoundedConfig(Protocol):
    """A config dataclass whose class maps each numeric field to its :class:`Bound` in ``bounds``."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    bounds: ClassVar[Mapping[str, Bound]]


class ValidatedConfig(BoundedConfig, Protocol):
    """A config class of this module's machinery: a :class:`BoundedConfig` with ``validate()``."""

    def validate(self) -> None: ...


def check_field(name: str, value: Any, cls: type, bounds: Mapping[str, Bound] | None = None) -> Any:
    """``value`` coerced to the type of field ``name`` of config class ``cls`` and checked
    against its range (``cls.bounds``) (pure); raises :class:`ConfigError` naming the field, the
    value and what is allowed (for a choice, the closest allowed value too). ``cls`` is any
    config dataclass; the ranges of its numeric fields come from ``bounds``, else from the
    class's own ``bounds`` (a :class:`BoundedConfig`). A section of a config tree
    (:mod:`trainers.harness.config_tree`) is checked against its tree's table."""
    tp = field_types(cls)[name]
    args = typing.get_args(tp)
    if typing.get_origin(tp) is Literal:
        if value not in args:
            from pettingllm_envs.commandline.errors import did_you_mean

            raise _fail(name, value, "one of " + ", ".join(args) + did_you_mean(value, args))
        return value
    if tp is bool:
        return _as_bool(name, value)
    if tp in (int, float):
        number = _as_number(name, value, tp)
        table = typing.cast("type[BoundedConfig]", cls).bounds if bounds is None else bounds
        if name not in table:
            raise TypeError(f"numeric field {name!r} of {cls.__name__} has no entry in its bounds")
        bound = table[name]
        if number not in bound:
            raise _out_of_range(name, value, bound.describe(integer=tp is int))
        return number
    if tp is str:
        if not isinstance(value, str):
            raise _fail(name, value, "a string")
        if name in _NON_EMPTY and not value.strip():
            raise _fail(name, value, "a non-empty string")
        if name == "dtype" and value not in DTYPES:
            raise _fail(name, value, "one of " + ", ".join(DTYPES))
        if name == "device" and not DEVICE_PATTERN.fullmatch(value):
            raise _fail(name, value, "auto, cpu, mps, cuda or cuda:<index>")
        return value
    if tp == str | None:
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise _fail(name, value, "a file path or null")
        return value
    if typing.get_origin(tp) is dict:
        mapping = _as_yaml(name, value, dict)
        if not all(isinstance(k, str) for k in mapping):
            raise _fail(name, value, "a mapping with string keys")
        if args[1] is str and not all(isinstance(v, str) and v for v in mapping.values()):
            raise _fail(name, value, "a mapping of strings to non-empty strings")
        return mapping
    if typing.get_origin(tp) is list:
        items = _as_yaml(name, value, list)
        if not all(isinstance(v, str) and v.strip() for v in items):
            raise _fail(name, value, "a list of non-empty strings")
        return items
    raise TypeError(f"no check for field {name!r} of type {tp}")


__all__ = ["Bound", "BoundedConfig", "ValidatedConfig", "check_field", "field_types"]
