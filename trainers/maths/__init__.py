"""Pure RL maths and seeded randomness: advantages and grouping, the PPO-clip loss, importance
weights, confidence intervals, and seeds derived from a run's position. Tensors and numbers in, tensors
and numbers out; nothing here knows about models, envs or runs."""
