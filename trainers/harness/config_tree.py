"""A trainer's configuration as a tree of sections: :class:`ConfigTree`.

A config (AT-GRPO's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`, M-GRPO's config) is a
dataclass whose every field is a *section*: a dataclass of settings that the component reading
them owns (``model``: :class:`~trainers.models.spec.ModelSpec`, read by the policies;
``generation``: :class:`~trainers.generation.factory.GenerationSettings`; ``update``:
:class:`~trainers.learning.settings.UpdateSettings`; the shared ``task``, ``evaluation`` and
``run`` of :mod:`trainers.harness.sections`; an algorithm's own). Each setting is declared and
documented once, in its section, and a component is handed its section, never the whole config.

Setting names are unique across a tree's sections, so a setting can also be named without its
section: ``--lr 1e-6`` on the command line, ``lr: 1e-6`` in YAML and ``from_flat(lr=1e-6)`` in
Python mean ``update``... wherever ``lr`` lives. A YAML file or a saved ``config.json`` may give
sections as mappings (``model: {model: DIR, lora: true}``) or settings by name, or both; a run
dir's flat ``config.json`` written before the tree existed reads the same way. A name that is a
section and a setting at once (``model``) is the section when its value is a mapping.

Every value is coerced and range-checked by :func:`~trainers.harness.fields.check_field` against
the tree's ``bounds`` table (:meth:`ConfigTree.check_fields`), so one mistake reads the same from
the command line, a YAML file or a saved run.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from trainers.harness.errors import ConfigError
from trainers.harness.fields import Bound, check_field
from trainers.models.spec import ModelSpecError

_SECTIONS: dict[type, dict[str, type]] = {}
_OWNERS: dict[type, dict[str, str]] = {}


def section_types(cls: type) -> dict[str, type]:
    """Section name -> section class of config tree ``cls`` (every field of a tree is a section)."""
    if cls in _SECTIONS:
        return _SECTIONS[cls]
    hints = typing.get_type_hints(cls)
    types = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    loose = [name for name, tp in types.items() if not dataclasses.is_dataclass(tp)]
    if loose:
        raise TypeError(f"{cls.__name__}: fields {loose} are not sections (dataclasses)")
    _SECTIONS[cls] = types
    return types


def setting_sections(cls: type) -> dict[str, str]:
    """Setting name -> the name of its section in config tree ``cls``; a setting declared in two
    sections is a :class:`TypeError` (names must be unique for the flat forms to mean one thing)."""
    if cls in _OWNERS:
        return _OWNERS[cls]
    owner: dict[str, str] = {}
    for section, tp in section_types(cls).items():
        for f in dataclasses.fields(tp):
            if f.name in owner:
                raise TypeError(f"{cls.__name__}: setting {f.name!r} is declared in sections "
                                f"{owner[f.name]!r} and {section!r}")
            owner[f.name] = section
    _OWNERS[cls] = owner
    return owner


def unknown_keys(keys: list[str], known: list[str], source: str) -> ConfigError:
    """The one-line error for config keys that name no setting, with the closest name of each."""
    hints = "".join(f"; {k!r}: did you mean {m[0]!r}?" for k in keys if (m := difflib.get_close_matches(k, known, n=1)))
    return ConfigError(f"unknown config keys in {source}: {keys}{hints}")


TreeT = TypeVar("TreeT", bound="ConfigTree")


@dataclass
class ConfigTree:
    """A config made of sections (module docstring). A subclass declares its sections as fields
    with default factories (the algorithm's defaults) and sets ``bounds``."""

    bounds: ClassVar[Mapping[str, Bound]]
    """The allowed range of every numeric setting of the tree's sections."""

    @classmethod
    def set_bounds(cls, table: Mapping[str, Bound]) -> None:
        """Take ``bounds`` from ``table`` (ranges by setting name, as
        :data:`trainers.harness.sections.BOUNDS`): the entries of this tree's settings."""
        cls.bounds = {name: bound for name, bound in table.items() if name in setting_sections(cls)}

    @classmethod
    def from_flat(cls: type[TreeT], **settings: Any) -> TreeT:
        """The defaults with ``settings`` (by name, or whole sections) applied; not yet validated."""
        return cls().with_values(settings)

    def with_values(self: TreeT, values: Mapping[str, Any], *, source: str = "the config",
                    ignore_unknown: bool = False) -> TreeT:
        """A copy with ``values`` applied: sections as mappings or section instances, settings by
        name. An unknown key is a :class:`ConfigError` naming ``source`` (or skipped with
        ``ignore_unknown``, for a saved run whose settings have since gone)."""
        sections, owner = section_types(type(self)), setting_sections(type(self))
        changes: dict[str, dict[str, Any]] = {name: {} for name in sections}
        unknown = []
        for key, value in values.items():
            if key in sections and isinstance(value, sections[key]):
                changes[key].update(dataclasses.asdict(value))  # type: ignore[call-overload]
            elif key in sections and isinstance(value, Mapping):
                inside = {f.name for f in dataclasses.fields(sections[key])}
                unknown += [f"{key}.{name}" for name in value if name not in inside]
                changes[key].update({name: v for name, v in value.items() if name in inside})
            elif key in owner:
                changes[owner[key]][key] = value
            else:
                unknown.append(key)
        if unknown and not ignore_unknown:
            raise unknown_keys(sorted(unknown), [*sections, *owner], source)
        try:
            return dataclasses.replace(self, **{name: dataclasses.replace(getattr(self, name), **change)
                                                for name, change in changes.items() if change})
        except ModelSpecError as error:
            raise ConfigError(str(error)) from None

    def validate(self) -> None:
        """Coerce and check every setting (:meth:`check_fields`); a subclass adds the checks of
        combinations of settings."""
        self.check_fields()

    @classmethod
    def check_setting(cls, name: str, value: Any) -> Any:
        """``value`` coerced and checked as setting ``name`` of this tree (pure)."""
        return check_field(name, value, section_types(cls)[setting_sections(cls)[name]], cls.bounds)

    def check_fields(self) -> None:
        """Coerce every setting to its declared type in place (YAML reads ``1e-6`` as a string, the
        command line gives strings) and check it against its range in ``bounds``
        (:func:`~trainers.harness.fields.check_field`); raises :class:`ConfigError`."""
        for name, tp in section_types(type(self)).items():
            section = getattr(self, name)
            coerced = {f.name: check_field(f.name, getattr(section, f.name), tp, self.bounds)
                       for f in dataclasses.fields(tp)}
            try:
                setattr(self, name, dataclasses.replace(section, **coerced))
            except ModelSpecError as error:
                raise ConfigError(str(error)) from None

    def flat(self) -> dict[str, Any]:
        """Every setting by name (the names are unique across sections)."""
        return {name: getattr(getattr(self, section), name)
                for name, section in setting_sections(type(self)).items()}

    def replace(self: TreeT, **settings: Any) -> TreeT:
        """A copy with ``settings`` (by name) changed, checked as :meth:`with_values` checks."""
        return self.with_values(settings)


def config_json(config: ConfigTree) -> dict[str, Any]:
    """``config`` as JSON values section by section, the form ``config.json`` holds (lists, not tuples)."""
    return dict(json.loads(json.dumps(dataclasses.asdict(config))))


def flat_json(config: ConfigTree) -> dict[str, Any]:
    """Every setting of ``config`` by name, as JSON values (the form resume compares)."""
    return dict(json.loads(json.dumps(config.flat())))


__all__ = ["ConfigTree", "config_json", "flat_json", "section_types", "setting_sections", "unknown_keys"]
