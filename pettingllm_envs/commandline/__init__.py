"""What every ``pettingllm`` command line is built from, whichever package declares the command.

The env package's commands (:mod:`pettingllm_envs.cli`), the trainer's (``trainers/cli``) and a
third party's plug-in all report a mistake the same way, read options the same way and check an
env or a model the same way, because they take these pieces from here rather than from each
other. This package sits on the ground floor: it imports only the env registry and
:mod:`pettingllm_envs.extras`, never a command line.

=============  ======================================================================
``errors``     :class:`UsageError` (one line, exit status 2), close matches, an argparse
               parser with one-line errors and plain-text help, :func:`run_main`
``options``    field docstrings, boolean words, one ``--field`` option per dataclass field
``checks``     an env id, an env config, a model folder, a count: checked before any work
``commands``   :class:`Command`, the declaration of a plug-in command, and :func:`require`
=============  ======================================================================
"""
