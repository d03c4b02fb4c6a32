"""One policy-gradient update from scored samples (PPO-clip, KL, truncated importance weights) and its
metrics, shared by every algorithm."""
