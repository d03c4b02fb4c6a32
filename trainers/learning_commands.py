"""The ``pettingllm sft`` and ``pettingllm learning`` commands, declared as plug-ins
(:mod:`pettingllm_envs.cli.plugins`; entry points in ``pyproject.toml``). Imported on every
``pettingllm`` start for the ``--help`` listing, so nothing heavy is imported here."""

from __future__ import annotations

from pettingllm_envs.cli.plugins import Command
from trainers.commands import MODEL_LIBRARIES, TRAIN_EXTRA

SFT = Command(summary="warm-start a policy (shared or per role) on the scripted oracle's demonstrations, with "
                      "injected mistakes", parser="trainers.sft:build_parser", main="trainers.sft:main",
              needs=MODEL_LIBRARIES, needs_hint=TRAIN_EXTRA, loads_models=True,
              user_errors=("trainers.sft:SFTConfigError",))
LEARNING = Command(summary="AT-GRPO vs its ablations and the single-agent baseline from one warm start, on "
                           "held-out problems (--quick: the CI check)", parser="trainers.learning:build_parser",
                   main="trainers.learning:main", needs=(*MODEL_LIBRARIES, "matplotlib"),
                   needs_hint=TRAIN_EXTRA, loads_models=True)
