"""AT-GRPO: tree-structured best-of-N rollouts with groups keyed by (problem, agent, turn) and PPO-clip
updates, one shared policy or one per role. :mod:`~trainers.algorithms.atgrpo.config` holds its options,
:mod:`~trainers.algorithms.atgrpo.train` the loop."""
