"""The one error type of a run's setup that is the user's to fix, for every layer from the harness up.

A config value of the wrong type or outside its range, a run dir that already holds a run, a
resume that contradicts the run it continues: each is :class:`ConfigError`, one line naming what
was wrong and what is allowed. The trainer commands declare it as their user error, so
``pettingllm`` prints it as it is (exit status 2) instead of a traceback.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value of the wrong type or outside its range, or a run dir that refuses the start;
    the message is one line that names the field, the value and what is allowed (the CLI prints
    it as it is)."""


__all__ = ["ConfigError"]
