"""Text spaces and the observation type for LLM environments.

PettingZoo's ``api_test`` checks that ``observation.dtype == observation_space.dtype``
and that every sampled action and every observation is ``contained`` in its space.
A plain ``str`` has no ``dtype`` and ``gymnasium.spaces.Text`` only contains strings made
of its (alphanumeric by default) charset, which model output never respects.

So observations are :class:`TextObservation`, a ``str`` subclass that carries the dtype
of a text space, and both spaces are :class:`UnicodeText`: any Unicode string up to a
maximum length is a member, while ``sample()`` draws printable ASCII (including the
empty string) so that random-action tests exercise the parsers with junk.
"""

from __future__ import annotations

import string
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Text

#: Characters sampled by ``UnicodeText.sample``: every printable ASCII character,
#: whitespace included, so random actions contain backticks, brackets and newlines.
SAMPLE_CHARSET = string.printable


class TextObservation(str):
    """An observation: the prompt text for one role, usable anywhere a ``str`` is.

    The only addition is ``dtype``, equal to the dtype of :class:`UnicodeText`,
    so that dtype checks written for NumPy observations pass.
    """

    __slots__ = ()
    dtype: ClassVar[np.dtype] = np.dtype(str)


class UnicodeText(Text):
    """Any Unicode string of length ``min_length..max_length``.

    ``contains`` accepts every character; ``sample`` draws from printable ASCII.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash((UnicodeText, self.min_length, self.max_length))
