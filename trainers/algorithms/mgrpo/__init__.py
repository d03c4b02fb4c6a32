"""M-GRPO (docs/design.md §6): hierarchical advantages, trajectory alignment, decoupled trainers."""
