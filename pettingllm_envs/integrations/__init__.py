"""Bridges to the wider ecosystem: a Gymnasium view of one role, Ray-distributed episodes
and sandbox runs (:mod:`pettingllm_envs.integrations.ray_backend`, needs the ``ray``
extra), and TRL's ``GRPOTrainer``: multi-turn through ``environment_factory``
(:mod:`trainers.integrations.trl_env`) or one action per completion
(:mod:`trainers.integrations.trl_adapter`), both needing ``trl``. Every bridge seats the roles it does not
drive with :mod:`pettingllm_envs.seats`.

Importing this package registers the Gymnasium ids ``pettingllm/<env_id>``.
"""

from pettingllm_envs.integrations.gymnasium_env import RoleEnv, gym_id, make_role_env, register_gymnasium_envs

register_gymnasium_envs()

__all__ = ["RoleEnv", "gym_id", "make_role_env", "register_gymnasium_envs"]
