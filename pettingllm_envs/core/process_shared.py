"""Heavy resources that envs share instead of copying, and how they cross a pickle: by reference.

Deep copies of an env share its heavy resources (datasets, the code judge's verdict cache, the
sandbox's fork server, the math verifier's worker pool). A pickle may be loaded in another
process, where those objects do not exist, so it carries each resource's *key* (a factory and
its arguments) instead of its value, and unpickling attaches to the loading process's own
resource for that key, made there on first use. In the process that pickled it the key finds
the very object, so an unpickled env shares it exactly as a deep copy does; in a fresh process
every unpickled env of one family attaches to one new resource.

Two ways to be shared by reference:

* :func:`process_resource`: the process's one ``factory(*args)``, kept for the process's
  lifetime (datasets). An env that gets a resource through it pickles it as a reference:
  ``TextAECEnv.__getstate__`` calls :func:`by_reference` and ``__setstate__`` :func:`resolved`.
* :func:`reduce_to_key`, for a resource class's ``__reduce__`` (the verdict cache): the object
  becomes the process's resource for its key, held weakly (it lives as long as its users), and
  pickles as that key.

Process-wide singletons of a module (the fork-server client, the verifier pool) need neither:
their ``__reduce__`` returns their global name, which pickle resolves in the loading process.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["ResourceReference", "by_reference", "process_resource", "reduce_to_key", "resolved"]

T = TypeVar("T")
Key = tuple[Callable[..., Any], tuple[Hashable, ...]]

# Reentrant: a factory may itself get a resource.
_LOCK = threading.RLock()
_MADE: dict[Key, Any] = {}
#: id of each value in ``_MADE`` -> its key (the values stay alive, so ids are not reused).
_KEY_OF: dict[int, Key] = {}
_ADOPTED: weakref.WeakValueDictionary[Key, Any] = weakref.WeakValueDictionary()


def _new_lock_after_fork() -> None:
    """A forked child starts with a free lock: another thread of the parent may have held it at the fork."""
    global _LOCK
    _LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


@dataclass(frozen=True)
class ResourceReference:
    """What a pickle carries instead of a :func:`process_resource`: its factory and arguments."""

    factory: Callable[..., Any]
    args: tuple[Hashable, ...]

    def resolve(self) -> Any:
        return process_resource(self.factory, *self.args)


def process_resource(factory: Callable[..., T], *args: Hashable) -> T:
    """The process's one ``factory(*args)``, made on the first call (thread-safe). ``factory``
    must be importable by name (a module-level function or class) for a pickle to name it."""
    key = (factory, args)
    with _LOCK:
        if key not in _MADE:
            value = factory(*args)
            _MADE[key] = value
            _KEY_OF[id(value)] = key
        return _MADE[key]


def by_reference(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with each value that is a :func:`process_resource` replaced by its reference."""
    out = {}
    for name, value in state.items():
        key = _KEY_OF.get(id(value))
        out[name] = ResourceReference(*key) if key is not None and _MADE.get(key) is value else value
    return out


def resolved(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with each :class:`ResourceReference` replaced by this process's resource."""
    return {name: value.resolve() if isinstance(value, ResourceReference) else value
            for name, value in state.items()}


def _attach(factory: Callable[..., T], *args: Hashable) -> T:
    """The live resource adopted for (``factory``, ``args``), or a new ``factory(*args)`` adopted now."""
    with _LOCK:
        value = _ADOPTED.get((factory, args))
        if value is None:
            value = factory(*args)
            _ADOPTED[(factory, args)] = value
        return value


def reduce_to_key(value: Any, factory: Callable[..., Any], *args: Hashable) -> tuple[Any, tuple[Any, ...]]:
    """For ``value.__reduce__``: ``value`` becomes this process's resource for (``factory``,
    ``args``) unless a live one already is, and unpickles as that process's resource (a new
    ``factory(*args)`` where there is none)."""
    with _LOCK:
        _ADOPTED.setdefault((factory, args), value)
    return _attach, (factory, *args)
