"""Bridges from the trainer side to other RL libraries' training loops: TRL's
``environment_factory`` (:mod:`trainers.integrations.trl_env`, the ``trl`` extra)."""
