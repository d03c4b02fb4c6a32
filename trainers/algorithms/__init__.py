"""The algorithms, each a short module on the harness: AT-GRPO (:mod:`trainers.algorithms.atgrpo`), its
prompt-conditioned variants, self-consistency and M-GRPO."""
