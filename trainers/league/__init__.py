"""Leagues for the competitive envs: a pool of opponents (past snapshots, fixed seats, the current
policy), how often each is drawn, and openskill ratings (:mod:`.pool`)."""
